"""The search behind `gpuplan plan`: GPU type x GPUs per server x servers x layout, kept when they fit (with the
memory headroom and the growth the project plans) and meet the deadline and budget, ranked by the objective.

Pure: the inputs are the project, its resolved architecture, the catalog and the assumptions; no I/O.
Memory does not depend on the GPU type, only its capacity does, so each (GPU count, layout, micro-batch,
recomputation) is estimated once and compared with every GPU; the speed model then runs for the few most
promising layouts that fit each GPU (no recomputation, large micro-batches, little sharding first).
Time: O(GPU types x server shapes x a constant), linear in the catalog.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from gpuplan.catalog.hardware import Catalog
from gpuplan.core.search.growth import growth_rows, leanest
from gpuplan.core.sizing.memory import estimate_memory, memory_out, resolve
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.speed import estimate_inference_speed, estimate_training_speed, tokens_per_sample
from gpuplan.schema.estimate import ActivationTable, Note, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import Candidate, GrowthRow, PlanStats, Rejected, ServerNeeds, ServerSpec
from gpuplan.schema.project import Budget, Layout, Project, Workload
from gpuplan.schema.speed import SpeedModel
from gpuplan.units import GIB

SERVER_COUNTS = (1, 2, 4, 8, 16, 32, 64)
PER_SERVER = (1, 2, 4, 8)
#: layouts timed per (GPU, server shape): the most promising by the proxy order
TIMED_PER_SHAPE = 6


@dataclass(frozen=True)
class Config:
    """A way to run the workload on n GPUs (GPU-type independent)."""

    n: int
    layout: Layout
    workload: Workload
    device_bytes: int

    @property
    def key(self) -> tuple:  # type: ignore[type-arg]
        w = self.workload
        return (self.n, self.layout.zero, self.layout.tp, self.layout.pp, self.layout.offload,
                w.gradient_checkpointing, w.micro_batch_size if w.task != "inference" else w.batch_size)


@dataclass
class SearchInputs:
    project: Project
    arch: ModelArch  # None for a traced model (search_traced)
    grown_arch: ModelArch
    catalog: Catalog
    speed: SpeedModel
    table: ActivationTable
    overheads: Overheads
    #: builds the server around a candidate: (spec or None, reason)
    build_server: Callable[[ServerNeeds], tuple[ServerSpec | None, str | None]]
    #: USD -> the budget's currency
    usd_to_budget: float = 1.0
    #: reference rental price per GPU-hour (USD), by GPU id
    rent_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    #: checkpoints a run keeps (data/server_rules.toml)
    checkpoints_kept: int = 3
    notes: list[Note] = field(default_factory=list)


class SearchOutput(NamedTuple):
    #: ranked, best first
    candidates: list[Candidate]
    rejected: list[Rejected]
    stats: PlanStats
    #: the first `growth_top` candidates at x1, x1.5 and x2 the planned model size (core/search/growth.py)
    growth_view: list[GrowthRow]


def memory_headroom(project: Project) -> float:
    """The fraction of each GPU's memory the plan keeps free (constraints.memory_headroom, 10% without constraints)."""
    return project.constraints.memory_headroom if project.constraints else 0.10


def grow_arch(arch: ModelArch, scale: float) -> ModelArch:
    """The model grown `scale` times by depth (parameters and activations scale with the layers)."""
    if scale <= 1.0:
        return arch
    def up(n: int) -> int:
        return max(math.ceil(n * scale - 1e-9), n)

    upd: dict[str, int] = {"num_layers": up(arch.num_layers)}
    if arch.num_decoder_layers:
        upd["num_decoder_layers"] = up(arch.num_decoder_layers)
    if arch.moe is not None:
        upd_moe = arch.moe.model_copy(update={"moe_layers": up(arch.moe.moe_layers)})
        return arch.model_copy(update={**upd, "moe": upd_moe})
    return arch.model_copy(update=upd)


