"""The search behind `gpuplan plan`: GPU type x GPUs per server x servers x layout, kept when they fit (with the
memory headroom and the growth the project plans) and meet the deadline and budget, ranked by the objective.

Pure: the inputs are the project, its resolved architecture, the catalog and the assumptions; the clock is passed
in. Memory does not depend on the GPU type, only its capacity does, so each (GPU count, layout, micro-batch,
recomputation) is estimated once (core/search/shapes.py) and compared with every GPU; the speed model then times
the few most promising layouts that fit each GPU (no recomputation, large micro-batches, little sharding first),
from work computed once per layout. Full results are built only for those shown. Time: linear in the catalog."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from heapq import nsmallest
from itertools import chain, islice
from operator import attrgetter

from gpuplan.core.cost.growth import grown_requests
from gpuplan.core.search.candidate import Context, Pick, materialize, pick, storage_terms
from gpuplan.core.search.growth import growth_view
from gpuplan.core.search.inputs import SearchInputs, SearchOutput
from gpuplan.core.search.ranking import rank, reference, same_cost
from gpuplan.core.search.serving_shapes import Served, ServingTimer, serve_more
from gpuplan.core.search.shape_configs import ShapeConfigs, ShapeKey
from gpuplan.core.search.shapes import (
    PER_SERVER,
    SERVER_COUNTS,
    Config,
    allowed_gpus,
    inference_configs,
    max_gpus_per_server,
    slots_by_form,
)
from gpuplan.core.search.training import GrownModel, GrownModels, TrainingSpace
from gpuplan.core.sizing.engine_memory import serving_usable
from gpuplan.core.sizing.engines import serving_for
from gpuplan.core.sizing.lora import lora_params
from gpuplan.core.sizing.memory import MemoryCache, estimate_memory
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.preference import check_dpo
from gpuplan.core.sizing.project import (
    global_batch,
    grown_workload,
    grows,
    training_tokens,
)
from gpuplan.core.sizing.serving_load import Timing
from gpuplan.core.sizing.speed import StepWork, tokens_per_sample
from gpuplan.core.sizing.step_time import StepTime
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import (
    GrowthRow,
    PlanStats,
    Rejected,
)
from gpuplan.schema.project import LoraSpec, Project, Workload
from gpuplan.schema.speed import SpeedResult
from gpuplan.units import GIB

#: layouts timed per (GPU, server shape): the most promising by the proxy order
TIMED_PER_SHAPE = 6
#: a configuration's memory per GPU, read without a Python call
_BYTES = attrgetter("device_bytes")
FRUGAL_LAYOUTS = 8  # a shape's layouts of fewest bytes today among which the grown model's leanest is sought


def memory_headroom(project: Project) -> float:
    """The fraction of each GPU's memory the plan keeps free (constraints.memory_headroom)."""
    return project.constraints.memory_headroom


def trainable_parameters(arch: ModelArch, p: ParamCount, project: Project) -> int:
    w = project.workload
    if w.task in ("lora", "qlora"):
        spec = w.lora or LoraSpec()
        return lora_params(arch, spec.rank, spec.targets)
    return p.total


