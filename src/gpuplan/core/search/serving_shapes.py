"""The serving side of the search: timing a layout on a GPU type (`ServingTimer`), and the server counts a
serving search tries after timing one server of each size: as many as the load needs (the replicas the capacity
within the objectives asks for), fewest GPUs first; or 2, 4 and 8 servers of the largest size when no replica fits
one (pipeline stages across servers). Pure.

A timing depends on the engine (the GPU's rates, the layout, the node, the memory left for the KV cache, the
lengths) and the load on it, not on which GPU type or server shape made that engine: the timer keeps one per
engine and load, so a layout another GPU type or server size already timed is served from it (and not counted as
timed again). Memory is estimated once per layout and load. The full result, with percentiles, notes and
assumptions, is built only for the layouts the search judges (`result`). The caches' keys are NamedTuples, which C
makes, hashes and compares (a frozen dataclass's are Python calls)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from gpuplan.core.search.shapes import Config
from gpuplan.core.sizing.batching import Engine, StepCost
from gpuplan.core.sizing.engine_memory import admitted_memory, estimate_serving_memory, serving_start_bytes
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.queueing import Targets
from gpuplan.core.sizing.serving import (
    EngineModel,
    build_replica,
    engine_model,
    estimate_inference_speed,
    objectives,
    step_cost,
    targets_of,
    timed_result,
)
from gpuplan.core.sizing.serving_load import Sizing, Timing, size_load, time_load
from gpuplan.schema.estimate import MemoryEstimate, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import EngineDefaults, ServingData
from gpuplan.schema.speed import SpeedModel, SpeedResult
from gpuplan.units import GIB


def gpu_bytes(gpu: Gpu) -> int:
    """A GPU's memory in bytes, as the serving memory reads it."""
    return int(gpu.memory_gib * GIB)


class MemoryLoad(NamedTuple):
    """A serving layout's memory within a search: the model grown `scale` times (1: as planned; growth by depth
    only above 1), the layout, the requests in flight per replica and the context (the grown load's may be longer)."""

    scale: float
    tp: int
    pp: int
    batch: int
    context: int | None
    #: the GPU's memory, bytes, for an engine whose memory depends on it (SGLang, TensorRT-LLM); 0 for vLLM
    gpu: int = 0


class Requests(NamedTuple):
    """The requests in flight per replica and their context: all a serving layout's workload changes of the
    search's."""

    batch: int
    context: int | None


class StepKey(NamedTuple):
    """What a step's cost depends on within a search: the GPU type, the layout and the GPUs per node."""

    gpu: str
    tp: int
    pp: int
    node: int


class EngineLoad(NamedTuple):
    """What a decoder's timing depends on within a search: its engine, pipeline stages, replicas and the requests in
    flight per replica (a fixed concurrency's share)."""

    engine: Engine
    pp: int
    replicas: int
    batch: int


@dataclass(frozen=True, slots=True)
class Served:
    """A serving layout sized on a GPU type: a decoder's engine and load (`key`) and its sizing (its operating
    point comes from `ServingTimer.timing`), or an encoder's full result (one forward per request, cheap);
    `fresh`: computed by this call, not served from the timer's cache."""

    key: EngineLoad | None
    sizing: Sizing | None
    encoder: SpeedResult | None
    fresh: bool

    @property
    def replicas_needed(self) -> int | None:
        return self.sizing.replicas_needed if self.sizing is not None else None

    @property
    def capacity_requests_per_s(self) -> float | None:
        return self.sizing.capacity_requests_per_s if self.sizing is not None else None

    @property
    def kv_cache_requests(self) -> float | None:
        return self.sizing.kv_cache_requests if self.sizing is not None else None

    def gpus_needed(self, mp: int) -> float:
        """The GPUs the load needs on replicas of `mp` GPUs (inf: no number of them serves it)."""
        return (self.replicas_needed or math.inf) * mp


