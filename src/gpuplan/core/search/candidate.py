"""One candidate of the search: a GPU type in a server shape with its best layout. `pick` builds the server around
it, prices it and checks the deadline, latency and budget (a light record that ranking reads); `materialize`
turns a kept pick into the full Candidate the plan shows (memory breakdown, speed with ranges, reasons). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpuplan.core.cost.clusters import needs_cluster
from gpuplan.core.layout_text import compact_layout_text
from gpuplan.core.search.ranking import over_budget
from gpuplan.core.search.shapes import Config
from gpuplan.core.server.common import Needs
from gpuplan.core.sizing.engine_memory import (
    admitted_memory,
    engine_cap,
    in_flight_bytes,
    in_flight_requests,
    serving_start_bytes,
)
from gpuplan.core.sizing.frameworks import stack_text
from gpuplan.core.sizing.grpo import with_rollout
from gpuplan.core.sizing.latency_curve import latency_curve
from gpuplan.core.sizing.memory import estimate_memory, memory_out
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.serving_load import Timing
from gpuplan.core.sizing.speed import (
    StepTime,
    StepWork,
    training_speed_result,
)
from gpuplan.schema.estimate import ActivationTable, Overheads
from gpuplan.schema.framework import FrameworkCaps
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import (
    Candidate,
    CandidateLayout,
    Evidence,
    Rejected,
    ServerSpec,
    TrainingStack,
)
from gpuplan.schema.project import Project
from gpuplan.schema.serving import EngineDefaults, Objectives
from gpuplan.schema.speed import SpeedModel, SpeedResult
from gpuplan.units import GIB, HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class Context:
    """What every candidate of one search shares."""

    project: Project
    arch: ModelArch
    params: ParamCount
    trainable: int
    speed: SpeedModel
    table: ActivationTable
    overheads: Overheads
    #: core.server.build_server over the catalog: `(needs)` builds the full spec (`materialize`)
    build_server: Callable[..., tuple[ServerSpec | None, str | None]]
    #: core.server.server_price over the catalog: whether that server is built, its price, why not (what the
    #: search compares)
    server_price: Callable[[Needs], tuple[bool, float | None, str | None]]
    #: reference rental price per GPU-hour, by GPU id
    rent_per_gpu_hour: dict[str, float]
    checkpoints_kept: int
    training: bool
    total_tokens: float | None
    deadline_h: float | None
    dataset_bytes: float
    #: how well each GPU's speed and price are known, by GPU id (core/search/evidence.py)
    evidence: dict[str, Evidence]
    #: what every server of the search stores (`storage_terms`): the weights' bytes, one checkpoint's, the bytes
    #: training reads from disk per token
    weights_bytes: int
    checkpoint_bytes: int
    bytes_per_token: float
    #: the plan's currency (the budget's): every amount of the search is in it
    currency: str = "USD"
    #: the serving engine's defaults (data/serving.toml): serving memory as the engine allocates it
    engine: EngineDefaults | None = None
    #: the terms every training layout of the search shares (TrainingTerms' cache), reused for the shown ones
    terms_cache: dict[tuple[object, ...], object] = field(default_factory=dict)
    #: training: what the project's framework can run and how it names its layouts (None: no framework declared)
    framework: FrameworkCaps | None = None
    #: the rental price per GPU-hour of a configuration, as its deployments price it (SearchInputs.rent_at)
    rent_at: Callable[[str, int, int], float | None] | None = None


def storage_terms(project: Project, params: ParamCount, trainable: int, dataset_bytes: float,
                  sample_tokens: int) -> tuple[int, int, float]:
    """(bytes of the 16-bit weights, of one checkpoint: the weights and the fp32 optimizer states of what trains,
    bytes read from disk per token trained: pre-tokenized text about 4 (2 for uint16 ids), images their encoded
    size), the same for every server of one search."""
    weights_b = params.total * 2
    full = project.workload.task in ("pretrain", "full-finetune")
    ckpt_b = weights_b + (params.total * 12 if full else trainable * 12)
    d = project.data
    per_sample = dataset_bytes / d.samples if d.samples and dataset_bytes else 0.0
    return weights_b, ckpt_b, (per_sample / sample_tokens if per_sample else 4.0)


@dataclass(eq=False, slots=True)
class Pick:
    """A kept candidate before its full result is built: what ranking, the growth view and the FAQ read."""

    gpu: Gpu
    gpus_per_server: int
    servers: int
    config: Config
    #: training: the timed step (work and time); inference: the speed result
    work: StepWork | None
    step: StepTime | None
    inference: SpeedResult | None
    grown_device_bytes: int
    cap: int
    usable: int
    #: what the server is built for (`materialize` builds its full spec)
    needs: Needs
    #: in the plan's currency
    price: float | None
    rent: float | None
    cost: float | None
    cost_basis: str | None
    time_hours: float | None
    request_latency_s: float | None
    checkpoint_bytes: float

    adequate: bool = True
    #: training: the layout of the shape the grown model takes when `config`'s own does not hold it (the grown
    #: bytes are that layout's)
    grown_as: Config | None = None
    #: inference: the timed operating point the speed result was built from (its latency curve is drawn from it)
    timing: Timing | None = None
    #: set by the ranking
    score: float = 0.0
    pareto: bool = False

    @property
    def gpu_id(self) -> str:
        return self.gpu.id


def _reject(rejected: list[Rejected], gpu: Gpu, ps: int, servers: int, code: str, reason: str,
            cost: float | None = None) -> None:
    rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers, code=code,
                             reason=reason, cost=cost))


def pick(ctx: Context, gpu: Gpu, ps: int, servers: int, c: Config, work: StepWork | None, step: StepTime | None,
         inference: SpeedResult | None, metric: float, grown: int, cap: int, usable: int,
         rejected: list[Rejected], grown_as: Config | None = None,
         timing: Timing | None = None) -> Pick | None:
    """The candidate `c` on `servers` x `ps` x `gpu`, or None (with the reason in `rejected`) when no server takes
    it or it misses the deadline, the latency target or the budget. `grown`: its bytes per GPU after the planned
    growth, those of `grown_as` when the grown model takes another layout of the shape."""
    proj = ctx.project
    training = ctx.training
    weights_b, ckpt_b = ctx.weights_bytes, ctx.checkpoint_bytes
    read_rate = (step.tokens_per_s / servers) * ctx.bytes_per_token if training and step is not None else 0.0
    # ServerNeeds' fields in its order (a test holds Needs to it), as it would validate them: bytes as floats
    needs = Needs(gpu.id, ps, servers, proj.data.modality, proj.goals.purpose, ctx.dataset_bytes, float(ckpt_b),
                  float(weights_b), 0.0, read_rate, c.layout.tp, servers > 1 and training, not training)
    built, server_price, why = ctx.server_price(needs)  # why it fails is written in either pass
    if not built:
        _reject(rejected, gpu, ps, servers, "no-server", why or "no server")
        return None
    price = None if server_price is None else server_price * servers  # each server carries its network share
    # as its deployments price it: instances that hold the GPUs sharing a machine, and across servers on one fabric
    # only a provider renting the GPU as a cluster (data/clusters.toml)
    fabric = needs_cluster(servers, ps, training, c.layout.tp * c.layout.pp)
    together = ps if training else min(ps, c.layout.tp * c.layout.pp)  # the GPUs that must share a machine
    rate = (ctx.rent_at(gpu.id, together, servers * ps if fabric else 0) if ctx.rent_at is not None
            else ctx.rent_per_gpu_hour.get(gpu.id))
    horizon = proj.growth.horizon_months
    rent = None
    if rate is not None:
        if training and step is not None and step.gpu_hours is not None:
            rent = step.gpu_hours * rate
        elif not training:
            rent = c.n * rate * HOURS_PER_MONTH * horizon
    cost: float | None = None
    basis: str | None = None
    if price is not None and (rent is None or price <= rent):  # the cheaper; buying when they are equal
        cost, basis = price, "buy"
    elif rent is not None:
        cost, basis = rent, "rent"
    time_h = latency = None
    if training:
        time_h = metric
        if ctx.deadline_h is not None and step is not None and step.wall is not None and metric > ctx.deadline_h:
            _reject(rejected, gpu, ps, servers, "deadline", f"misses the deadline: {metric / 24:,.1f} days against "
                    f"{ctx.deadline_h / 24:g}")
            return None
    else:
        latency = metric
        inf = inference.inference if inference is not None else None
        if inf is not None and inf.objectives_met is False and inf.objectives is not None:
            o = inf.objectives
            got = {"ttft": inf.ttft_s, "itl": inf.itl_s, "e2e": inf.e2e_s}
            stat = "p99" if o.percentile == 99 else ("p50" if o.percentile == 50 else "p90")
            parts = [f"{k} {getattr(got[k], stat):,.3g}"
                     f" s against {v:g} s" for k, v in (("ttft", o.ttft_s), ("itl", o.itl_s), ("e2e", o.e2e_s))
                     if v is not None and got[k] is not None]
            _reject(rejected, gpu, ps, servers, "latency", f"misses the objectives at p{o.percentile}: "
                    + "; ".join(parts))
            return None
        target = proj.workload.target_latency_s
        if target and metric > target:  # the mean alone (at the slow end for uncalibrated GPUs) is over it
            _reject(rejected, gpu, ps, servers, "latency", f"misses the latency target: {metric:,.1f} s per request "
                    f"on average against {target:g} s")
            return None
    no_rent = None  # why a GPU the price lists rent is not rented this way
    if rent is None and gpu.id in ctx.rent_per_gpu_hour:
        no_rent = (f"no provider in the price lists rents {gpu.id} as a multi-node cluster of {servers * ps} GPUs, "
                   f"for {servers} servers on one fabric" if fabric
                   else f"no quote in the price lists for an instance of {together} x {gpu.id}")
    why = over_budget(cost, basis, proj.goals.budget, horizon, training, price is not None and rent is not None,
                      no_rent)
    if why is not None:
        _reject(rejected, gpu, ps, servers, "no-price" if cost is None else "over-budget", why, cost)
        return None
    ev = ctx.evidence.get(gpu.id)
    return Pick(gpu=gpu, gpus_per_server=ps, servers=servers, config=c, work=work, step=step, inference=inference,
                grown_device_bytes=grown, cap=cap, usable=usable, needs=needs, price=price,
                rent=rent, cost=cost, cost_basis=basis, time_hours=time_h, request_latency_s=latency,
                checkpoint_bytes=ckpt_b, adequate=ev is None or ev.adequate, grown_as=grown_as,
                timing=timing)


def _layout_of(c: Config) -> CandidateLayout:
    """A training configuration's layout as a candidate shows it."""
    lay, w = c.layout, c.workload
    return CandidateLayout(zero=lay.zero, tp=lay.tp, pp=lay.pp, offload=lay.offload, dp=c.n // (lay.tp * lay.pp),
                           gradient_checkpointing=w.gradient_checkpointing, micro_batch_size=w.micro_batch_size,
                           global_batch_size=w.global_batch_size or 0)