class _Search:
    """One search's state: the configurations by GPU count, their grown memory, the timed work, what was kept."""

    def __init__(self, inp: SearchInputs, objective: str) -> None:
        self.inp, self.objective = inp, objective
        proj, arch = inp.project, inp.arch
        self.proj, self.arch = proj, arch
        w = self.w = proj.workload
        self.training = w.task != "inference"
        p = self.p = count_params(arch)
        self.p_grown = count_params(inp.grown_arch)
        self.w_grown = grown_workload(w, proj, arch)
        self.headroom = memory_headroom(proj)
        self.rejected: list[Rejected] = []
        if inp.serving is not None and not self.training:  # the project's engine in place of vLLM's
            inp = self.inp = replace(inp, serving=serving_for(inp.serving, w))
        self.gpus = allowed_gpus(proj, inp.catalog, self.rejected)
        self.slots = slots_by_form(inp.catalog)
        self.gbs = global_batch(proj)[0]
        sample_tokens = tokens_per_sample(arch, w)
        tokens = training_tokens(proj, sample_tokens)[0] if self.training else None
        self.model_scale = proj.growth.model_scale
        self.grows = grows(proj)
        d = proj.data
        dataset_bytes = (d.size_gb * 1e9 if d.size_gb else 0.0) * proj.growth.data_scale
        trainable = trainable_parameters(arch, p, proj)
        weights_b, ckpt_b, per_token = storage_terms(proj, p, trainable, dataset_bytes, sample_tokens)
        #: training: the parts of the layouts' memory, shared with the shown candidates' estimates (Context.terms_cache)
        memory = MemoryCache()
        #: what the project's framework can run (data/frameworks.toml `can`; None: no framework, or none declared)
        self.framework = inp.catalog.frameworks.get(w.framework) if w.framework is not None else None
        self.ctx = Context(project=proj, arch=arch, params=p, trainable=trainable,
                           speed=inp.speed, table=inp.table, overheads=inp.overheads, build_server=inp.build_server,
                           server_price=inp.server_price, rent_per_gpu_hour=inp.rent_per_gpu_hour,
                           rent_at=inp.rent_at,
                           checkpoints_kept=inp.checkpoints_kept, training=self.training, total_tokens=tokens,
                           deadline_h=proj.goals.deadline_days * 24 if proj.goals.deadline_days else None,
                           dataset_bytes=dataset_bytes, evidence=inp.evidence, currency=inp.currency,
                           engine=inp.serving.engine if inp.serving and (not self.training or w.grpo) else None,
                           weights_bytes=weights_b, checkpoint_bytes=ckpt_b, bytes_per_token=per_token,
                           terms_cache=memory, framework=self.framework)
        #: each shape's configurations in the order they are timed, and the least memory per GPU of any of them, by
        #: (GPUs, GPUs per server up to 8)
        self.configs: dict[ShapeKey, ShapeConfigs] = {}
        #: (GPUs, per server, usable bytes) -> the first layouts that fit, and those of them that fit after the growth
        #: by shape: the layouts that fit today, those timed, and (training, growing) the grown model's most frugal
        self.heads: dict[tuple[int, int, int], tuple[list[Config], list[Config], Config | None]] = {}
        self.grown_dev: dict[tuple[tuple[int, int, int, int, str, bool, int], float, int], int] = {}  # serving
        self.grown_models = GrownModels(arch, self.model_scale, GrownModel(inp.grown_arch, self.p_grown))
        #: training: the layouts, their memory and timed work (core/search/training.py)
        self.space = TrainingSpace(arch, p, w, self.gbs, inp.table, inp.overheads, inp.speed, trainable, tokens,
                                   memory=memory, grows=self.grows, grown_models=self.grown_models,
                                   grown_workload=lambda gw: grown_workload(gw, proj, arch),
                                   serving=inp.serving if w.grpo is not None else None, headroom=self.headroom,
                                   framework=self.framework) if self.training else None
        #: configurations whose memory was computed and timings (training: the space counts them)
        self.evaluated = self.timed = 0
        self.picks: list[Pick] = []
        #: for the growth view: each pick's config, each GPU's usable bytes and the server shapes tried for it
        self.usable_of: dict[str, int] = {}
        self.tried: dict[str, list[tuple[int, int]]] = {}
        self.kept_gpus: set[str] = set()
        self.rejected_gpus: set[str] = set()
        #: serving: the servers of each (GPU, GPUs per server) the load needs, found while timing one server
        self.want_servers: dict[tuple[str, int], int] = {}
        self.engine = inp.serving.engine if inp.serving is not None and not self.training else None
        self.serve = ServingTimer(arch, p, inp.overheads, inp.speed, inp.serving, self.engine, self.model_scale) if (
            inp.serving is not None and not self.training) else None

    # ------------------------------------------------------------------------------------------ memory
    def shape(self, n: int, per_server: int, gpu: int = 0) -> ShapeConfigs:
        """n GPUs' configurations in servers of `per_server`, in the order they are timed, with their memory per
        GPU. Keyed by (n, min(per_server, 8)): tensor parallelism spans at most 8 GPUs, so a larger server, an NVL72
        rack, shares the 8-GPU server's; `gpu`: ShapeKey.gpu."""
        key = ShapeKey(n, per_server if per_server < 8 else 8, gpu)
        hit = self.configs.get(key)
        if hit is None:
            inp = self.inp
            if self.space is not None:  # training: a layout's configurations are computed once, whatever the shape
                before = self.space.computed
                cs = self.space.configs(n, per_server)
                self.evaluated += self.space.computed - before
            else:
                cs = inference_configs(self.arch, self.p, self.w, n, per_server, inp.table, inp.overheads, self.engine,
                                       None if self.serve is None else self.serve.starts_on(gpu))
                self.evaluated += len(cs)
            hit = self.configs[key] = ShapeConfigs(cs)
        return hit

    def grown_model(self, factor: float) -> GrownModel:
        """The model grown `factor` times the planned growth."""
        return self.grown_models.at(factor)

    def grown_device(self, c: Config, factor: float = 1.0, usable: int = 0) -> int:
        """Peak bytes per GPU of a layout after the planned growth, with the model `factor` times the planned size;
        serving: what the engine holds at the load within `usable` (more than `usable` only if it cannot start)."""
        if self.space is not None:  # a training step's memory is the GPU's own (GRPO's rollout: a share of `usable`'s)
            return c.grown if c.grown is not None and factor == 1.0 else self.space.grown_bytes(c, factor, usable)
        if self.serve is not None and self.engine is not None:
            return self.serve.grown_bytes(c, factor, usable, self.grown_model(factor), self.w_grown)
        key = (c.key, factor, usable)
        if key not in self.grown_dev:  # inference without the engine's defaults
            a, pa = self.grown_model(factor)
            lay = c.layout
            gw = c.workload.model_copy(update={
                "batch_size": max(math.ceil(self.w_grown.batch_size / (c.n // (lay.tp * lay.pp))), 1),
                "context_length": self.w_grown.context_length})
            self.grown_dev[key] = estimate_memory(a, pa, gw, lay, lay.tp * lay.pp, self.inp.table,
                                                  self.inp.overheads).device_bytes
        return self.grown_dev[key]

    def grown_layout(self, shape: ShapeConfigs, head: list[Config], usable: int) -> Config:
        """The layout of a shape the grown model runs as: the first (in timing order) whose grown bytes fit, else
        the least grown of the FRUGAL_LAYOUTS of fewest bytes today (which then does not fit). Growing never shrinks
        memory: a layout over `usable` today is over it grown, with no estimate."""
        for c in chain(head, islice(shape.configs, 4 * TIMED_PER_SHAPE)):
            if c.device_bytes <= usable and self.grown_device(c, 1.0) <= usable:
                return c
        if shape.leanest is None:  # the same whatever the usable bytes: once per shape
            shape.leanest = min(nsmallest(FRUGAL_LAYOUTS, shape.configs, key=_BYTES),
                                key=lambda c: self.grown_device(c, 1.0))
        return shape.leanest

    def grown_load(self, c: Config, inference: SpeedResult | None) -> Workload | None:
        """A service's grown workload under users or an arrival rate (growth.grown_requests); None: `w_grown`."""
        per = grown_requests(inference.inference if inference is not None else None, self.proj.growth.users_scale)
        if self.serve is None or per is None:
            return None
        return self.w_grown.model_copy(update={"batch_size": per * (c.n // (c.layout.tp * c.layout.pp))})

    def at_load(self, w: Workload | None) -> Callable[[Config, float, int], int]:
        """`grown_device` at a service's own grown load `w` (`grown_load`), for its grown bytes and growth rows."""
        if w is None or (serve := self.serve) is None:
            return self.grown_device

        def at(c: Config, factor: float, usable: int) -> int:
            return max(self.grown_device(c, factor, usable),
                       serve.grown_bytes(c, factor, usable, self.grown_model(factor), w))
        return at

    # ------------------------------------------------------------------------------------------ one shape
    def time_training(self, cs: list[Config], gpu: Gpu, ps: int) -> tuple[float, Config, StepWork, StepTime]:
        """The fastest of the training layouts `cs` on `gpu` in servers of `ps`: (wall hours, or hours per
        billion tokens without a token count; the layout, its work and step time); the first of equals."""
        assert self.space is not None
        before = self.space.timed
        best = self.space.fastest(cs, gpu, ps)
        self.timed += self.space.timed - before
        return best.metric, best.config, best.work, best.step

    def time_config(self, c: Config, gpu: Gpu, ps: int) -> Served:
        """The serving layout `c` on `gpu` sized: counted when computed (serving_shapes.ServingTimer reuses)."""
        assert self.serve is not None
        served = self.serve.size(c, gpu, ps)
        self.timed += served.fresh
        return served

    def evaluate(self, gpu: Gpu, ps: int, servers: int, usable: int, best_fail: list[tuple[int, int, int]]) -> str:
        """Try one server shape: "ok", or why not ("no-fit", "deadline": more GPUs may help; "other")."""
        n = ps * servers
        shape = self.shape(n, ps, self.serve.gpu_key(int(gpu.memory_gib * GIB)) if self.serve else 0)
        smallest = shape.smallest
        self.tried.setdefault(gpu.id, []).append((ps, servers))
        if smallest is None or smallest > usable:
            if smallest is not None and (not best_fail or smallest < best_fail[0][0]):
                best_fail[:] = [(smallest, ps, servers)]
            return "no-fit"
        # shape's key and the usable memory: GPUs of the same usable memory see the same layouts
        hkey = (n, ps if ps < 8 else 8, usable)
        if hkey not in self.heads:
            head = shape.fitting(usable, 4 * TIMED_PER_SHAPE)
            if self.training:
                # today's run takes the fastest layouts that fit today; the growth asks that the shape hold the
                # grown model with its most frugal layout (a bigger model is run with a smaller micro-batch or
                # checkpointing, as one would), not that today's run be as frugal
                frugal = self.grown_layout(shape, head, usable) if self.grows else None
                fits = frugal is None or self.grown_device(frugal, 1.0) <= usable
                self.heads[hkey] = (head, head[:TIMED_PER_SHAPE] if fits else [], frugal)
            else:  # the first TIMED_PER_SHAPE that still fit after the growth (the rest's grown memory not needed)
                self.heads[hkey] = (head, list(islice(
                    (c for c in head if self.grown_device(c, 1.0, usable) <= usable), TIMED_PER_SHAPE)), None)
        head, grown_ok, frugal = self.heads[hkey]
        if not grown_ok:
            g0 = self.grown_device(frugal, 1.0) if frugal is not None else min(
                self.grown_device(c, 1.0, usable) for c in head)
            self.reject(gpu, ps, servers, "no-fit-after-growth", f"fits today, not after the planned growth: "
                        f"{g0 / GIB:,.1f} GiB per GPU against {usable / GIB:,.1f} GiB usable")
            return "no-fit"
        work: StepWork | None = None  # training only
        step: StepTime | None = None
        inference: SpeedResult | None = None
        timing: Timing | None = None  # serving only
        if self.training:
            metric, c, work, step = self.time_training(grown_ok, gpu, ps)
        else:
            assert self.serve is not None  # fewest GPUs for the load, then the mean latency at it
            c, served = self.serve.choose(grown_ok, lambda c: self.time_config(c, gpu, ps))
            mp = c.layout.tp * c.layout.pp
            have, need, cap_rps = n // mp, served.replicas_needed, served.capacity_requests_per_s
            if need is None and cap_rps is not None:
                self.reject(gpu, ps, servers, "latency", f"no number of these replicas serves the load within the "
                            f"objectives: one (its KV cache holds {served.kv_cache_requests or 0:,.1f} request(s)) "
                            "sustains no load within them")
                return "other"
            if need is not None and need > have:
                self.want_servers[(gpu.id, ps)] = math.ceil(need * mp / ps)
                self.reject(gpu, ps, servers, "latency", f"{have} replica(s) serve "
                            f"{cap_rps or 0:,.2f} requests/s within the objectives; the load "
                            f"needs {need} (with {self.inp.serving.engine.load_headroom:.0%} "  # type: ignore[union-attr]
                            "headroom)")
                return "deadline"
            metric = self.serve.latency_s(c, served)
            inference = self.serve.result(c, gpu, served)  # built for the layouts judged only
            timing = self.serve.timing(c, served)
        if self.inp.speed.generations[gpu.generation].basis == "prior":
            metric /= self.inp.speed.params.range_low  # no published runs calibrate this generation: slow end
        before, cap = len(self.rejected), int(gpu.memory_gib * GIB)
        grown, grown_as = self.at_load(self.grown_load(c, inference))(c, 1.0, usable), None
        if frugal is not None and grown > usable:  # the grown model takes the shape's most frugal layout
            grown, grown_as = self.grown_device(frugal, 1.0), frugal
        k = pick(self.ctx, gpu, ps, servers, c, work, step, inference, metric, grown, cap, usable, self.rejected,
                 grown_as, timing)
        if k is not None:
            self.picks.append(k)
            self.kept_gpus.add(gpu.id)
            return "ok"
        self.rejected_gpus.add(gpu.id)
        return "deadline" if len(self.rejected) > before and self.rejected[-1].code == "deadline" else "other"

    def reject(self, gpu: Gpu, ps: int, servers: int, code: str, reason: str) -> None:
        self.rejected.append(Rejected(gpu_id=gpu.id, gpus_per_server=ps, servers=servers, code=code, reason=reason))
        self.rejected_gpus.add(gpu.id)

    # ------------------------------------------------------------------------------------------ one GPU type
    def explore(self, gpu: Gpu) -> None:
        cons = self.proj.constraints
        max_ps = max_gpus_per_server(gpu, self.inp.catalog, self.slots)
        if cons.max_gpus_per_server:
            max_ps = min(max_ps, cons.max_gpus_per_server)
        if max_ps == 0:
            self.reject(gpu, 0, 0, "no-platform", f"no platform in the catalog takes {gpu.form_factor} {gpu.name} "
                        "cards")
            return
        usable = int(int(gpu.memory_gib * GIB) * (1 - self.headroom))
        if self.engine is not None:  # the engine takes gpu_memory_utilization of the GPU (itself a headroom)
            usable = serving_usable(int(gpu.memory_gib * GIB), self.w, self.engine, self.headroom)
        self.usable_of[gpu.id] = usable
        shapes = [(ps, 1) for ps in PER_SERVER if ps <= max_ps]
        if max_ps >= 72:
            shapes.append((72, 1))
        top = max(ps for ps, _ in shapes)
        max_servers = cons.max_servers or SERVER_COUNTS[-1]
        # more servers only while the job does not fit or misses the deadline on fewer (one doubling more
        # when time is the objective): a bigger cluster at the same GPU-hours is not a server to get
        more = [(top, s) for s in SERVER_COUNTS[1:] if s <= max_servers and (self.training or s <= 4)]
        best_fail: list[tuple[int, int, int]] = []  # smallest device bytes seen that did not fit
        status = "other"
        for ps, servers in shapes:
            status = self.evaluate(gpu, ps, servers, usable, best_fail)
        if not self.training:
            more = []
            serve_more(gpu.id, top, max_servers, status, self.want_servers, set(self.tried.get(gpu.id, [])),
                       lambda: gpu.id in self.kept_gpus, lambda ps, n: self.evaluate(gpu, ps, n, usable, best_fail))
        extra = 1 if self.objective == "time" else 0
        for ps, servers in more:
            if gpu.id in self.kept_gpus:
                if extra == 0:
                    break
                extra -= 1
            elif status == "other":  # over budget, no price, no platform: more servers will not help
                break
            status = self.evaluate(gpu, ps, servers, usable, best_fail)
        if best_fail and gpu.id not in self.kept_gpus and gpu.id not in self.rejected_gpus:
            dev, ps, servers = best_fail[0]
            self.reject(gpu, ps, servers, "no-fit", f"does not fit: needs {dev / GIB:,.1f} GiB per GPU at best on "
                        f"{ps * servers} GPUs, {usable / GIB:,.1f} GiB usable ({gpu.memory_gib:g} GiB less "
                        f"{self.headroom:.0%} headroom)")

    def growth_view(self, ranked: list[Pick], growth_top: int | None) -> list[GrowthRow]:
        return growth_view(ranked[:growth_top] if growth_top else ranked, self.tried, self.usable_of,
                           lambda n, ps: self.shape(n, ps).configs, self.model_scale,
                           lambda f: self.grown_model(f)[1].total, self.grown_device,
                           lambda k: self.at_load(self.grown_load(k.config, k.inference)))


def search(inp: SearchInputs, objective: str, growth_top: int | None = None,
           top: int | None = None) -> SearchOutput[Pick]:
    """The ranked candidates (full results for the first `top`, all when None), the rejected shapes and why, and
    the growth view of the first `growth_top` candidates (all when None)."""
    t0 = inp.clock()
    if inp.arch is not None:
        check_dpo(inp.arch, inp.project.workload)
    s = _Search(inp, objective)
    for gpu in s.gpus:
        s.explore(gpu)
    goals, horizon = s.proj.goals, s.proj.growth.horizon_months
    same = same_cost(goals.budget, horizon)
    picks = []
    for k, score, front in rank(s.picks, objective, same, adequate=lambda k: k.adequate):
        k.score, k.pareto = score, front
        picks.append(k)
    growth = s.growth_view(picks, growth_top)
    shown = [materialize(s.ctx, k) for k in (picks[:top] if top else picks)]
    priced = [k.cost for k in reference(picks, lambda k: k.adequate) if k.cost is not None]
    stats = PlanStats(candidates_evaluated=s.evaluated + s.timed, search_seconds=inp.clock() - t0,
                      gpu_types=len(s.gpus), same_cost=same, candidates_kept=len(picks),
                      cheapest_cost=min(priced) if priced else None)
    return SearchOutput(shown, s.rejected, stats, growth, picks, lambda k: materialize(s.ctx, k),
                        lambda ks: s.growth_view(ks, None))


__all__ = ["TIMED_PER_SHAPE", "SearchInputs", "SearchOutput", "memory_headroom", "search", "trainable_parameters"]
