"""Serving speed: time to first token, decoding throughput and request latency of concurrent requests on
tensor-parallel replicas (see gpuplan.core.sizing.speed for the model's summary)."""

from __future__ import annotations

import math

from gpuplan.core.sizing.flops import forward_flops
from gpuplan.core.sizing.memory import WEIGHT_BYTES, kv_cache_bytes, resolve
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.rates import (
    GB,
    _allreduce_s,
    _base_efficiency,
    _calibration_notes,
    _node_gpus,
    _span,
    link_gbs,
    matmul_efficiency,
    peak_flops,
)
from gpuplan.schema.estimate import Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.speed import ComputeOut, InferenceSpeed, SpeedModel, SpeedResult


def estimate_inference_speed(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu,
                             sm: SpeedModel, *, gpus_per_node: int | None = None,
                             max_batch: int | None = None) -> SpeedResult:
    """Serving `w.batch_size` concurrent requests of `context_length` prompt tokens and `output_tokens` new
    ones on `gpus` x `gpu` (tensor/pipeline parallel per `lay`, the rest replicas).

    Time to first token: a request's own prefill (chunked by `prefill_tokens`) and its first decoding step,
    as on a serving engine that interleaves prefill with running decodes. With `target_latency_s`, the
    largest batch (up to `max_batch`, what memory allows) whose requests finish within it."""
    r = resolve(arch, w)
    prm = sm.params
    gen = sm.generations[gpu.generation]
    node = gpus_per_node or min(gpus, _node_gpus(gpu))
    tp, pp = lay.tp, lay.pp
    mp = tp * pp
    replicas = max(gpus // mp, 1)
    generative = arch.kind in ("decoder", "encoder-decoder")
    out = (w.output_tokens or 256) if generative else 0
    prompt = r.seq
    batch = r.batch
    dtype = w.weights_dtype or "bf16"
    notes: list[Note] = []
    assumptions: list[str] = []
    prec = "fp8-mixed" if dtype == "fp8" else ("fp32" if dtype == "fp32" else "bf16")
    peak = peak_flops(gpu, prec)
    bw = gpu.memory_bandwidth_gbs * GB * gen.bandwidth
    fwd = forward_flops(arch, p, prompt, eager=w.attention == "eager", image_size=prompt)
    layers = arch.num_layers + arch.num_decoder_layers
    lat = prm.collective_latency_s
    tp_bw = link_gbs(gpu, sm, tp, node) if tp > 1 else 1.0
    launches = layers * prm.decode_kernels_per_layer * prm.kernel_launch_s

    wb = WEIGHT_BYTES[dtype]
    if wb < 2:  # quantized blocks; embeddings, head and norms stay in 16 bits
        dense_bytes = p.block_linear_weights * wb + (p.total - p.block_linear_weights) * 2 - p.embedding * 2
    else:
        dense_bytes = (p.total - p.embedding) * wb
    if arch.tie_word_embeddings and arch.kind == "decoder":  # the tied head is read every step
        dense_bytes += arch.vocab_size * arch.hidden_size * min(wb, 2)

    def weight_bytes(b: int) -> float:
        """Weights one forward step reads: MoE layers only the experts their `b` tokens route to."""
        wbytes = dense_bytes
        if arch.moe is not None:
            m = arch.moe
            expert_w = 3 * arch.hidden_size * m.expert_intermediate_size * m.moe_layers * wb
            touched = m.num_experts * (1 - (1 - m.experts_per_token / m.num_experts) ** b)
            wbytes -= expert_w * (m.num_experts - touched)
        return wbytes / mp

    def prefill_s(prompts: int) -> float:
        tokens = prompts * prompt
        chunk = min(w.prefill_tokens or tokens, tokens)
        chunks = math.ceil(tokens / chunk)
        eff = matmul_efficiency(gen, sm, prec, chunk) * prm.prefill_factor
        t = max(fwd.forward * prompts / mp / (peak * eff), chunks * weight_bytes(chunk) / bw) + chunks * launches
        if tp > 1:
            t += layers * 2 * _allreduce_s(tokens * arch.hidden_size * 2, tp, tp_bw, lat)
        return t

    kv_b = 1 if w.kv_cache_dtype == "fp8" else 2
    avg_ctx = prompt + out / 2

    def step_s(b: int) -> tuple[float, str, float]:
        """One decoding step of `b` requests: (seconds, what bounds it, bytes read)."""
        kv = kv_cache_bytes(arch, b, int(avg_ctx), kv_b) / mp if generative else 0.0
        read = weight_bytes(b) + kv
        flops = 2 * (p.active - p.embedding) * b + 4 * arch.q_dim * avg_ctx * arch.num_layers * b
        t_mem = read / bw
        # matrix-vector products: bandwidth-bound until the batch is large; the compute bound uses the
        # large-matmul efficiency (no micro-batch penalty)
        t_cmp = flops / mp / (peak * _base_efficiency(gen, prec))
        t = max(t_mem, t_cmp) + launches
        if tp > 1:
            t += layers * 2 * _allreduce_s(b * arch.hidden_size * 2, tp, tp_bw, lat)
        return t, ("memory-bandwidth" if t_mem >= t_cmp else "compute"), read

    def latency_s(b: int) -> float:
        t, _, _ = step_s(b)
        return prefill_s(1) + out * t

    t_one = prefill_s(1)
    batch_prefill = prefill_s(batch)
    if generative:
        t_step, bound, read = step_s(batch)
        ttft = t_one + t_step
        latency = t_one + out * t_step
        per_request = 1 / t_step
        aggregate = batch / t_step * replicas
        # each request holds the GPU for its own prefill and a 1/batch share of `out` decoding steps
        rps = replicas / (t_one + out * t_step / batch)
        assumptions.append(f"decoding reads {read / GB:.1f} GB per step at {gen.bandwidth:.0%} of "
                           f"{gpu.memory_bandwidth_gbs:,.0f} GB/s")
    else:  # encoders, vision: one forward per request, no decoding
        t_step, bound = batch_prefill, "compute"
        ttft = latency = t_one
        per_request = 0.0
        aggregate = batch * fwd.tokens / batch_prefill * replicas
        rps = batch * replicas / batch_prefill
    if arch.moe is not None:
        m = arch.moe
        touched = m.num_experts * (1 - (1 - m.experts_per_token / m.num_experts) ** batch)
        assumptions.append(f"MoE: a decoding step of {batch} request(s) reads about {touched:.1f} of "
                           f"{m.num_experts} experts per layer")
    eff1 = matmul_efficiency(gen, sm, prec, min(w.prefill_tokens or prompt, prompt)) * prm.prefill_factor
    assumptions.insert(0, f"prefill at {eff1:.0%} of the {peak / 1e12:,.0f} TFLOPS dense peak")
    if generative:
        assumptions.append("decoding as a serving engine runs it (CUDA graphs, batched KV cache: vLLM, TensorRT-LLM, "
                           "SGLang); Hugging Face generate() with its default dynamic cache measured 5-9x slower on "
                           "an H200 (docs/accuracy.md)")
    assumptions.append(f"{batch} concurrent request(s) of {prompt} prompt" + (f" and {out} output tokens" if out else "")
                       + f"; {replicas} replica(s) of {mp} GPU(s)")

    best_b = rps_target = None
    if w.target_latency_s and generative:
        cap = max_batch or 4096
        if latency_s(1) <= w.target_latency_s:  # latency grows with the batch: bisect for the largest
            lo, hi = 1, cap + 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if latency_s(mid) <= w.target_latency_s else (lo, mid)
            best_b = lo
            t_b, _, _ = step_s(best_b)
            rps_target = replicas / (t_one + out * t_b / best_b)
        else:
            notes.append(Note(code="latency-target-missed", severity="warning",
                              message=f"even one request takes {latency_s(1):.2f} s, over the {w.target_latency_s:g} s "
                                      "target: a faster GPU, more tensor parallelism or fewer output tokens"))
    notes += _calibration_notes(gen)
    inf = InferenceSpeed(
        time_to_first_token_s=ttft, time_to_first_token_s_range=_span(ttft, sm),
        decode_tokens_per_s_per_request=per_request,
        decode_tokens_per_s_per_request_range=_span(per_request, sm, speed=True),
        aggregate_tokens_per_s=aggregate, aggregate_tokens_per_s_range=_span(aggregate, sm, speed=True),
        batch_prefill_s=batch_prefill, request_latency_s=latency, requests_per_s=rps, decode_bound=bound,
        target_latency_s=w.target_latency_s, max_batch_for_target=best_b, requests_per_s_at_target=rps_target,
        assumptions=assumptions,
    )
    flops_step = 2 * (p.active - p.embedding) * batch + 4 * arch.q_dim * avg_ctx * arch.num_layers * batch
    compute = ComputeOut(flops_per_token=fwd.forward / fwd.tokens, hardware_flops_per_token=fwd.forward / fwd.tokens,
                         flops_total=(fwd.forward * batch + flops_step * out) * replicas)
    return SpeedResult(compute=compute, inference=inf, notes=notes)


__all__ = ["estimate_inference_speed"]
