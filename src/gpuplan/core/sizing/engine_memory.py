"""Serving memory as the engine allocates it (serving_memory.estimate_inference with the engine's defaults), with
the checkpoint-loading peak estimate_memory adds: what the serving paths of estimate, fit and plan compare with
the GPU's memory times the engine's utilisation.

A serving engine (vLLM) takes its share of each GPU (gpu_memory_utilization), keeps the weights, the prefill
workspace at its token budget, the CUDA graphs and the CUDA context, and fills the rest with KV cache blocks. It
never runs out of memory from concurrency: it admits the requests whose KV fits and queues (or preempts) the rest.
It refuses to start only when the weights, workspace, graphs and context with the KV of one request of the
workload's lengths exceed its share. So a serving replica "fits" when `serving_start_bytes` does
(`admitted_memory` is what it holds at the load), and a load beyond what the KV cache holds is judged by the
latency and capacity model (core/sizing/serving.py), which queues it. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable

from gpuplan.core.sizing.activations import resolve
from gpuplan.core.sizing.levels import _reserve_and_device
from gpuplan.core.sizing.memory import load_peak_bytes
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.serving_memory import estimate_inference
from gpuplan.core.sizing.stack import check_stack
from gpuplan.schema.estimate import MemoryEstimate, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import EngineDefaults
from gpuplan.schema.speed import InferenceSpeed


def _serving_memory(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, oh: Overheads,
                    engine: EngineDefaults, gpu_bytes: int | None = None) -> tuple[MemoryEstimate, float, int]:
    """(the engine's memory, the checkpoint-loading peak, that peak per GPU with the allocator's reserve)."""
    check_stack(arch, w)
    m = estimate_inference(arch, p, w, lay, gpus, oh, engine, gpu_bytes=gpu_bytes)
    load = load_peak_bytes(arch, p, w, lay, m.breakdown.weights_bytes)
    return m, load, _reserve_and_device(load, 0, oh, gpus, lay, False)[1]


def estimate_serving_memory(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, oh: Overheads,
                            engine: EngineDefaults, gpu_bytes: int | None = None) -> MemoryEstimate:
    """The engine's memory per GPU with the checkpoint-loading peak; `gpu_bytes`: the GPU's memory, for the engines
    whose defaults and pool depend on it (SGLang, TensorRT-LLM)."""
    m, load, device = _serving_memory(arch, p, w, lay, gpus, oh, engine, gpu_bytes)
    return m.model_copy(update={"load_peak_bytes": load, "load_device_bytes": device})


def one_request(w: Workload) -> Workload:
    """The workload with one request in flight: what the engine needs to start."""
    return w.model_copy(update={"batch_size": 1})


def serving_start_bytes(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, oh: Overheads,
                        engine: EngineDefaults, gpu_bytes: int | None = None) -> int:
    """Bytes per GPU an engine needs to start and hold one request of the workload's lengths: weights, prefill
    workspace, CUDA graphs, context and one request's KV cache (or the checkpoint-loading peak, if higher)."""
    m, _, load_device = _serving_memory(arch, p, one_request(w), lay, gpus, oh, engine, gpu_bytes)
    return max(m.device_bytes, load_device)


