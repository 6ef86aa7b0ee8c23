"""Serving speed: a continuous-batching engine (core/sizing/batching.py) on tensor/pipeline-parallel replicas
under the project's load, with latency percentiles (core/sizing/queueing.py), the capacity within the objectives
and the replicas the load needs. Pure; the engine's facts come in as `serving` (data/serving.toml)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.core.sizing.batching import Engine, StepCost, interned, interned_cost, saturation_rate
from gpuplan.core.sizing.engine_memory import engine_cap
from gpuplan.core.sizing.engines import GENERATE_MAX_SEQS
from gpuplan.core.sizing.flops import attention_flops_per_key, forward_flops
from gpuplan.core.sizing.memory import WEIGHT_BYTES, kv_cache_bytes, resolve
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.precision import compute_precision, precision_notes
from gpuplan.core.sizing.queueing import Dist, Targets
from gpuplan.core.sizing.rates import (
    GB,
    _base_efficiency,
    _calibration_notes,
    _node_gpus,
    _span,
    link_gbs,
    peak_flops,
)
from gpuplan.core.sizing.serving_encoder import encoder_speed
from gpuplan.core.sizing.serving_load import Replica, Sizing, Timing, size_load, time_load
from gpuplan.core.sizing.serving_memory import FP4_WEIGHTS, prefill_budget, quantized_weights, request_tokens
from gpuplan.core.sizing.slo import objectives
from gpuplan.core.sizing.speculative import Draft, draft_of
from gpuplan.core.sizing.tp_comm import all_reduce
from gpuplan.schema.estimate import Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import InferenceSpeed, Objectives, Percentiles, ServingData
from gpuplan.schema.speed import ComputeOut, SpeedModel, SpeedResult
from gpuplan.units import GIB


def _weights_read(arch: ModelArch, p: ParamCount, dtype: str) -> tuple[float, float]:
    """(bytes of weights a step reads, of which MoE expert weights), for the whole model."""
    wb = WEIGHT_BYTES[dtype]
    if wb < 2:  # quantized blocks; embeddings, head and norms stay in 16 bits
        quantized = quantized_weights(arch, p, dtype)
        dense = quantized * wb + (p.total - quantized) * 2 - p.embedding * 2
    else:
        dense = (p.total - p.embedding) * wb
    if arch.tie_word_embeddings and arch.kind == "decoder":  # the tied head is read every step
        dense += arch.vocab_size * arch.hidden_size * min(wb, 2)
    experts = 0.0
    if arch.moe is not None:
        m = arch.moe
        experts = 3 * arch.hidden_size * m.expert_intermediate_size * m.moe_layers * wb
    return dense, experts


@dataclass(frozen=True, slots=True)
class EngineModel:
    """What every replica's engine of a serving project shares, whatever its GPU and layout: the weights a step
    reads (bytes, whole model), the KV cache a context token is read from and a request's token holds, the FLOPs
    per token, and the requests' lengths, spreads and arrivals (`engine_model`)."""

    prec: str
    weights_b: float  # dense and expert weights
    experts_b: float
    num_experts: int
    experts_per_token: int
    num_heads: int
    num_kv_heads: int
    layers: int
    kv_read_b: float  # per context token (at the mean context)
    kv_held_b: float  # per token of a request (its prompt and output, in whole blocks)
    flops: float  # per token (2 x active parameters, embeddings aside)
    attn_flops: float  # per (query, context) pair over the layers
    hidden_b: float  # one token's activations, moved by an all-reduce or a pipeline hop
    prompt: float
    output: float
    prompt_std: float
    output_std: float
    poisson: bool
    #: prompt tokens per request found in the prefix cache, and whether the requests in flight share them
    cached: float = 0.0
    cached_shared: bool = False
    #: speculative decoding (core/sizing/speculative.py; None: off)
    draft: Draft | None = None
    draft_weight_b: float = 0.0  # bytes of the draft's weights, of which MoE experts
    draft_expert_b: float = 0.0