#: how each objective's origin reads in a reason
ORIGIN_WORDS = {"slo": "the project's slo", "target_latency_s": "the project's target_latency_s"}


def objectives_text(o: Objectives) -> str:
    """ "objectives at p90: TTFT 2 s (the project's slo), ITL 0.05 s (...), E2E 23.5 s (use_case chat, scaled ...)":
    every objective in force and where it comes from (issue #27); "" without any."""
    parts = [f"{name} {v:,.3g} s ({ORIGIN_WORDS.get(o.origins.get(key, ''), o.origins.get(key) or o.origin)})"
             for key, name, v in (("ttft", "TTFT", o.ttft_s), ("itl", "ITL", o.itl_s), ("e2e", "E2E", o.e2e_s))
             if v is not None]
    return f"objectives at p{o.percentile}: " + ", ".join(parts) if parts else ""


def departures(ctx: Context, c: Config, usable: int, gpu_bytes: int | None = None) -> list[str]:
    """Where a training candidate departs from a setting the project states (gradient checkpointing, the
    micro-batch): which, and what the project's own setting would take on the same layout (issue #27: the plan
    never changes the project's settings without saying so)."""
    own, w = ctx.project.workload, c.workload
    parts = []
    changes: dict[str, object] = {}
    if "gradient_checkpointing" in own.model_fields_set and w.gradient_checkpointing != own.gradient_checkpointing:
        changes["gradient_checkpointing"] = own.gradient_checkpointing
        parts.append(f"gradient checkpointing {'on' if w.gradient_checkpointing else 'off'} (project: "
                     f"{'on' if own.gradient_checkpointing else 'off'})")
    if "micro_batch_size" in own.model_fields_set and w.micro_batch_size != own.micro_batch_size:
        changes["micro_batch_size"] = own.micro_batch_size  # the same global batch, other accumulation steps
        per = 2 if w.dpo is not None else 1  # a DPO policy runs 2 sequences per pair: said in pairs, as the project
        dp = max(c.n // (c.layout.tp * c.layout.pp), 1)
        share = (w.global_batch_size or 0) // dp  # each data-parallel rank's part of a step
        why = (f"; {(w.global_batch_size or 0) // per:,} per step over {dp} data-parallel ranks leave "
               f"{share // per} each" if share and share % own.micro_batch_size else "")
        parts.append(f"micro-batch {w.micro_batch_size // per} (project: {own.micro_batch_size // per}{why})")
    if not changes:
        return []
    ww = w.model_copy(update=changes)  # the recomputation and the micro-batch alone: the search's memory parts hold
    theirs = with_rollout(estimate_memory(ctx.arch, ctx.params, ww, c.layout, c.n, ctx.table, ctx.overheads,
                                          cache=ctx.terms_cache),
                          ctx.arch, ctx.params, ww, c.layout, c.n, ctx.overheads, ctx.engine, gpu_bytes).device_bytes
    return [f"departs from the project, the fastest that fits: {', '.join(parts)}; the project's settings need "
            f"{theirs / GIB:,.1f} GiB per GPU here, " + ("within" if theirs <= usable else "over") + " the usable"]


def materialize(ctx: Context, k: Pick) -> Candidate:
    """The full Candidate of a kept pick: its memory breakdown, its speed with ranges, and the reasons."""
    c, gpu = k.config, k.gpu
    lay, w = c.layout, c.workload
    start = in_flight = None
    n_in_flight = w.batch_size
    if ctx.engine is not None and not ctx.training:  # what the engine holds at the load within its usable share
        # the requests the load keeps in flight per replica (a fixed batch, or the concurrency the serving model
        # finds for users or an arrival rate; core/estimate: the same figure), every one held, none queued
        n_in_flight = in_flight_requests(ctx.arch, w, k.inference.inference if k.inference is not None else None)
        at_load = w.model_copy(update={"batch_size": n_in_flight})
        mem = admitted_memory(ctx.arch, ctx.params, at_load, lay, lay.tp * lay.pp, ctx.overheads, ctx.engine,
                              k.usable, gpu_bytes=k.cap)[0]
        start = serving_start_bytes(ctx.arch, ctx.params, w, lay, lay.tp * lay.pp, ctx.overheads, ctx.engine, k.cap)
        in_flight = in_flight_bytes(ctx.arch, ctx.params, w, lay, lay.tp * lay.pp, ctx.overheads, ctx.engine,
                                    n_in_flight, k.cap)
    else:
        mem = estimate_memory(ctx.arch, ctx.params, w, lay, c.n if ctx.training else lay.tp, ctx.table, ctx.overheads,
                              cache=ctx.terms_cache if ctx.training else None)
        if ctx.training:  # GRPO: the rollout phase (core/sizing/grpo.py); any other workload as it is
            mem = with_rollout(mem, ctx.arch, ctx.params, w, lay, c.n, ctx.overheads, ctx.engine,
                               int(gpu.memory_gib * GIB) if gpu is not None else None)
    time = stack = None
    if ctx.training:
        assert k.work is not None and k.step is not None
        stack = TrainingStack(framework=w.framework, stack=w.stack,
                              text=stack_text(ctx.framework, w.task, lay, c.n, w.stack))
        time = training_speed_result(k.work, k.step, gpu, ctx.speed, ctx.total_tokens).time
        layout = CandidateLayout(zero=lay.zero, tp=lay.tp, pp=lay.pp, offload=lay.offload, dp=c.n // (lay.tp * lay.pp),
                                 gradient_checkpointing=w.gradient_checkpointing, micro_batch_size=w.micro_batch_size,
                                 global_batch_size=w.global_batch_size or 0)
    else:
        layout = CandidateLayout(zero=lay.zero, tp=lay.tp, pp=lay.pp, offload=lay.offload,
                                 replicas=c.n // (lay.tp * lay.pp), batch_per_replica=n_in_flight)
    reasons = [f"{mem.device_bytes / GIB:,.1f} GiB per GPU of {k.cap / GIB:,.1f} ({k.usable / GIB:,.1f} usable); "
               f"{k.grown_device_bytes / GIB:,.1f} GiB after the planned growth"
               + (f", the grown model run as {compact_layout_text(_layout_of(k.grown_as))} (this layout would need "
                  f"{k.config.grown / GIB:,.1f})" if k.grown_as is not None and k.config.grown is not None else "")]
    if stack is not None:
        reasons.append(f"stack: {stack.text}")
    if ctx.training:
        reasons += departures(ctx, c, k.usable, int(gpu.memory_gib * GIB) if gpu is not None else None)
    inf = k.inference.inference if k.inference is not None else None
    if inf is not None and inf.aggregate_tokens_per_s > 0:  # its cost per token is the chosen deployment's
        reasons.append(f"{inf.requests_per_s:,.2f} requests/s at the planned load; {inf.replicas} replica(s), "
                       f"{inf.capacity_requests_per_s or 0:,.2f} requests/s within the objectives")
    if inf is not None and inf.objectives is not None and objectives_text(inf.objectives):
        reasons.append(objectives_text(inf.objectives))
    ev = ctx.evidence.get(gpu.id)
    if ev is not None and not ev.adequate:
        reasons.insert(0, f"evidence: {ev.reasons[-1]} ({'; '.join(ev.reasons[:-1])})")
    if ctx.speed.generations[gpu.generation].basis == "prior":
        reasons.append(f"no published runs calibrate the speed of {gpu.generation} GPUs: ranked at the slow end of "
                       "the range")
    price, rent, cost, basis = k.price, k.rent, k.cost, k.cost_basis
    server = ctx.build_server(k.needs)[0]  # the server `pick` priced, with every figure and reason line
    assert server is not None, "the full build of a server that server_price built"
    memory = memory_out(mem, engine_cap(k.cap, w, ctx.engine) if ctx.engine is not None and not ctx.training
                        else k.cap)
    if start is not None:
        memory = memory.model_copy(update={"in_flight_bytes": in_flight, "in_flight_requests": n_in_flight,
                                           "start_bytes": start})
    return Candidate(
        gpu_id=gpu.id, gpu_name=gpu.name, gpus_per_server=k.gpus_per_server, servers=k.servers, layout=layout,
        memory=memory, time=time, inference=k.inference.inference if k.inference else None,
        server=server, fits=(mem.device_bytes if start is None else start) <= k.usable,
        fits_with_growth=k.grown_device_bytes <= k.usable,
        grown_device_bytes=k.grown_device_bytes,
        grown_layout=None if k.grown_as is None else _layout_of(k.grown_as),
        storage_need_bytes=ctx.dataset_bytes + ctx.checkpoints_kept * k.checkpoint_bytes,
        price=price, rent=rent, cost=cost, cost_basis=basis, currency=ctx.currency,
        time_hours=k.time_hours, request_latency_s=k.request_latency_s, score=k.score, pareto=k.pareto, reasons=reasons,
        evidence=ctx.evidence.get(gpu.id), stack=stack,
        latency_curve=latency_curve(k.timing, inf.objectives) if k.timing is not None and inf is not None else None,
    )


__all__ = ["Context", "Pick", "materialize", "pick", "storage_terms"]
