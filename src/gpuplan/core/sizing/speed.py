"""The speed model: training step time, tokens per second and GPU-hours; inference time to first token and
decoding throughput. Pure functions over the architecture, the workload, the GPU row and the assumptions
of data/speed.toml.

Training step (per GPU), the sum of:
- matmul: hardware FLOPs / (dense peak at the precision x efficiency), where efficiency = the generation's
  matmul efficiency x tokens / (tokens + half_tokens): small micro-batches leave the tensor cores idle
  (a layer-width penalty was tried and the calibration runs gave it no weight); attention kernels run at
  a fraction of that efficiency;
- elementwise: passes x the bytes autograd saves for backward / (memory bandwidth x its efficiency);
- overhead: kernel launches (per layer, per LoRA linear) on every micro-batch;
- QLoRA: dequantizing the NF4 base each forward and backward (and recompute);
- optimizer: bytes the step moves / bandwidth, plus kernel launches per tensor for a for-loop optimizer;
- communication left exposed: data-parallel gradient all-reduce (or ZeRO gathers and reduce-scatters)
  beyond what overlaps with backward, tensor-parallel all-reduces, over NVLink, PCIe or the network;
- pipeline bubble: (pp - 1) / micro-batches of the compute.
Wall time adds goodput (restarts, evaluation, checkpoints) for runs longer than a day.

Decoding (per step): max(bytes read / bandwidth, FLOPs / compute) + launches + tensor-parallel all-reduce
latency; prefill is compute-bound like a training forward.
"""

from __future__ import annotations

import math

from gpuplan.core.sizing.flops import Flops, forward_flops, training_flops
from gpuplan.core.sizing.lora import block_linears
from gpuplan.core.sizing.memory import WEIGHT_BYTES, kv_cache_bytes, resolve, saved_bytes_per_sample
from gpuplan.core.sizing.params import ParamCount
from gpuplan.schema.estimate import ActivationTable, Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.speed import (ComputeOut, GenerationEfficiency, InferenceSpeed, Span, SpeedModel, SpeedResult,
                                  TimeEstimate)

GB = 1e9


def _span(v: float, sm: SpeedModel, *, speed: bool = False) -> Span:
    """(low, high) around `v` from the calibration spread of measured/predicted speed; a time is the
    inverse of a speed, so its range flips."""
    lo, hi = sm.params.range_low, sm.params.range_high
    if speed:
        return (v * lo, v * hi)
    return (v / hi, v / lo)


def precision_class(precision: str) -> str:
    if precision == "fp32":
        return "fp32"
    return "fp8" if precision.startswith("fp8") else "16bit"


def peak_flops(gpu: Gpu, precision: str, tf32: bool = False) -> float:
    """Dense peak FLOP/s the matmuls of `precision` run at on `gpu` (fp32: CUDA cores, as PyTorch keeps
    TF32 off for matmuls by default, unless `tf32`)."""
    t = gpu.tflops
    cls = precision_class(precision)
    if cls == "fp32":
        return (t.tf32 if tf32 and t.tf32 else t.fp32) * 1e12
    if cls == "fp8" and t.fp8:
        return t.fp8 * 1e12
    if precision.startswith("bf16") and t.bf16:
        return t.bf16 * 1e12
    return t.fp16 * 1e12


def _base_efficiency(gen: GenerationEfficiency, precision: str) -> float:
    return {"fp32": gen.matmul_fp32, "fp8": gen.matmul_fp8, "16bit": gen.matmul_16bit}[precision_class(precision)]


def matmul_efficiency(gen: GenerationEfficiency, sm: SpeedModel, precision: str, tokens: float) -> float:
    """Fraction of the dense peak the matmuls of a micro-batch of `tokens` tokens (per GPU) reach."""
    return _base_efficiency(gen, precision) * tokens / (tokens + sm.params.matmul_half_tokens)


def link_gbs(gpu: Gpu, sm: SpeedModel, group: int, gpus_per_node: int) -> float:
    """One-way bandwidth (GB/s) a collective over `group` GPUs gets: the scale-up link inside its domain,
    PCIe otherwise, the network across nodes; times the link efficiency."""
    p = sm.params
    if group > gpus_per_node:
        net = sm.generations[gpu.generation].network_gbs_per_gpu
        bw = min(net, _intranode_gbs(gpu, sm, gpus_per_node))
    else:
        bw = _intranode_gbs(gpu, sm, group)
    return bw * p.link_efficiency