def grown_workload(w: Workload, p: Project, arch: ModelArch) -> Workload:
    g = p.growth
    if g is None:
        return w
    upd: dict[str, object] = {}
    if g.context_scale > 1:
        if w.task == "inference":
            base = w.context_length or w.sequence_length or resolve(arch, w).seq
            upd["context_length"] = math.ceil(base * g.context_scale)
        elif arch.kind not in ("vit", "cnn"):
            upd["sequence_length"] = math.ceil(resolve(arch, w).seq * g.context_scale)
    if g.users_scale > 1 and w.task == "inference":
        upd["batch_size"] = math.ceil(w.batch_size * g.users_scale)
    return w.model_copy(update=upd) if upd else w


def global_batch(p: Project) -> tuple[int, str]:
    """Sequences per optimizer step, the training recipe every candidate keeps."""
    w = p.workload
    if w.global_batch_size:
        return w.global_batch_size, "workload.global_batch_size"
    if p.hardware and p.hardware.gpus > 1:
        return w.micro_batch_size * p.hardware.gpus, "workload.micro_batch_size x hardware.gpus"
    return w.micro_batch_size * 8, "workload.micro_batch_size x 8 (no global_batch_size given: an 8-GPU node's batch)"


def _pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


def training_configs(arch: ModelArch, p: ParamCount, w: Workload, n: int, per_server: int, gbs: int,
                     table: ActivationTable, oh: Overheads) -> list[Config]:
    """Every layout of n GPUs (tensor parallel inside a server) with a micro-batch that divides the global batch."""
    out: list[Config] = []
    layers = arch.num_layers + arch.num_decoder_layers
    for tp in _pow2_upto(min(per_server, 8)):
        if arch.kind in ("cnn",) and tp > 1:
            continue
        if tp > 1 and arch.num_heads % tp:
            continue
        for pp in _pow2_upto(min(8, n // tp)):
            if pp > 1 and (layers < 2 * pp or arch.kind != "decoder"):
                continue
            if n % (tp * pp):
                continue
            dp = n // (tp * pp)
            if dp > gbs:
                continue
            share = gbs // dp
            for zero in ((0, 1, 2, 3) if dp > 1 else (0,)):
                for ckpt in ((False, True) if arch.kind != "cnn" else (False,)):
                    for mbs in _pow2_upto(min(share, 64)):
                        if share % mbs:
                            continue
                        trial = w.model_copy(update={"micro_batch_size": mbs, "global_batch_size": mbs * dp * (share // mbs),
                                                     "gradient_checkpointing": ckpt})
                        lay = Layout(zero=zero, tp=tp, pp=pp)
                        mem = estimate_memory(arch, p, trial, lay, n, table, oh)
                        out.append(Config(n=n, layout=lay, workload=trial, device_bytes=mem.device_bytes))
    return out


def inference_configs(arch: ModelArch, p: ParamCount, w: Workload, n: int, per_server: int,
                      table: ActivationTable, oh: Overheads) -> list[Config]:
    out: list[Config] = []
    for tp in _pow2_upto(min(per_server, 8)):
        if n % tp or (tp > 1 and arch.num_heads % tp):
            continue
        replicas = n // tp
        batch = max(math.ceil(w.batch_size / replicas), 1)
        trial = w.model_copy(update={"batch_size": batch})
        lay = Layout(tp=tp)
        mem = estimate_memory(arch, p, trial, lay, tp, table, oh)
        out.append(Config(n=n, layout=lay, workload=trial, device_bytes=mem.device_bytes))
    return out


def _proxy(c: Config) -> tuple:  # type: ignore[type-arg]
    """Order to time layouts in: no recomputation, little model parallelism, low ZeRO, big micro-batches."""
    lay, w = c.layout, c.workload
    return (w.gradient_checkpointing, lay.tp * lay.pp, lay.zero, -(w.micro_batch_size or 1))


def max_gpus_per_server(gpu: Gpu, catalog: Catalog) -> int:
    best = 0
    for pl in catalog.platforms.rows.values():
        if gpu.form_factor not in pl.gpu_form_factors or gpu.tdp_w > pl.gpu_max_tdp_w:
            continue
        if pl.compatible_gpu_ids and gpu.id not in pl.compatible_gpu_ids:
            continue
        if gpu.slot_width and pl.gpu_max_slot_width and gpu.slot_width > pl.gpu_max_slot_width:
            continue
        best = max(best, pl.gpu_slots)
    return best


def allowed_gpus(inp: SearchInputs, rejected: list[Rejected]) -> list[Gpu]:
    cons = inp.project.constraints
    table = inp.catalog.gpus
    rows: Iterable[Gpu]
    if cons and cons.gpus:
        rows = [table.find(name, ["constraints", "gpus", i]) for i, name in enumerate(cons.gpus)]
    else:
        rows = table.rows.values()
    excluded = {table.find(name, ["constraints", "exclude_gpus", i]).id
                for i, name in enumerate(cons.exclude_gpus if cons else [])}
    out = []
    production = inp.project.goals is not None and inp.project.goals.purpose == "production"
    for g in rows:
        if g.id in excluded:
            continue
        if cons and cons.datacenter_only and g.market_class != "datacenter":
            rejected.append(Rejected(gpu_id=g.id, gpus_per_server=0, servers=0,
                                     reason=f"{g.market_class} card: constraints.datacenter_only"))
            continue
        if production and g.market_class == "consumer":
            rejected.append(Rejected(gpu_id=g.id, gpus_per_server=0, servers=0,
                                     reason="consumer card in production: the GeForce driver licence excludes "
                                            "datacenter deployment, no ECC, no 24/7 support"))
            continue
        out.append(g)
    return out


def training_tokens(project: Project, tok_sample: int) -> tuple[float | None, str | None]:
    """Tokens (images for CNNs) a training run processes, and how they were derived: workload.tokens, or
    workload.epochs x data.samples x tokens per sample (each sample padded or packed to the sequence)."""
    w, d = project.workload, project.data
    if w.tokens:
        return w.tokens, "workload.tokens"
    if w.epochs and d and d.samples:
        return w.epochs * d.samples * tok_sample, (f"workload.epochs ({w.epochs:g}) x data.samples ({d.samples:,}) "
                                                   f"x {tok_sample} tokens per sample")
    return None, None


def search(inp: SearchInputs, objective: str, growth_top: int | None = None) -> SearchOutput:
    """The ranked candidates, the rejected shapes and why, and the growth view of the first `growth_top` candidates
    (all when None)."""
    t0 = time.perf_counter()
    proj, arch = inp.project, inp.arch
    w = proj.workload
    training = w.task != "inference"
    p = count_params(arch)
    p_grown = count_params(inp.grown_arch)
    w_grown = grown_workload(w, proj, arch)
    cons = proj.constraints
    headroom = memory_headroom(proj)
    rejected: list[Rejected] = []
    gpus = allowed_gpus(inp, rejected)
    gbs, _ = global_batch(proj)
    tok_sample = tokens_per_sample(arch, w)
    tokens = training_tokens(proj, tok_sample)[0] if training else None
    deadline_h = proj.goals.deadline_days * 24 if proj.goals and proj.goals.deadline_days else None
    budget = proj.goals.budget if proj.goals else None
    horizon = proj.growth.horizon_months if proj.growth else 36
    modality = proj.data.modality if proj.data else "text"
    dataset_bytes = (proj.data.size_gb * 1e9 if proj.data and proj.data.size_gb else 0.0) * \
        (proj.growth.data_scale if proj.growth else 1.0)

    configs: dict[tuple[int, int], list[Config]] = {}
    grown_dev: dict[tuple, int] = {}  # type: ignore[type-arg]
    model_scale = proj.growth.model_scale if proj.growth else 1.0
    # the model at `factor` x the planned size, and its parameters
    grown_models: dict[float, tuple[ModelArch, ParamCount]] = {1.0: (inp.grown_arch, p_grown)}
    evaluated = 0

    def configs_for(n: int, per_server: int) -> list[Config]:
        nonlocal evaluated
        key = (n, min(per_server, 8))
        if key not in configs:
            cs = (training_configs(arch, p, w, n, per_server, gbs, inp.table, inp.overheads) if training
                  else inference_configs(arch, p, w, n, per_server, inp.table, inp.overheads))
            evaluated += len(cs)
            configs[key] = sorted(cs, key=_proxy)
        return configs[key]

    def grown_model(factor: float) -> tuple[ModelArch, ParamCount]:
        if factor not in grown_models:
            a = grow_arch(arch, model_scale * factor)
            grown_models[factor] = (a, count_params(a))
        return grown_models[factor]

    def grown_device(c: Config, factor: float = 1.0) -> int:
        """Peak bytes per GPU of a layout after the planned growth, with the model `factor` times the planned size."""
        key = (c.key, factor)
        if key not in grown_dev:
            gw = grown_workload(c.workload, proj, arch) if training else c.workload.model_copy(
                update={"batch_size": max(math.ceil(w_grown.batch_size / (c.n // c.layout.tp)), 1),
                        "context_length": w_grown.context_length})
            a, pa = grown_model(factor)
            m = estimate_memory(a, pa, gw, c.layout, c.n if training else c.layout.tp, inp.table, inp.overheads)
            grown_dev[key] = m.device_bytes
        return grown_dev[key]

    candidates: list[Candidate] = []
    #: for the growth view: each candidate's layout, each GPU's usable bytes and the server shapes tried for it
    config_of: dict[tuple[str, int, int], Config] = {}
    usable_of: dict[str, int] = {}
    tried: dict[str, list[tuple[int, int]]] = {}
    timed = 0
    for gpu in gpus:
        max_ps = max_gpus_per_server(gpu, inp.catalog)
        if cons and cons.max_gpus_per_server:
            max_ps = min(max_ps, cons.max_gpus_per_server)
        if max_ps == 0:
            rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=0, servers=0,
                                     reason=f"no platform in the catalog takes {gpu.form_factor} {gpu.name} cards"))
            continue
        cap = int(gpu.memory_gib * GIB)
        usable = int(cap * (1 - headroom))
        usable_of[gpu.id] = usable
        shapes = [(ps, 1) for ps in PER_SERVER if ps <= max_ps]
        if max_ps >= 72:
            shapes.append((72, 1))
        top = max(ps for ps, _ in shapes)
        max_servers = cons.max_servers if cons and cons.max_servers else SERVER_COUNTS[-1]
        # more servers only while the job does not fit or misses the deadline on fewer (one doubling more
        # when time is the objective): a bigger cluster at the same GPU-hours is not a server to get
        more = [(top, s) for s in SERVER_COUNTS[1:] if s <= max_servers and (training or s <= 4)]
        best_fail: list[tuple[int, int, int]] = []  # smallest device bytes seen that did not fit

        def evaluate(ps: int, servers: int) -> str:
            """Try one server shape: "ok", or why not ("no-fit", "deadline": more GPUs may help; "other")."""
            nonlocal timed
            n = ps * servers
            cs = configs_for(n, ps)
            tried.setdefault(gpu.id, []).append((ps, servers))
            fitting = [c for c in cs if c.device_bytes <= usable]
            if not fitting:
                smallest = min((c.device_bytes for c in cs), default=None)
                if smallest is not None and (not best_fail or smallest < best_fail[0][0]):
                    best_fail[:] = [(smallest, ps, servers)]
                return "no-fit"
            grown_ok = [c for c in fitting[:4 * TIMED_PER_SHAPE] if grown_device(c) <= usable]
            if not grown_ok:
                g0 = min(grown_device(c) for c in fitting[:4 * TIMED_PER_SHAPE])
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers,
                                         reason=f"fits today, not after the planned growth: {g0 / GIB:,.1f} GiB per "
                                                f"GPU against {usable / GIB:,.1f} GiB usable"))
                return "no-fit"
            best: tuple[float, Config, object] | None = None
            for c in grown_ok[:TIMED_PER_SHAPE]:
                timed += 1
                if training:
                    r = estimate_training_speed(arch, p, c.workload, c.layout, n, gpu, inp.speed, inp.table,
                                                trainable=_trainable(arch, p, c.workload), total_tokens=tokens,
                                                gpus_per_node=ps)
                    assert r.time is not None
                    metric = (r.time.wall_hours if r.time.wall_hours is not None
                              else 1e9 / r.time.tokens_per_s / 3600)
                else:
                    r = estimate_inference_speed(arch, p, c.workload, c.layout, n, gpu, inp.speed, gpus_per_node=ps)
                    assert r.inference is not None
                    metric = r.inference.request_latency_s
                if best is None or metric < best[0]:
                    best = (metric, c, r)
            assert best is not None
            metric, c, r = best
            gen = inp.speed.generations[gpu.generation]
            if gen.basis == "prior":  # no published runs calibrate this generation: rank at its slow end
                metric /= inp.speed.params.range_low
            before = len(rejected)
            cand = _candidate(inp, gpu, ps, servers, c, r, metric, grown_device(c), cap, usable, training, modality,
                              dataset_bytes, horizon, budget, deadline_h, rejected)
            if cand is not None:
                candidates.append(cand)
                config_of[(gpu.id, ps, servers)] = c
                return "ok"
            return "deadline" if len(rejected) > before and "deadline" in rejected[-1].reason else "other"

        status = "other"
        for ps, servers in shapes:
            status = evaluate(ps, servers)
        extra = 1 if objective == "time" else 0
        for ps, servers in more:
            if any(cd.gpu_id == gpu.id for cd in candidates):
                if extra == 0:
                    break
                extra -= 1
            elif status == "other":  # over budget, no price, no platform: more servers will not help
                break
            status = evaluate(ps, servers)
        if best_fail and not any(cd.gpu_id == gpu.id for cd in candidates) and \
                not any(rj.gpu_id == gpu.id for rj in rejected):
            dev, ps, servers = best_fail[0]
            rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers,
                                     reason=f"does not fit: needs {dev / GIB:,.1f} GiB per GPU at best on {ps * servers}"
                                            f" GPUs, {usable / GIB:,.1f} GiB usable ({gpu.memory_gib:g} GiB less "
                                            f"{headroom:.0%} headroom)"))
    same_cost = same_cost_usd(budget, horizon, inp.usd_to_budget)
    ranked = rank(candidates, objective, same_cost)
    growth: list[GrowthRow] = []
    lean: dict[tuple[int, int], list[Config]] = {}
    for cand in ranked[:growth_top] if growth_top else ranked:
        for ps, s in tried[cand.gpu_id]:
            if (ps, s) not in lean:
                lean[(ps, s)] = leanest(configs_for(ps * s, ps))
        shapes_tried = [(ps * s, lean[(ps, s)]) for ps, s in tried[cand.gpu_id]]
        growth += growth_rows(cand, config_of[(cand.gpu_id, cand.gpus_per_server, cand.servers)],
                              usable_of[cand.gpu_id], shapes_tried, model_scale, lambda f: grown_model(f)[1].total,
                              grown_device)
    stats = PlanStats(candidates_evaluated=evaluated + timed, search_seconds=time.perf_counter() - t0,
                      gpu_types=len(gpus), same_cost_usd=same_cost)
    return SearchOutput(ranked, rejected, stats, growth)