def engine_model(arch: ModelArch, p: ParamCount, w: Workload, serving: ServingData) -> EngineModel:
    dtype = w.weights_dtype or "bf16"
    dense, experts = _weights_read(arch, p, dtype)
    kv_b = 1 if w.kv_cache_dtype == "fp8" else 2
    ctx = max(int(resolve(arch, w).seq + (w.output_tokens or 256) / 2), 1)
    tokens = request_tokens(arch, w, serving.engine)
    prompt, out = lengths(arch, w, serving)
    paged = serving.engine.paged  # generate()'s cache keeps (and its attention reads) every token, whatever the window
    draft = draft_of(arch, p, w, serving.engine) if paged else None
    wb = WEIGHT_BYTES[dtype]
    draft_kv = draft.layers * arch.cache_values_per_token_layer * kv_b if draft is not None else 0.0
    prec = "fp8-mixed" if dtype == "fp8" else "fp4" if dtype in FP4_WEIGHTS else "fp32" if dtype == "fp32" else "bf16"
    return EngineModel(
        prec=prec, weights_b=dense + experts,
        experts_b=experts, num_experts=arch.moe.num_experts if arch.moe else 0,
        experts_per_token=arch.moe.experts_per_token if arch.moe else 0, num_heads=arch.num_heads,
        num_kv_heads=arch.cache_kv_heads, layers=arch.num_layers + arch.num_decoder_layers,
        kv_read_b=kv_cache_bytes(arch, 1, ctx, kv_b, window=paged) / ctx,
        kv_held_b=kv_cache_bytes(arch, 1, tokens, kv_b, window=paged) / tokens + draft_kv,
        flops=2 * (p.active - p.embedding), attn_flops=attention_flops_per_key(arch) * arch.num_layers,
        hidden_b=arch.hidden_size * 2.0, prompt=prompt, output=out, prompt_std=w.prompt_tokens_std or 0.0,
        output_std=w.output_tokens_std or 0.0, poisson=poisson_arrivals(w),
        # prefix caching: the hit rate's share of the mean prompt is found in the cache and skips prefill
        cached=w.prefix_cache.hit_rate * prompt if paged and w.prefix_cache is not None else 0.0,
        cached_shared=bool(w.prefix_cache and w.prefix_cache.shared and w.prefix_cache.hit_rate > 0),
        draft=draft, draft_weight_b=draft.params * wb if draft is not None else 0.0,
        draft_expert_b=draft.expert_params * wb if draft is not None else 0.0)


def draft_cost(arch: ModelArch, m: EngineModel, lay: Layout, gpu: Gpu, sm: SpeedModel, serving: ServingData,
               node: int) -> StepCost | None:
    """One pass of the speculation's draft on a replica of `lay` (split by its tensor parallelism, as vLLM and SGLang
    run an EAGLE head or MTP module beside the target): reading its weights or its FLOPs, its layers' KV cache, its
    kernels' floor and all-reduces. None: nothing runs on the GPU (n-gram), or no speculation."""
    d = m.draft
    if d is None or d.params == 0:
        return None
    prm, gen = sm.params, sm.generations[gpu.generation]
    tp = lay.tp
    bw = gpu.memory_bandwidth_gbs * GB * gen.bandwidth
    peak = peak_flops(gpu, compute_precision(gpu, m.prec)) * _base_efficiency(gen, compute_precision(gpu, m.prec))
    kv_layer = m.kv_read_b / max(m.layers, 1)  # one layer's KV per context token
    moe = arch.moe if d.expert_params else None
    return interned_cost(StepCost(
        weights_s=m.draft_weight_b / tp / bw, experts_s=m.draft_expert_b / tp / bw,
        num_experts=moe.num_experts if moe else 0, experts_per_token=moe.experts_per_token if moe else 0,
        kv_s_per_token=(d.layers * kv_layer / min(tp, max(m.num_kv_heads, 1))
                        / (bw * serving.engine.attention_bandwidth_ratio)),
        decode_flop_s=2 * d.active_params / tp / peak,
        attn_s_per_pair=m.attn_flops / max(m.layers, 1) * d.layers / tp / (peak * prm.attention_factor),
        fixed_s=max(d.layers, 1) * prm.decode_kernels_per_layer * serving.engine.decode_kernel_s,
        allreduces=2 * d.layers if tp > 1 else 0, allreduce_bytes_per_token=m.hidden_b,
        allreduce=all_reduce(gpu, sm, serving, tp, node) if tp > 1 else None))