def _node_gpus(gpu: Gpu) -> int:
    """GPUs that share the fast link: an NVLink/Infinity Fabric domain (8 on a board, 72 in an NVL72 rack), else
    the 8 of a server."""
    ic = gpu.interconnect
    return max(ic.domain_gpus, 8) if ic.kind in ("nvlink-switch", "infinity-fabric", "roce-on-die") else 8


def _intranode_gbs(gpu: Gpu, sm: SpeedModel, group: int) -> float:
    ic = gpu.interconnect
    if ic.kind != "none" and group <= ic.domain_gpus:
        return ic.bandwidth_gbs / 2
    if gpu.market_class == "consumer" and gpu.generation in ("ada", "blackwell"):
        return sm.params.pcie_no_p2p_gbs
    return sm.params.pcie_p2p_gbs.get(str(ic.pcie_gen), 22.0)


def _allreduce_s(bytes_: float, n: int, bw_gbs: float, latency: float) -> float:
    if n <= 1 or bytes_ <= 0:
        return 0.0
    return 2 * (n - 1) / n * bytes_ / (bw_gbs * GB) + 2 * math.ceil(math.log2(n)) * latency


def _param_tensors(arch: ModelArch) -> int:
    """Parameter tensors of a transformer, roughly: each linear's weight (and bias), two norms per layer."""
    linears = sum(mult for _, _, _, mult in block_linears(arch)) if arch.kind != "cnn" else 3 * arch.num_layers
    return int(linears * (2 if arch.qkv_bias or arch.mlp_bias else 1) + arch.num_layers * arch.norms_per_layer + 3)


def _lora_linears(arch: ModelArch, w: Workload) -> int:
    if w.task not in ("lora", "qlora"):
        return 0
    targets = (w.lora.targets if w.lora else ["all-linear"])
    total = 0
    for name, _, _, mult in block_linears(arch):
        if "all-linear" in targets or name in targets:
            total += mult
    return total


def _calibration_notes(gen: GenerationEfficiency) -> list[Note]:
    if gen.basis != "prior":
        return []
    return [Note(code="speed-uncalibrated", severity="warning",
                 message=f"no published runs on {gen.id} GPUs calibrate the speed model; its efficiency is a prior: "
                         f"{gen.source}")]


def tokens_per_sample(arch: ModelArch, w: Workload) -> int:
    r = resolve(arch, w)
    if arch.kind == "encoder-decoder":
        return r.seq + r.target
    return 1 if arch.kind == "cnn" else r.seq