def _trainable(arch: ModelArch, p: ParamCount, w: Workload) -> int:
    if w.task in ("lora", "qlora"):
        from gpuplan.core.sizing.lora import lora_params
        from gpuplan.schema.project import LoraSpec

        spec = w.lora or LoraSpec()
        return lora_params(arch, spec.rank, spec.targets)
    return p.total


def _candidate(inp: SearchInputs, gpu: Gpu, ps: int, servers: int, c: Config, r: object, metric: float, grown: int,
               cap: int, usable: int, training: bool, modality: str, dataset_bytes: float, horizon: int,
               budget: object, deadline_h: float | None, rejected: list[Rejected]) -> Candidate | None:
    from gpuplan.schema.speed import SpeedResult

    assert isinstance(r, SpeedResult)
    proj, arch = inp.project, inp.arch
    p = count_params(arch)
    lay, w = c.layout, c.workload
    mem = estimate_memory(arch, p, w, lay, c.n if training else lay.tp, inp.table, inp.overheads)
    weights_b = p.total * 2
    ckpt_b = weights_b + (p.total * 12 if w.task in ("pretrain", "full-finetune") else _trainable(arch, p, w) * 12)
    read_rate = 0.0
    if training and r.time is not None:
        # bytes per token on disk: pre-tokenized text about 4 bytes (2 for uint16 ids); images their encoded size
        per_sample = dataset_bytes / proj.data.samples if proj.data and proj.data.samples and dataset_bytes else 0.0
        tok = tokens_per_sample(arch, w)
        read_rate = (r.time.tokens_per_s / servers) * (per_sample / tok if per_sample else 4.0)
    needs = ServerNeeds(gpu_id=gpu.id, gpus_per_server=ps, servers=servers, modality=modality,
                        purpose=proj.goals.purpose if proj.goals else "experiment", dataset_bytes=dataset_bytes,
                        checkpoint_bytes=ckpt_b, weights_bytes=weights_b,
                        offload_bytes=0.0, data_read_bytes_per_s=read_rate, tensor_parallel=lay.tp,
                        multi_node=servers > 1 and training)
    spec, why = inp.build_server(needs)
    if spec is None:
        rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers, reason=why or "no server"))
        return None
    price = None if spec.price_usd is None else spec.price_usd * servers  # each server carries its network share
    reasons: list[str] = []
    rate = inp.rent_per_gpu_hour.get(gpu.id)
    rent = None
    if rate is not None:
        if training and r.time is not None and r.time.gpu_hours is not None:
            rent = r.time.gpu_hours * rate
        elif not training:
            rent = c.n * rate * 730.0 * horizon
    options = [(v, k) for v, k in ((price, "buy"), (rent, "rent")) if v is not None]
    cost, basis = min(options) if options else (None, None)
    time_h = latency = None
    if training:
        time_h = metric
        if deadline_h is not None and r.time is not None and r.time.wall_hours is not None and metric > deadline_h:
            rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers,
                                     reason=f"misses the deadline: {metric / 24:,.1f} days against "
                                            f"{deadline_h / 24:g}"))
            return None
    else:
        latency = metric
        target = proj.workload.target_latency_s
        if target and metric > target:
            rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers,
                                     reason=f"misses the latency target: {metric:,.1f} s per request against "
                                            f"{target:g} s"))
            return None
    why = over_budget(cost, basis, budget, horizon, inp.usd_to_budget, training)
    if why is not None:
        rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers, reason=why))
        return None
    layout: dict[str, int | str | bool] = {"zero": lay.zero, "tp": lay.tp, "pp": lay.pp, "offload": lay.offload}
    if training:
        layout.update(dp=c.n // (lay.tp * lay.pp), gradient_checkpointing=w.gradient_checkpointing,
                      micro_batch_size=w.micro_batch_size, global_batch_size=w.global_batch_size or 0)
    else:
        layout.update(replicas=c.n // lay.tp, batch_per_replica=w.batch_size)
    reasons.append(f"{mem.device_bytes / GIB:,.1f} GiB per GPU of {cap / GIB:,.1f} ({usable / GIB:,.1f} usable); "
                   f"{grown / GIB:,.1f} GiB after the planned growth")
    if inp.speed.generations[gpu.generation].basis == "prior":
        reasons.append(f"no published runs calibrate the speed of {gpu.generation} GPUs: ranked at the slow end of "
                       "the range")
    if cost is not None:
        reasons.append(f"cost {'to buy' if basis == 'buy' else 'to rent'}: ${cost:,.0f}"
                       + (f" (buying: ${price:,.0f})" if basis == "rent" and price is not None else "")
                       + (f" (renting: ${rent:,.0f})" if basis == "buy" and rent is not None else ""))
    return Candidate(
        gpu_id=gpu.id, gpu_name=gpu.name, gpus_per_server=ps, servers=servers, layout=layout,
        memory=memory_out(mem, cap), time=r.time, inference=r.inference, server=spec,
        fits=mem.device_bytes <= usable, fits_with_growth=grown <= usable, grown_device_bytes=grown,
        storage_need_bytes=dataset_bytes + inp.checkpoints_kept * ckpt_b,
        price_usd=price, rent_usd=rent, cost_usd=cost, cost_basis=basis, time_hours=time_h,
        request_latency_s=latency, score=0.0, reasons=reasons,
    )


def over_budget(cost: float | None, basis: str | None, budget: Budget | None, horizon: int, usd_to_budget: float,
                training: bool) -> str | None:
    """Why a candidate's cost (USD, the cheaper of buying and renting) breaks goals.budget; None when it does not
    (or there is no budget)."""
    if budget is None:
        return None
    if cost is None:
        return "no purchase or rental price in the catalog to check against goals.budget (add one with --catalog)"
    local = cost * usd_to_budget
    limit = budget.amount if budget.period == "total" else budget.amount * horizon
    if local <= limit:
        return None
    what = "to buy" if basis == "buy" else ("to rent for the run" if training else f"to rent for {horizon} months")
    return (f"over budget: {local:,.0f} {budget.currency} {what} (the cheaper of buying and renting), budget "
            f"{limit:,.0f} {budget.currency}"
            + (f" ({budget.amount:,.0f}/month x {horizon} months)" if budget.period == "monthly" else ""))


#: costs (objective cost) or times (objective time) within this ratio count as the same: the estimates are
#: not finer than that (docs/accuracy.md: median errors of 10-15% for time)
SAME = 1.1
#: with a budget, costs closer than this fraction of it count as the same too: a difference under 1% of what
#: the team can spend does not decide the purchase, the simpler machine does
SAME_BUDGET_FRACTION = 0.01


def same_cost_usd(budget: Budget | None, horizon: int, usd_to_budget: float) -> float:
    """The cost difference (USD) under which the cost objective counts two candidates as equally cheap."""
    if budget is None:
        return 0.0
    limit = budget.amount if budget.period == "total" else budget.amount * horizon
    return SAME_BUDGET_FRACTION * limit / usd_to_budget


def rank(cands: list[Candidate], objective: str, same_cost: float = 0.0) -> list[Candidate]:
    """Score (lower is better) by the objective, mark the Pareto front of cost vs time, sort. Cost is the cheaper
    of buying and renting; a candidate without any price ranks after the priced ones. `same_cost` (USD): costs
    that much above the cheapest still count as the cheapest (same_cost_usd)."""
    if not cands:
        return []

    def t(c: Candidate) -> float:
        return c.time_hours if c.time_hours is not None else (c.request_latency_s or math.inf)

    priced = [c.cost_usd for c in cands if c.cost_usd is not None]
    p_min = min(priced) if priced else 1.0
    t_min = min(t(c) for c in cands) or 1e-9
    out = []
    for c in cands:
        price = c.cost_usd if c.cost_usd is not None else math.inf
        if objective == "cost":
            # costs within 10% (or same_cost) are the same cost: then fewer GPUs (a simpler machine), then time
            base = p_min + same_cost
            bucket = math.floor(math.log(max(price, base) / base) / math.log(SAME)) if math.isfinite(price) else 10**6
            n = c.gpus_per_server * c.servers
            score = bucket + 1e-2 * math.log2(n) + 1e-4 * t(c) / t_min
        elif objective == "time":
            # times within 10% are the same time: then the cheaper (a faster candidate that costs more is
            # still listed, and on the Pareto front)
            bucket = math.floor(math.log(t(c) / t_min) / math.log(SAME)) if math.isfinite(t(c)) else 10**6
            score = bucket + (0.5 * (1 - p_min / price) if math.isfinite(price) else 0.5)
        else:  # balanced: geometric mean of the two ratios
            score = math.sqrt((price / p_min) * (t(c) / t_min)) if math.isfinite(price) else math.inf
        dominated = any((o.cost_usd or math.inf) <= price and t(o) <= t(c) and
                        ((o.cost_usd or math.inf) < price or t(o) < t(c)) for o in cands)
        out.append(c.model_copy(update={"score": score, "pareto": not dominated}))
    return sorted(out, key=lambda c: (c.score, c.cost_usd if c.cost_usd is not None else math.inf, t(c)))


__all__ = ["Config", "SearchInputs", "SearchOutput", "global_batch", "grow_arch", "grown_workload",
           "inference_configs", "max_gpus_per_server", "memory_headroom", "over_budget", "rank", "same_cost_usd", "search",
           "training_configs", "training_tokens"]


def search_traced(inp: SearchInputs, tr: object, objective: str) -> SearchOutput:
    """The search for a traced model (`model.trace`): each GPU type x 1-8 data-parallel GPUs in one server, from
    the trace's measured memory and FLOPs (core/sizing/traced.py). Time is for 1,000 batches of the factory's inputs,
    spread over the GPUs."""
    from gpuplan.core.sizing.traced import traced_device_bytes, traced_memory_out, traced_step_seconds
    from gpuplan.trace.custom import CustomTraceResult

    assert isinstance(tr, CustomTraceResult)
    t0 = time.perf_counter()
    proj = inp.project
    cons = proj.constraints
    headroom = memory_headroom(proj)
    rejected: list[Rejected] = []
    gpus = allowed_gpus(inp, rejected)
    budget = proj.goals.budget if proj.goals else None
    horizon = proj.growth.horizon_months if proj.growth else 36
    deadline_h = proj.goals.deadline_days * 24 if proj.goals and proj.goals.deadline_days else None
    modality = proj.data.modality if proj.data else "text"
    dataset_bytes = proj.data.size_gb * 1e9 if proj.data and proj.data.size_gb else 0.0
    cands: list[Candidate] = []
    evaluated = 0
    for gpu in gpus:
        max_ps = max_gpus_per_server(gpu, inp.catalog)
        if cons and cons.max_gpus_per_server:
            max_ps = min(max_ps, cons.max_gpus_per_server)
        cap = int(gpu.memory_gib * GIB)
        usable = int(cap * (1 - headroom))
        for ps in (p for p in PER_SERVER if p <= max_ps and (tr.training or p == 1)):
            evaluated += 1
            reserved, device = traced_device_bytes(tr, ps, inp.overheads)
            if device > usable:
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=1,
                                         reason=f"does not fit: the traced step needs {device / GIB:,.1f} GiB per GPU, "
                                                f"{usable / GIB:,.1f} GiB usable"))
                break  # more data-parallel GPUs only add to each GPU's memory
            step, parts = traced_step_seconds(tr, gpu, ps, inp.speed, ps)
            needs = ServerNeeds(gpu_id=gpu.id, gpus_per_server=ps, servers=1, modality=modality,
                                purpose=proj.goals.purpose if proj.goals else "experiment",
                                dataset_bytes=dataset_bytes, weights_bytes=tr.parameters_bytes,
                                checkpoint_bytes=tr.parameters_bytes + tr.optimizer_bytes)
            spec, why = inp.build_server(needs)
            if spec is None:
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=1, reason=why or "no server"))
                continue
            hours = 1000 * step / ps / 3600
            rate = inp.rent_per_gpu_hour.get(gpu.id)
            rent = None if rate is None else (rate * ps * hours if tr.training else rate * ps * 730.0 * horizon)
            options = [(v, k) for v, k in ((spec.price_usd, "buy"), (rent, "rent")) if v is not None]
            cost, basis = min(options) if options else (None, None)
            why = over_budget(cost, basis, budget, horizon, inp.usd_to_budget, tr.training)
            if why is not None:
                rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=1, reason=why))
                continue
            memory = traced_memory_out(tr, reserved, device, cap)
            reasons = [f"traced step: {tr.peak_bytes / GIB:,.2f} GiB tensor peak, {device / GIB:,.2f} GiB on the device "
                       f"of {cap / GIB:,.1f}; {step * 1e3:,.1f} ms per step ("
                       + ", ".join(f"{k} {v * 1e3:,.1f}" for k, v in parts.items() if v > 0) + " ms)",
                       f"{ps} data-parallel GPU(s), each running the factory's batch; time is for 1,000 batches",
                       "planned growth is not applied to a traced model: trace the grown model to check it"]
            if deadline_h is not None and tr.training and hours > deadline_h:
                reasons.append(f"1,000 batches take {hours:,.1f} h; the deadline applies to the whole run")
            cands.append(Candidate(
                gpu_id=gpu.id, gpu_name=gpu.name, gpus_per_server=ps, servers=1,
                layout={"zero": 0, "tp": 1, "pp": 1, "offload": "none", "dp": ps}, memory=memory, server=spec,
                fits=True, fits_with_growth=True, grown_device_bytes=device,
                storage_need_bytes=dataset_bytes + inp.checkpoints_kept * (tr.parameters_bytes + tr.optimizer_bytes),
                price_usd=spec.price_usd, rent_usd=rent, cost_usd=cost, cost_basis=basis,
                time_hours=hours if tr.training else None, request_latency_s=None if tr.training else step,
                score=0.0, reasons=reasons))
    same_cost = same_cost_usd(budget, horizon, inp.usd_to_budget)
    stats = PlanStats(candidates_evaluated=evaluated, search_seconds=time.perf_counter() - t0, gpu_types=len(gpus),
                      same_cost_usd=same_cost)
    # no growth view: the planned growth is not applied to a traced model either (trace the grown model)
    return SearchOutput(rank(cands, objective, same_cost), rejected, stats, [])


__all__ += ["search_traced"]