def admitted_memory(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, oh: Overheads,
                    engine: EngineDefaults, cap: int,
                    estimate: Callable[[int], MemoryEstimate] | None = None,
                    gpu_bytes: int | None = None) -> tuple[MemoryEstimate, int]:
    """(the memory an engine with `cap` bytes per GPU holds at the load, the requests of the workload's lengths its
    KV cache holds): the KV of the requests in flight it admits, all of them when they fit, else as many as fit
    (at least one, so an engine that cannot start shows what one request needs). `estimate`: the serving memory of
    `w` with a given batch_size (estimate_serving_memory; a search passes one that remembers them)."""
    def at(batch_size: int) -> MemoryEstimate:
        return estimate_serving_memory(arch, p, w if batch_size == w.batch_size else w.model_copy(
            update={"batch_size": batch_size}), lay, gpus, oh, engine, gpu_bytes)

    est = estimate or at
    m = est(w.batch_size)
    kv = m.breakdown.kv_cache_bytes
    batch = max(resolve(arch, w).batch, 1)
    per_request = kv / batch
    room = cap - (max(m.device_bytes, m.load_device_bytes) - kv)
    holds = max(int(room // per_request), 0) if per_request > 0 else batch
    if holds >= batch:
        return m, holds
    return est(max(holds, 1)), holds


def engine_cap(gpu_bytes: int, w: Workload, engine: EngineDefaults) -> int:
    """The bytes of one GPU the engine may take: workload.gpu_memory_utilization (the engine's default) of it; the
    whole GPU for an engine that keeps its reserve itself (SGLang, TensorRT-LLM: their estimates count it)."""
    if engine.pool != "share":
        return gpu_bytes
    return int(gpu_bytes * (w.gpu_memory_utilization or engine.gpu_memory_utilization))


def serving_usable(gpu_bytes: int, w: Workload, engine: EngineDefaults, headroom: float) -> int:
    """What a serving replica may use per GPU: the engine's share, and no more than the plan's memory headroom
    leaves (the engine's utilisation is itself a headroom: the two are not stacked; an engine that keeps its own
    reserve, SGLang's or TensorRT-LLM's, has it in its estimate and fills the GPU)."""
    if engine.pool != "share":
        return engine_cap(gpu_bytes, w, engine)
    return min(engine_cap(gpu_bytes, w, engine), int(gpu_bytes * (1 - headroom)))


def serving_layout(arch: ModelArch, params: ParamCount, w: Workload, gpus: int, usable: int, oh: Overheads,
                   engine: EngineDefaults, gpu_bytes: int | None = None) -> Layout:
    """The layout for serving on `gpus` GPUs when none is given: the smallest tensor-parallel degree (a power of two
    dividing the GPUs and the heads, up to 8), then pipeline stages, whose replica's KV cache holds the load's
    requests in flight within `usable` bytes per GPU; if none does, the smallest that starts (holds one request:
    the rest queue, and the latency figures say what that costs)."""
    tps = [t for t in (1, 2, 4, 8) if t <= gpus and gpus % t == 0 and (t == 1 or arch.num_heads % t == 0)]
    layouts = []
    for tp in tps:
        for pp in (1, 2, 4, 8) if tp == tps[-1] else (1,):  # more tensor parallelism before pipeline stages
            if gpus % (tp * pp) or (pp > 1 and (arch.kind != "decoder" or arch.num_layers < 2 * pp)):
                continue
            layouts.append(Layout(tp=tp, pp=pp))
    for need in (w, one_request(w)):
        for lay in layouts:
            m = estimate_serving_memory(arch, params, need, lay, lay.tp * lay.pp, oh, engine, gpu_bytes)
            if max(m.device_bytes, m.load_device_bytes) <= usable:
                return lay
    return Layout(tp=tps[-1])


def in_flight_requests(arch: ModelArch, w: Workload, inf: InferenceSpeed | None) -> int:
    """The requests the load keeps in flight per replica (queued ones included): the batch for a fixed concurrency,
    else the mean concurrency per replica the serving model finds (the batch when it has none: no GPU given)."""
    if inf is None or inf.load == "batch_size" or inf.replicas < 1:
        return max(resolve(arch, w).batch, 1)
    return max(math.ceil(inf.concurrency / inf.replicas - 1e-9), 1)


def in_flight_bytes(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, oh: Overheads,
                    engine: EngineDefaults, requests: int, gpu_bytes: int | None = None) -> int:
    """Peak bytes per GPU with `requests` per replica held at once, none queued (`in_flight_requests`): what
    `estimate` and a plan's candidate report as `memory.in_flight_bytes`."""
    full = estimate_serving_memory(arch, p, w.model_copy(update={"batch_size": requests}), lay, gpus, oh, engine,
                                   gpu_bytes)
    return max(full.device_bytes, full.load_device_bytes)


__all__ = ["admitted_memory", "engine_cap", "estimate_serving_memory", "in_flight_bytes", "in_flight_requests",
           "one_request",
           "serving_layout", "serving_start_bytes", "serving_usable"]