def estimate_training_speed(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu,
                            sm: SpeedModel, table: ActivationTable, *, trainable: int,
                            total_tokens: float | None = None, gpus_per_node: int | None = None,
                            virtual_stages: int = 1) -> SpeedResult:
    """Training step time and throughput of `gpus` x `gpu`; GPU-hours when `total_tokens` is known (tokens;
    images for CNNs). `virtual_stages` > 1: an interleaved pipeline schedule (Megatron), which divides the
    bubble."""
    r = resolve(arch, w)
    notes: list[Note] = []
    assumptions: list[str] = []
    prm = sm.params
    gen = sm.generations[gpu.generation]
    node = gpus_per_node or min(gpus, _node_gpus(gpu))
    tp, pp = lay.tp, lay.pp
    dp = max(gpus // (tp * pp), 1)
    frozen = w.task in ("lora", "qlora")
    ckpt = w.gradient_checkpointing
    eager = w.attention == "eager"

    fwd: Flops = forward_flops(arch, p, r.seq, target=r.target, eager=eager, image_size=r.seq)
    tf = training_flops(fwd, frozen_base=frozen, checkpointing=ckpt)
    tok_sample = fwd.tokens
    micro = max((w.global_batch_size or r.batch * dp) // (r.batch * dp), 1)
    global_samples = r.batch * dp * micro
    step_tokens = global_samples * tok_sample

    # --- one micro-batch on one GPU --------------------------------------------------------------------
    mb_tokens = r.batch * tok_sample
    if w.precision.startswith("bf16") and not gpu.tflops.bf16:
        notes.append(Note(code="no-bf16", severity="warning",
                          message=f"{gpu.name} has no bf16 tensor cores; timed as fp16 (bf16 runs far slower)"))
    peak = peak_flops(gpu, w.precision, w.tf32)
    # a CNN's convolutions run over its feature maps: count 14 x 14 positions per image as its "tokens"
    mm_tokens = mb_tokens if arch.kind != "cnn" else r.batch * 196
    eff = matmul_efficiency(gen, sm, w.precision, mm_tokens)
    attn_share = fwd.attention_forward / fwd.forward if fwd.forward else 0.0
    hw_flops = tf.hardware_per_token * mb_tokens / (tp * pp)
    t_matmul = hw_flops * (1 - attn_share) / (peak * eff) + hw_flops * attn_share / (peak * eff * prm.attention_factor)
    bw = gpu.memory_bandwidth_gbs * GB * gen.bandwidth
    saved = saved_bytes_per_sample(arch, w, table, tp) * r.batch / pp
    fp8_casts = prm.fp8_cast_passes if precision_class(w.precision) == "fp8" else 0.0
    t_elem = (prm.elementwise_passes + fp8_casts) * saved * (4 / 3 if ckpt else 1.0) / bw
    layers = (arch.num_layers + arch.num_decoder_layers) / pp
    kernels = layers * prm.kernels_per_layer + _lora_linears(arch, w) / pp * prm.kernels_per_lora_linear
    t_launch = kernels * prm.kernel_launch_s * (4 / 3 if ckpt else 1.0)
    t_dequant = 0.0
    if w.task == "qlora":
        passes = 3 if ckpt else 2
        t_dequant = passes * p.block_linear_weights / (tp * pp) * prm.qlora_dequant_bytes_per_param / bw
    if w.stack == "eager":  # the tuned stack's kernels, run eagerly: every part of a GPU's own step is slower
        f = prm.eager_step_factor
        t_matmul, t_elem, t_launch, t_dequant = t_matmul * f, t_elem * f, t_launch * f, t_dequant * f
    t_micro = t_matmul + t_elem + t_launch + t_dequant

    # --- once per step ----------------------------------------------------------------------------------
    master_bytes = 2 if w.precision == "bf16" else 4
    shard = tp * pp * (dp if lay.zero >= 1 else 1)
    opt_bytes = prm.optimizer_bytes_per_param[w.optimizer] * master_bytes / 4 * trainable / shard
    if w.optimizer_implementation != "fused":
        opt_bytes *= prm.optimizer_unfused_traffic
    t_opt = opt_bytes / bw
    if w.optimizer_implementation == "for-loop":
        t_opt += _param_tensors(arch) * prm.optimizer_kernels_per_tensor * prm.kernel_launch_s
    if w.stack == "eager":
        t_opt *= prm.eager_step_factor

    # communication: what each GPU sends per step ((n-1)/n of the volume in ring collectives)
    lat = prm.collective_latency_s
    t_dp = t_dp_exposed = 0.0
    if dp > 1:
        dp_bw = link_gbs(gpu, sm, gpus if gpus > node else dp, node) * GB
        grad_b = 2 if (w.precision == "bf16" or lay.zero >= 2) else 4  # FSDP/ZeRO-2+ reduce in 16 bits
        shard = trainable / (tp * pp)
        # (bytes per GPU, compute it can hide behind, times per step)
        if lay.zero == 0:  # DDP: all-reduce the gradients during the last micro-batch's backward
            phases = [(2 * grad_b * shard, t_micro * 2 / 3, 1)]
        elif lay.zero == 1:  # reduce-scatter the gradients behind the last backward, all-gather the updated
            # 16-bit weights behind the next forward
            phases = [((grad_b + 2) * shard, t_micro, 1)]
        elif lay.zero == 2:  # sharded gradients cannot accumulate unsharded: reduce-scatter every micro-batch
            phases = [(grad_b * shard, t_micro * 2 / 3, micro), (2 * shard, t_micro / 3, 1)]
        else:  # ZeRO-3/FSDP: gather 16-bit weights for forward and again for backward, reduce-scatter the
            # gradients, every micro-batch, behind that micro-batch's compute
            phases = [(4 * p.total / (tp * pp) + grad_b * shard, t_micro, micro)]
        frac = (dp - 1) / dp
        hops = 2 * math.ceil(math.log2(dp)) * lat
        for volume, window, times in phases:
            t = frac * volume / dp_bw + hops
            t_dp += times * t
            # what does not fit in the window is exposed, and overlapping never hides all of it (contention)
            t_dp_exposed += times * (max(t - window, 0.0) + (1 - prm.comm_overlap) * min(t, window))
    t_tp = 0.0
    if tp > 1:
        tp_bw = link_gbs(gpu, sm, tp, node)
        act = r.batch * tok_sample * arch.hidden_size * 2
        # two all-reduces per layer in forward, two in backward (and two more to recompute)
        t_tp = micro * layers * (6 if ckpt else 4) * _allreduce_s(act, tp, tp_bw, lat)
    bubble = (pp - 1) * t_micro / virtual_stages  # 1F1B: the pipeline fills and drains once per step

    step = micro * t_micro + t_opt + t_dp_exposed + t_tp + bubble
    tokens_per_s = step_tokens / step
    mfu = tf.model_per_token * tokens_per_s / (gpus * peak)

    steps = wall = gpu_hours = None
    goodput = 1.0
    total = total_tokens
    if total is not None:
        steps = max(math.ceil(total / step_tokens), 1)
        compute_hours = steps * step / 3600
        if compute_hours > prm.goodput_threshold_hours:
            goodput = prm.goodput_long_run
            assumptions.append(f"goodput {goodput:.0%}: restarts, evaluation and checkpoints on a run longer than "
                               f"{prm.goodput_threshold_hours:g} h")
        wall_h = compute_hours / goodput
        wall = wall_h
        gpu_hours = wall_h * gpus

    assumptions[:0] = [
        f"matmul efficiency {eff:.0%} of the {peak / 1e12:,.0f} TFLOPS {precision_class(w.precision)} dense peak "
        f"({gen.id}: {_base_efficiency(gen, w.precision):.0%}"
        f" for large micro-batches, {gen.basis}; x the micro-batch penalty)",
        f"{micro} micro-batch(es) of {r.batch} x {tok_sample} tokens per GPU per step; {dp}-way data parallel",
        f"plain eager PyTorch + transformers: x{prm.eager_step_factor:g} the tuned step (measured on an H200)"
        if w.stack == "eager" else
        f"a tuned training stack (workload.stack: eager, the HF Trainer's default, measured "
        f"x{prm.eager_step_factor:g} slower on an H200)",
    ]
    notes += _calibration_notes(gen)
    if lay.offload != "none":
        notes.append(Note(code="offload-not-timed", severity="warning",
                          message=f"offload={lay.offload}: moving states over PCIe and the CPU's optimizer step are not "
                                  "in the step time; expect the step to be slower"))
    time = TimeEstimate(
        tokens_per_s=tokens_per_s, tokens_per_s_range=_span(tokens_per_s, sm, speed=True),
        tokens_per_s_per_gpu=tokens_per_s / gpus, step_seconds=step, step_seconds_range=_span(step, sm),
        steps=steps, tokens=total, wall_hours=wall, wall_hours_range=None if wall is None else _span(wall, sm),
        gpu_hours=gpu_hours, gpu_hours_range=None if gpu_hours is None else _span(gpu_hours, sm),
        goodput=goodput, mfu=mfu, efficiency=eff,
        step_breakdown_s={"matmul": micro * t_matmul, "elementwise": micro * t_elem, "overhead": micro * t_launch,
                          "qlora_dequant": micro * t_dequant, "optimizer": t_opt,
                          "communication": t_dp_exposed + t_tp, "bubble": bubble},
        assumptions=assumptions,
    )
    compute = ComputeOut(flops_per_token=tf.model_per_token, hardware_flops_per_token=tf.hardware_per_token,
                         flops_total=tf.model_per_token * total if total is not None else None)
    return SpeedResult(compute=compute, time=time, notes=notes)


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


__all__ = ["estimate_inference_speed", "estimate_training_speed", "link_gbs", "matmul_efficiency", "peak_flops",
           "precision_class", "tokens_per_sample"]