def step_cost(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpu: Gpu, sm: SpeedModel,
              serving: ServingData, node: int, model: EngineModel | None = None) -> StepCost:
    """The cost of one engine step of `arch` on one replica of `lay` (one pipeline stage's share per GPU);
    `model`: engine_model's, when the caller keeps it."""
    m = model or engine_model(arch, p, w, serving)
    prm, gen = sm.params, sm.generations[gpu.generation]
    tp, pp = lay.tp, lay.pp
    mp = tp * pp
    bw = gpu.memory_bandwidth_gbs * GB * gen.bandwidth
    prec = compute_precision(gpu, m.prec)
    peak = peak_flops(gpu, prec) * _base_efficiency(gen, prec)
    kv_token = m.kv_read_b / min(tp, max(m.num_kv_heads, 1)) / pp
    if serving.engine.kv_read_per_query_head:  # each query head of a GPU reads its KV head's cache itself
        kv_token *= max(m.num_heads / max(m.num_kv_heads, tp), 1.0)
    flop_token = m.flops / mp
    ar = all_reduce(gpu, sm, serving, tp, node) if tp > 1 else None
    hop_bw = link_gbs(gpu, sm, 2, node) * GB if pp > 1 else 1.0
    return interned_cost(StepCost(
        weights_s=m.weights_b / mp / bw, experts_s=m.experts_b / mp / bw, num_experts=m.num_experts,
        experts_per_token=m.experts_per_token,
        kv_s_per_token=kv_token / (bw * serving.engine.attention_bandwidth_ratio), decode_flop_s=flop_token / peak,
        prefill_flop_s=flop_token / (peak * prm.prefill_factor),
        attn_s_per_pair=m.attn_flops / mp / (peak * prm.attention_factor),
        fixed_s=m.layers / pp * prm.decode_kernels_per_layer * serving.engine.decode_kernel_s,
        allreduces=2 * m.layers // pp if tp > 1 else 0, allreduce_bytes_per_token=m.hidden_b, allreduce=ar,
        pp=pp, hop_s=serving.allreduce["nvlink" if gpu.interconnect.kind != "none" else "pcie"].nccl_latency_s,
        hop_s_per_token=m.hidden_b / hop_bw))


def lengths(arch: ModelArch, w: Workload, serving: ServingData) -> tuple[float, float]:
    """(prompt, output) mean tokens: the workload's, else its use case's, else the model's context and 256."""
    case = serving.use_cases.get(w.use_case) if w.use_case else None
    prompt = w.context_length or (case.prompt_tokens if case else resolve(arch, w).seq)
    out = w.output_tokens or (case.output_tokens if case else 256)
    return float(prompt), float(out)


def build_replica(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpu: Gpu, sm: SpeedModel,
                  serving: ServingData, *, node: int, reserved_bytes: float | None,
                  cost: StepCost | None = None, model: EngineModel | None = None) -> Replica:
    """The engine of one replica: its step cost (`cost`: step_cost's, when the caller keeps it), token budget,
    sequence cap and the KV cache tokens the memory left after `reserved_bytes` per GPU (weights, workspace, graphs,
    context; None: the weights and the graphs) holds; `model`: engine_model's, when the caller keeps it."""
    m = model or engine_model(arch, p, w, serving)
    reserved = reserved_bytes if reserved_bytes is not None else _reserved(arch, p, w, lay, serving)
    eng = serving.engine
    large = gpu.memory_gib >= eng.large_gpu_min_gib and "a100" not in gpu.id
    budget = prefill_budget(w, eng, large, gpu.memory_gib) or eng.max_num_batched_tokens_small
    seqs = eng.max_num_seqs_large if large else eng.max_num_seqs_small
    if not eng.paged:  # generate(): no cap on the batch it is given, every prompt prefilled in one forward pass
        seqs = GENERATE_MAX_SEQS
        budget = max(int(w.batch_size * m.prompt), 1)
    cap = engine_cap(int(gpu.memory_gib * GIB), w, eng)
    per_token = m.kv_held_b / min(lay.tp, max(m.num_kv_heads, 1)) / lay.pp
    kv_tokens = max(cap - reserved, 0.0) / per_token if per_token > 0 else 1e12
    e = interned(Engine(cost=cost or step_cost(arch, p, w, lay, gpu, sm, serving, node, m), budget=budget,
                        max_seqs=seqs, kv_tokens=kv_tokens / lay.pp, block=eng.block_size_tokens, prompt=m.prompt,
                        output=m.output, prompt_std=m.prompt_std, output_std=m.output_std, poisson=m.poisson,
                        cached=m.cached, cached_shared=m.cached_shared,
                        spec_k=m.draft.k if m.draft is not None else 0,
                        accepted=m.draft.accepted if m.draft is not None else 1.0,
                        draft=draft_cost(arch, m, lay, gpu, sm, serving, node)))
    return Replica(engine=e, pp=lay.pp, saturation=saturation_rate(e))