class ServingTimer:
    """Times one search's serving layouts (see the module's docstring). `model_scale`: the growth's (what the
    growth view's factors multiply)."""

    def __init__(self, arch: ModelArch, p: ParamCount, oh: Overheads, sm: SpeedModel, serving: ServingData,
                 engine: EngineDefaults | None, model_scale: float) -> None:
        self.arch, self.p, self.oh, self.sm, self.serving, self.engine = arch, p, oh, sm, serving, engine
        self.model_scale = model_scale
        self.decoder = arch.kind in ("decoder", "encoder-decoder")
        self.memory: dict[MemoryLoad, MemoryEstimate] = {}
        self.starts: dict[tuple[Layout, int], int] = {}
        self.workloads: dict[Requests, Workload] = {}
        self.grown: dict[MemoryLoad, dict[int, int]] = {}  # by the load, then the usable bytes per GPU
        self.costs: dict[StepKey, StepCost] = {}
        self.sizings: dict[EngineLoad, Sizing] = {}
        self.targets: Targets | None = None
        self.model: EngineModel | None = None
        self.timings: dict[EngineLoad, Timing] = {}

    def estimate(self, key: MemoryLoad, arch: ModelArch, p: ParamCount, w: Workload) -> MemoryEstimate:
        """The serving memory of `w` (the search's workload at `key`'s batch and context) on `key`'s layout."""
        m = self.memory.get(key)
        if m is None:
            assert self.engine is not None
            lay = Layout(tp=key.tp, pp=key.pp)
            m = self.memory[key] = estimate_serving_memory(arch, p, w, lay, key.tp * key.pp, self.oh, self.engine,
                                                           key.gpu or None)
        return m

    def gpu_key(self, gpu_bytes: int) -> int:
        """The GPU's memory where the engine's memory depends on it (a static or free pool: SGLang, TensorRT-LLM),
        else 0: vLLM's estimates are the same on every GPU, and the search keeps them once."""
        return gpu_bytes if self.engine is not None and self.engine.pool != "share" else 0

    def start_bytes(self, c: Config, gpu_bytes: int = 0) -> int:
        """What the engine of the layout `c` needs to start and hold one request (engine_memory.serving_start_bytes):
        the same on every GPU count, so once per layout (and GPU memory, `gpu_key`)."""
        g = self.gpu_key(gpu_bytes)
        got = self.starts.get((c.layout, g))
        if got is None:
            assert self.engine is not None
            lay = c.layout
            got = self.starts[(lay, g)] = serving_start_bytes(self.arch, self.p, c.workload, lay, lay.tp * lay.pp,
                                                              self.oh, self.engine, g or None)
        return got

    def starts_on(self, gpu_bytes: int) -> Callable[[Config], int]:
        """`start_bytes` on a GPU of `gpu_bytes` (what inference_configs asks of each layout)."""
        return lambda c: self.start_bytes(c, gpu_bytes)

    def reserved_bytes(self, c: Config, gpu_bytes: int = 0) -> float | None:
        """Bytes per GPU the engine keeps besides the KV cache (None: the default, without engine defaults)."""
        if self.engine is None:
            return None
        w = c.workload
        m = self.estimate(MemoryLoad(1.0, c.layout.tp, c.layout.pp, w.batch_size, w.context_length,
                                     self.gpu_key(gpu_bytes)), self.arch, self.p, w)
        return m.device_bytes - m.breakdown.kv_cache_bytes

    def grown_bytes(self, c: Config, factor: float, usable: int, grown: tuple[ModelArch, ParamCount],
                    w_grown: Workload) -> int:
        """Peak bytes per GPU of the layout `c` with the model `factor` times its planned size (`grown`: that model
        and its parameters) at the grown load (`w_grown`): what its engine holds within `usable` (more only if it
        cannot start). By layout, requests per replica and `usable`, whichever server count made them."""
        assert self.engine is not None
        lay = c.layout
        batch = max(math.ceil(w_grown.batch_size / (c.n // (lay.tp * lay.pp))), 1)
        scale = max(self.model_scale * factor, 1.0)  # core/sizing/project.grow_arch
        g = self.gpu_key(usable)  # an engine with its own reserve fills the GPU: its usable bytes are the GPU's
        at_load = MemoryLoad(scale, lay.tp, lay.pp, batch, w_grown.context_length, g)
        by_usable = self.grown.get(at_load)
        if by_usable is None:
            by_usable = self.grown[at_load] = {}
        hit = by_usable.get(usable)
        if hit is None:
            a, pa = grown
            gw = self.workload(c, batch, w_grown.context_length)

            def estimate(batch_size: int) -> MemoryEstimate:
                at = at_load if batch_size == batch else MemoryLoad(scale, lay.tp, lay.pp, batch_size,
                                                                    gw.context_length, g)
                m = self.memory.get(at)
                return m if m is not None else self.estimate(at, a, pa, self.workload(c, batch_size, gw.context_length))

            m = admitted_memory(a, pa, gw, lay, lay.tp * lay.pp, self.oh, self.engine, usable, estimate)[0]
            hit = by_usable[usable] = max(m.device_bytes, m.load_device_bytes)
        return hit

    def workload(self, c: Config, batch: int, context: int | None) -> Workload:
        """The search's workload with `batch` requests per replica and the context `context` (made once each)."""
        w = c.workload
        if w.batch_size == batch and w.context_length == context:
            return w
        key = Requests(batch, context)
        made = self.workloads.get(key)
        if made is None:
            made = self.workloads[key] = w.model_copy(update={"batch_size": batch, "context_length": context})
        return made

    def size(self, c: Config, gpu: Gpu, ps: int) -> Served:
        """The layout `c` on `gpu` in servers of `ps` GPUs: its engine, capacity within the objectives and the
        replicas the load needs."""
        w, lay = c.workload, c.layout
        if not self.decoder:
            r = estimate_inference_speed(self.arch, self.p, w, lay, c.n, gpu, self.sm, gpus_per_node=ps,
                                         serving=self.serving, reserved_bytes=self.reserved_bytes(c, gpu_bytes(gpu)))
            return Served(key=None, sizing=None, encoder=r, fresh=True)
        if self.model is None:  # the search's workload's, whatever the layout
            self.model = engine_model(self.arch, self.p, w, self.serving)
        sk = StepKey(gpu.id, lay.tp, lay.pp, ps)
        cost = self.costs.get(sk)
        if cost is None:
            cost = self.costs[sk] = step_cost(self.arch, self.p, w, lay, gpu, self.sm, self.serving, ps, self.model)
        rep = build_replica(self.arch, self.p, w, lay, gpu, self.sm, self.serving, node=ps,
                            reserved_bytes=self.reserved_bytes(c, gpu_bytes(gpu)), cost=cost,
                            model=self.model)
        replicas = max(c.n // (lay.tp * lay.pp), 1)
        key = EngineLoad(rep.engine, rep.pp, replicas, w.batch_size)
        sz = self.sizings.get(key)
        if sz is not None:
            return Served(key=key, sizing=sz, encoder=None, fresh=False)
        if self.targets is None:  # the objectives are the search's workload's
            self.targets = targets_of(objectives(w, self.serving))
        eng = self.serving.engine
        sz = self.sizings[key] = size_load(rep, w, replicas, self.targets, eng.max_utilization, eng.load_headroom)
        return Served(key=key, sizing=sz, encoder=None, fresh=True)

    def timing(self, c: Config, served: Served) -> Timing | None:
        """A decoder layout's operating point under the load (None: an encoder's), once per engine and load."""
        if served.key is None or served.sizing is None:
            return None
        t = self.timings.get(served.key)
        if t is None:
            t = self.timings[served.key] = time_load(served.sizing, c.workload)
        return t

    def choose(self, configs: list[Config], size: Callable[[Config], Served]) -> tuple[Config, Served]:
        """The layout of `configs` (each sized by `size`) that needs the fewest GPUs for the load, then has the
        lowest mean latency at it, the first of equals: only layouts tied on the GPU count are timed."""
        sized = [(c, size(c)) for c in configs]
        gpus = [s.gpus_needed(c.layout.tp * c.layout.pp) for c, s in sized]
        fewest = min(gpus)
        tied = [cs for cs, g in zip(sized, gpus, strict=True) if g == fewest]
        best = tied[0]
        if len(tied) > 1:
            best_s = self.latency_s(*best)
            for c, s in tied[1:]:
                t = self.latency_s(c, s)
                if t < best_s:
                    best, best_s = (c, s), t
        return best

    def latency_s(self, c: Config, served: Served) -> float:
        """The mean request latency of a layout at the load."""
        t = self.timing(c, served)
        if t is not None:
            return t.request_latency_s
        assert served.encoder is not None and served.encoder.inference is not None
        return served.encoder.inference.request_latency_s

    def result(self, c: Config, gpu: Gpu, served: Served) -> SpeedResult:
        """The full result of a sized layout."""
        t = self.timing(c, served)
        if t is None:
            assert served.encoder is not None
            return served.encoder
        return timed_result(self.arch, self.p, c.workload, c.layout, gpu, self.sm, self.serving, t)


def serve_more(gpu_id: str, top: int, max_servers: int, status: str, want: dict[tuple[str, int], int],
               tried: set[tuple[int, int]], kept: Callable[[], bool], evaluate: Callable[[int, int], str]) -> None:
    """Evaluate (GPUs per server, servers) shapes until one is kept. `want`: the servers the load needs, by (GPU,
    GPUs per server), filled in by `evaluate`; `status`: the last single-server shape's outcome."""
    queue = sorted(((ps, s) for (g, ps), s in want.items() if g == gpu_id and 1 < s <= max_servers),
                   key=lambda t: (t[0] * t[1], t[0]))
    if not queue and status == "no-fit":
        queue = [(top, s) for s in (2, 4, 8) if s <= max_servers]
    while queue and not kept():
        ps, servers = queue.pop(0)
        if (ps, servers) in tried:
            continue
        tried.add((ps, servers))
        got = evaluate(ps, servers)
        need = want.get((gpu_id, ps), 0)
        if got == "deadline" and servers < need <= max_servers and (ps, need) not in tried:
            queue.insert(0, (ps, need))  # a replica fits now: as many servers as the load needs


__all__ = ["EngineLoad", "MemoryLoad", "Requests", "Served", "ServingTimer", "StepKey", "serve_more"]