def poisson_arrivals(w: Workload) -> bool:
    """Whether requests arrive as a Poisson stream: an open load unless `arrival: constant`, users who think
    between requests; not a fixed concurrency (batch_size, or users who do not think), where a request arrives as
    one leaves: evenly, as `arrival: constant` has them."""
    if w.arrival_rate is not None:
        return w.arrival == "poisson"
    if w.users is not None:
        return w.arrival == "poisson" and (w.think_time_s or 0.0) > 0
    return False


def targets_of(obj: Objectives) -> Targets:
    return Targets(ttft_s=obj.ttft_s, itl_s=obj.itl_s, e2e_s=obj.e2e_s, percentile=float(obj.percentile))


def _pct(d: Dist) -> Percentiles:
    a, b, c = d.quantile(0.5), d.quantile(0.9), d.quantile(0.99)
    return Percentiles(p50=a, p90=max(a, b), p99=max(a, b, c))


def time_replicas(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu, sm: SpeedModel,
                  serving: ServingData, *, node: int, reserved_bytes: float | None = None) -> Timing:
    """A decoder's load on `gpus` x `gpu` in replicas of `lay` (`node` GPUs per node): its engine, capacity within
    the objectives, the replicas the load needs and its operating point (core/sizing/serving_load.py)."""
    rep = build_replica(arch, p, w, lay, gpu, sm, serving, node=node, reserved_bytes=reserved_bytes)
    return time_load(size_replicas(rep, w, max(gpus // (lay.tp * lay.pp), 1), serving), w)


def size_replicas(rep: Replica, w: Workload, replicas: int, serving: ServingData) -> Sizing:
    """`replicas` of `rep` under the project's objectives (serving_load.size_load)."""
    return size_load(rep, w, replicas, targets_of(objectives(w, serving)), serving.engine.max_utilization,
                     serving.engine.load_headroom)


def estimate_inference_speed(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu,
                             sm: SpeedModel, *, gpus_per_node: int | None = None, max_batch: int | None = None,
                             serving: ServingData | None = None, reserved_bytes: float | None = None) -> SpeedResult:
    """Serving the project's load (workload.arrival_rate, users, or batch_size requests in flight per replica) on
    `gpus` x `gpu`, tensor/pipeline parallel per `lay`, the rest replicas: latency percentiles, throughput, the
    capacity within the objectives and the replicas the load needs. `reserved_bytes`: memory per GPU the engine
    keeps besides the KV cache (default: weights, the prefill workspace and CUDA graphs). `max_batch` is kept for
    callers of the old signature; memory now enters through the KV cache tokens."""
    if serving is None:
        raise TypeError("estimate_inference_speed needs serving= (gpuplan.catalog.serving.load_serving())")
    if arch.kind not in ("decoder", "encoder-decoder"):
        return encoder_speed(arch, p, w, lay, gpus, gpu, sm)
    t = time_replicas(arch, p, w, lay, gpus, gpu, sm, serving, node=gpus_per_node or min(gpus, _node_gpus(gpu)),
                      reserved_bytes=reserved_bytes)
    return timed_result(arch, p, w, lay, gpu, sm, serving, t)


def _reserved(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, serving: ServingData) -> float:
    dense, experts = _weights_read(arch, p, w.weights_dtype or "bf16")
    return (dense + experts + p.embedding * 2) / (lay.tp * lay.pp) + serving.engine.cuda_graph_gib * GIB * 2


def timed_result(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpu: Gpu, sm: SpeedModel,
                 serving: ServingData, t: Timing) -> SpeedResult:
    """The full result of a timed decoder layout: latency percentiles, ranges, notes and assumptions."""
    sz, lat = t.sizing, t.now
    rep, replicas = sz.rep, sz.replicas
    e = rep.engine
    s = lat.state
    obj = objectives(w, serving)
    tg = targets_of(obj)
    cap, bound = sz.capacity.rate, sz.capacity.bound
    cap_rep = sz.capacity_per_replica
    need = sz.replicas_needed
    rate = t.rate * rep.pp  # one replica's
    notes = (_notes(w, rep, rate, replicas, cap_rep, need, lay) + precision_notes(w, gpu)
             + _calibration_notes(sm.generations[gpu.generation]))
    met = None if not tg.any else tg.missed(lat) is None
    total_rate = rate * replicas
    itl = lat.itl.mean
    mem_t = e.cost.weights_s + e.cost.kv_s_per_token * s.decodes * (e.prompt + e.output / 2)
    bound_now = "memory-bandwidth" if mem_t >= e.cost.decode_flop_s * s.decodes else "compute"
    conc_cap = sz.capacity.at.concurrency if sz.capacity.at is not None and cap > 0 else 0.0
    batch_prefill = e.cost.seconds(0.0, w.batch_size * e.prompt, w.batch_size * e.prompt,
                                   w.batch_size * e.prompt ** 2 / 2)
    inf = InferenceSpeed(
        time_to_first_token_s=lat.ttft.mean, time_to_first_token_s_range=_span(lat.ttft.mean, sm),
        decode_tokens_per_s_per_request=1 / itl if itl > 0 else 0.0,
        decode_tokens_per_s_per_request_range=_span(1 / itl if itl > 0 else 0.0, sm, speed=True),
        aggregate_tokens_per_s=total_rate * e.output,
        aggregate_tokens_per_s_range=_span(total_rate * e.output, sm, speed=True),
        batch_prefill_s=batch_prefill, request_latency_s=lat.e2e.mean, requests_per_s=total_rate,
        decode_bound=bound_now, target_latency_s=w.target_latency_s,
        max_batch_for_target=int(conc_cap * rep.pp) if w.target_latency_s and conc_cap * rep.pp >= 1 else None,
        requests_per_s_at_target=cap_rep * replicas if w.target_latency_s and cap > 0 else None,
        ttft_s=_pct(lat.ttft), itl_s=_pct(lat.itl), e2e_s=_pct(lat.e2e),
        concurrency=total_rate * lat.e2e.mean, load=t.load, replicas=replicas,
        capacity_requests_per_s=cap_rep * replicas, capacity_requests_per_s_per_replica=cap_rep,
        capacity_bound=bound, replicas_needed=need, replica_demand=sz.demand, objectives=obj, objectives_met=met,
        decode_batch=s.decodes, step_s=s.step_s, kv_cache_occupancy=min(s.kv_used_tokens / e.kv_tokens, 1.0)
        if e.kv_tokens > 0 else 1.0, kv_cache_tokens=int(e.kv_tokens * rep.pp),
        kv_cache_requests=sz.kv_cache_requests,
        max_num_batched_tokens=e.budget, max_num_seqs=e.max_seqs if serving.engine.paged else w.batch_size,
        engine=serving.engine.id,
        assumptions=_assumptions(w, gpu, sm, serving, rep, rate, replicas, lay, t.load),
    )
    fwd = forward_flops(arch, p, int(e.prompt), eager=w.attention == "eager", image_size=int(e.prompt))
    compute = ComputeOut(flops_per_token=fwd.forward / fwd.tokens, hardware_flops_per_token=fwd.forward / fwd.tokens,
                         flops_total=None)
    return SpeedResult(compute=compute, inference=inf, notes=notes)


def _notes(w: Workload, rep: Replica, rate: float, replicas: int, cap: float, need: int | None,
           lay: Layout) -> list[Note]:
    out: list[Note] = []
    if rep.saturation <= 0:
        e = rep.engine
        out.append(Note(code="no-kv-room", severity="warning",
                        message=f"the engine's memory left after the weights holds {e.kv_tokens * rep.pp:,.0f} KV "
                                f"cache tokens, less than one request's {e.prompt + e.output:,.0f}: nothing can be "
                                "served; more tensor parallelism, a GPU with more memory or a smaller dtype"))
        return out
    if w.arrival_rate is not None and w.arrival_rate > rep.saturation_rate * replicas:
        out.append(Note(code="over-capacity", severity="warning",
                        message=f"{w.arrival_rate:g} requests/s is more than {replicas} replica(s) of "
                                f"{lay.tp * lay.pp} GPU(s) sustain ({rep.saturation_rate * replicas:,.2f}/s): figures "
                                "at that rate; the queue grows without bound"
                                + (f"; {need} replicas meet the objectives" if need else "")))
    if cap <= 0:
        out.append(Note(code="latency-target-missed", severity="warning",
                        message="even a lightly loaded replica misses the objectives: a faster GPU, more tensor "
                                "parallelism, shorter prompts or fewer output tokens"))
    elif need is not None and need > replicas:
        out.append(Note(code="replicas-needed", severity="warning",
                        message=f"the load needs {need} replica(s) of {lay.tp * lay.pp} GPU(s) within the objectives "
                                f"({cap:,.2f} requests/s each, with headroom); this hardware has {replicas}"))
    return out


def _assumptions(w: Workload, gpu: Gpu, sm: SpeedModel, serving: ServingData, rep: Replica, rate: float,
                 replicas: int, lay: Layout, load: str) -> list[str]:
    e = rep.engine
    gen = sm.generations[gpu.generation]
    if load == "arrival_rate":
        how = f"{w.arrival_rate:g} requests/s arriving ({w.arrival})"
    elif load == "users":
        how = f"{w.users} users thinking {w.think_time_s or 0:g} s between requests"
    else:
        how = f"{w.batch_size} requests in flight per replica"
    if serving.engine.paged:
        name = {"sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM"}.get(serving.engine.id, "vLLM")
        how_engine = (f"continuous batching as {name} runs it: {e.budget} tokens per step (chunked prefill), up to "
                      f"{e.max_seqs} requests, {e.kv_tokens * rep.pp:,.0f} KV cache tokens per replica in "
                      f"{e.block}-token blocks")
    else:
        how_engine = (f"Hugging Face generate() (engine transformers): the batch of {w.batch_size} prefilled at once "
                      f"({e.budget:,} tokens in one forward pass), then decoded together with eager kernels (no CUDA "
                      f"graphs); a full KV cache per sequence, {e.kv_tokens * rep.pp:,.0f} tokens per replica; timed "
                      "as the engine model with that budget (static batching's lockstep is not modelled)")
    if e.cached > 0:
        how_engine += (f"; prefix caching: {e.cached / e.prompt:.0%} of each prompt ({e.cached:,.0f} tokens) found in "
                       "the cache, not prefilled" + (", its KV blocks held once for the requests in flight"
                                                     if e.cached_shared else ", held by each request"))
    if e.spec_k and w.speculative is not None:
        how_engine += (f"; speculative decoding ({w.speculative.method}): {e.spec_k} token(s) drafted per request and "
                       f"step, verified together by the model, {e.accepted:.2f} emitted per step on average")
    return [how_engine,
            (f"decoding reads the weights at {gen.bandwidth:.0%} and the KV cache at "
             f"{gen.bandwidth * serving.engine.attention_bandwidth_ratio:.0%} of {gpu.memory_bandwidth_gbs:,.0f} GB/s"),
            (f"{how}; {e.prompt:.0f} prompt and {e.output:.0f} output tokens on average; {replicas} replica(s) of "
             f"{lay.tp * lay.pp} GPU(s) (tp {lay.tp}, pp {lay.pp})")]


__all__ = ["EngineModel", "Replica", "build_replica", "engine_model", "estimate_inference_speed",
           "lengths", "objectives", "poisson_arrivals", "size_replicas", "step_cost", "targets_of", "time_replicas",
           "timed_result"]
