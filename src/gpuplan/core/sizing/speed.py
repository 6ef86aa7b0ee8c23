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
- pipeline bubble: (pp - 1) / micro-batches of the compute;
- offload: PCIe copies to the host, hidden behind compute up to offload_overlap, and ZeRO-Offload's CPU Adam step.
Stack features: a chunked loss saves fp32-logit passes; compile divides the eager stack's factor; the optimizer step
in backward steps every micro-batch; unpacked batches (packing: false) of several samples are part padding.
Wall time adds goodput (restarts, evaluation, checkpoints) for runs longer than a day.

Decoding (per step): max(bytes read / bandwidth, FLOPs / compute) + launches + tensor-parallel all-reduce
latency; prefill is compute-bound like a training forward.
"""

from __future__ import annotations

import math

from gpuplan.core.sizing.flops import forward_flops, training_flops
from gpuplan.core.sizing.memory import resolve, saved_bytes_per_sample
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.rates import (
    GB,
    _allreduce_s,
    _base_efficiency,
    _calibration_notes,
    _exposed,
    _lora_linears,
    _node_gpus,
    _param_tensors,
    _span,
    _stack_factor,
    host_link_gbs,
    link_gbs,
    matmul_efficiency,
    peak_flops,
    precision_class,
    tokens_per_sample,
)
from gpuplan.core.sizing.serving import estimate_inference_speed
from gpuplan.schema.estimate import ActivationTable, Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.speed import ComputeOut, SpeedModel, SpeedParams, SpeedResult, TimeEstimate


class StepWork:
    """What one training step asks of each GPU, whatever the GPU: FLOPs, bytes saved for backward, kernels,
    optimizer and communication volumes for one workload on one layout. Computed once per layout and timed
    on every GPU type by `step_time` (the search times the same layouts on many GPUs)."""

    __slots__ = (
        "act_offload_bytes",
        "attn_share",
        "ckpt",
        "dequant_bytes",
        "dp",
        "fill",
        "fp8",
        "fwd",
        "gpus",
        "hidden",
        "hw_flops",
        "kernels",
        "lay",
        "layers",
        "logit_bytes",
        "mb_tokens",
        "micro",
        "mm_tokens",
        "opt_bytes",
        "opt_launches",
        "opt_steps",
        "pp",
        "r",
        "saved",
        "step_tokens",
        "tf",
        "tok_sample",
        "total_params",
        "tp",
        "trainable",
        "w",
    )

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, sm: SpeedModel,
                 table: ActivationTable, trainable: int) -> None:
        r = self.r = resolve(arch, w)
        prm = sm.params
        self.w, self.lay, self.gpus = w, lay, gpus
        tp, pp = self.tp, self.pp = lay.tp, lay.pp
        dp = self.dp = max(gpus // (tp * pp), 1)
        frozen = w.task in ("lora", "qlora")
        ckpt = self.ckpt = w.gradient_checkpointing
        eager = w.attention == "eager"
        fwd = self.fwd = forward_flops(arch, p, r.seq, target=r.target, eager=eager, image_size=r.seq)
        tf = self.tf = training_flops(fwd, frozen_base=frozen, checkpointing=ckpt)
        tok_sample = self.tok_sample = fwd.tokens
        micro = self.micro = max((w.global_batch_size or r.batch * dp) // (r.batch * dp), 1)
        global_samples = r.batch * dp * micro
        self.step_tokens = global_samples * tok_sample
        mb_tokens = self.mb_tokens = r.batch * tok_sample
        # a CNN's convolutions run over its feature maps: count 14 x 14 positions per image as its "tokens"
        self.mm_tokens = mb_tokens if arch.kind != "cnn" else r.batch * 196
        self.attn_share = fwd.attention_forward / fwd.forward if fwd.forward else 0.0
        self.hw_flops = tf.hardware_per_token * mb_tokens / (tp * pp)
        self.saved = saved_bytes_per_sample(arch, w, table, tp) * r.batch / pp
        self.fp8 = precision_class(w.precision) == "fp8"
        layers = self.layers = (arch.num_layers + arch.num_decoder_layers) / pp
        self.kernels = layers * prm.kernels_per_layer + _lora_linears(arch, w) / pp * prm.kernels_per_lora_linear
        self.dequant_bytes = 0.0
        if w.task == "qlora":
            passes = 3 if ckpt else 2
            self.dequant_bytes = passes * p.block_linear_weights / (tp * pp) * prm.qlora_dequant_bytes_per_param
        master_bytes = 2 if w.precision == "bf16" else 4
        shard = tp * pp * (dp if lay.zero >= 1 else 1)
        per_param = prm.optimizer_bytes_per_param
        opt_bytes = per_param.get(w.optimizer, per_param["adamw"]) * master_bytes / 4 * trainable / shard
        if w.optimizer_implementation != "fused":
            opt_bytes *= prm.optimizer_unfused_traffic
        self.opt_bytes = opt_bytes
        self.opt_launches = (_param_tensors(arch) * prm.optimizer_kernels_per_tensor * prm.kernel_launch_s
                             if w.optimizer_implementation == "for-loop" else 0.0)
        self.trainable, self.total_params, self.hidden = trainable, p.total, arch.hidden_size
        _stack_work(self, arch, w, prm)


def _stack_work(work: StepWork, arch: ModelArch, w: Workload, prm: SpeedParams) -> None:
    """The stack features' work: fp32-logit bytes a chunked loss saves, activation bytes offloaded per micro-batch,
    the real share of padded tokens, optimizer steps per step."""
    lm_head = arch.kind in ("decoder", "encoder-decoder") and w.task != "inference"
    work.logit_bytes = (prm.logits_fp32_passes * work.mb_tokens * arch.vocab_size / work.tp * 4 / work.pp
                        if lm_head and w.loss == "chunked" else 0.0)
    work.act_offload_bytes = 0.0
    if w.activation_offload:  # with recomputation only each layer's input is saved (and offloaded)
        ckpt_saved = work.layers * work.mb_tokens * arch.hidden_size * 2 / work.tp
        work.act_offload_bytes = ckpt_saved if work.ckpt else work.saved
    # unpacked batches of several samples are padded to their longest: only part of the computed tokens are real
    unpacked = w.packing is False and w.task in ("full-finetune", "lora", "qlora") and work.r.batch > 1
    work.fill = prm.unpacked_token_fill if unpacked else 1.0
    work.step_tokens *= work.fill
    # the optimizer step in backward cannot accumulate gradients: it steps on every micro-batch
    work.opt_steps = work.micro if w.optimizer_in_backward else 1


def _offload_s(work: StepWork, gpu: Gpu, sm: SpeedModel, node: int, t_micro: float) -> tuple[float, float]:
    """ZeRO-Offload per step: (PCIe copies left exposed, the CPU optimizer step). Gradient shards go to the host
    behind the last backward, CPU Adam updates every shard of the host's GPUs, 16-bit weights come back; `params`
    adds each micro-batch's fetch of the weight shard, for forward and for backward, behind that compute."""
    lay, w, prm = work.lay, work.w, sm.params
    if lay.offload == "none":
        return 0.0, 0.0
    link = host_link_gbs(gpu, sm) * GB
    shard = work.trainable / (work.tp * work.pp * (work.dp if lay.zero >= 1 else 1))
    grad_b = 2 if (w.precision == "bf16" or lay.zero >= 2) else 4
    ov = prm.offload_overlap
    exposed = (_exposed(grad_b * shard / link, t_micro * 2 / 3, ov) + 2 * shard / link) * work.opt_steps
    ranks_on_host = min(work.gpus, node)
    cpu_step = shard * ranks_on_host / prm.cpu_adam_params_per_s * work.opt_steps
    if lay.offload == "params":
        fetch = 2 * 2 * work.total_params / (work.tp * work.pp * work.dp) / link
        exposed += work.micro * _exposed(fetch, t_micro, ov)
    return exposed, cpu_step


class StepTime:
    """A training step of `StepWork` on one GPU type: its parts (s), throughput and, given the run's tokens, the
    wall time and GPU-hours."""

    __slots__ = (
        "bubble",
        "eff",
        "goodput",
        "gpu_hours",
        "mfu",
        "peak",
        "step",
        "steps",
        "t_comm",
        "t_cpu_opt",
        "t_dequant",
        "t_elem",
        "t_launch",
        "t_matmul",
        "t_offload",
        "t_opt",
        "tokens_per_s",
        "wall",
    )


def step_time(work: StepWork, gpu: Gpu, sm: SpeedModel, *, total_tokens: float | None = None,
              gpus_per_node: int | None = None, virtual_stages: int = 1) -> StepTime:
    """Time `work` on `gpu`: plain arithmetic, no result objects (estimate_training_speed builds those)."""
    prm = sm.params
    gen = sm.generations[gpu.generation]
    w, pp, micro = work.w, work.pp, work.micro
    node = gpus_per_node or min(work.gpus, _node_gpus(gpu))
    out = StepTime()

    # --- one micro-batch on one GPU --------------------------------------------------------------------
    peak = out.peak = peak_flops(gpu, w.precision, w.tf32)
    eff = out.eff = matmul_efficiency(gen, sm, w.precision, work.mm_tokens)
    attn_share, hw_flops = work.attn_share, work.hw_flops
    af = prm.eager_attention_factor if (w.attention == "eager" and prm.eager_attention_factor) else prm.attention_factor
    t_matmul = hw_flops * (1 - attn_share) / (peak * eff) + hw_flops * attn_share / (peak * eff * af)
    bw = gpu.memory_bandwidth_gbs * GB * gen.bandwidth
    fp8_casts = prm.fp8_cast_passes if work.fp8 else 0.0
    t_elem = (prm.elementwise_passes + fp8_casts) * work.saved * (4 / 3 if work.ckpt else 1.0) / bw
    t_elem = max(t_elem - work.logit_bytes / bw, 0.0)  # a chunked or fused loss never writes the fp32 logits
    t_launch = work.kernels * prm.kernel_launch_s * (4 / 3 if work.ckpt else 1.0)
    t_dequant = work.dequant_bytes / bw if w.task == "qlora" else 0.0
    f = _stack_factor(w, prm)
    t_matmul, t_elem, t_launch, t_dequant = t_matmul * f, t_elem * f, t_launch * f, t_dequant * f
    t_compute = t_matmul + t_elem + t_launch + t_dequant
    t_act = 0.0
    if work.act_offload_bytes:  # saved activations go to the host behind forward and come back behind backward
        t_copy = work.act_offload_bytes / (host_link_gbs(gpu, sm) * GB)
        t_act = (_exposed(t_copy, t_compute / 3, prm.offload_overlap)
                 + _exposed(t_copy, t_compute * 2 / 3, prm.offload_overlap))
    t_micro = t_compute + t_act

    # --- once per step ----------------------------------------------------------------------------------
    t_opt = 0.0
    if work.lay.offload == "none":  # offloaded, the optimizer steps on the host (_offload_s)
        t_opt = work.opt_bytes / bw + (work.opt_launches if w.optimizer_implementation == "for-loop" else 0.0)
        t_opt *= (prm.eager_step_factor if w.stack == "eager" else 1.0) * work.opt_steps
    t_dp_exposed = _dp_exposed(work, gpu, sm, node, t_compute)
    t_tp = 0.0
    if work.tp > 1:
        tp_bw = link_gbs(gpu, sm, work.tp, node)
        act = work.r.batch * work.tok_sample * work.hidden * 2
        # two all-reduces per layer in forward, two in backward (and two more to recompute)
        t_tp = micro * work.layers * (6 if work.ckpt else 4) * _allreduce_s(act, work.tp, tp_bw, prm.collective_latency_s)
        if w.stack != "eager":  # tuned stacks pipeline the all-reduces with the GEMMs around them
            t_tp *= 1 - prm.tp_comm_overlap
    bubble = (pp - 1) * t_micro / virtual_stages  # 1F1B: the pipeline fills and drains once per step
    t_zero_off, t_cpu = _offload_s(work, gpu, sm, node, t_compute)

    step = micro * t_micro + t_opt + t_dp_exposed + t_tp + bubble + t_zero_off + t_cpu
    tokens_per_s = work.step_tokens / step
    out.t_matmul, out.t_elem, out.t_launch, out.t_dequant, out.t_opt = t_matmul, t_elem, t_launch, t_dequant, t_opt
    out.t_comm, out.bubble, out.step, out.tokens_per_s = t_dp_exposed + t_tp, bubble, step, tokens_per_s
    out.t_offload, out.t_cpu_opt = micro * t_act + t_zero_off, t_cpu
    out.mfu = work.tf.model_per_token * tokens_per_s / (work.gpus * peak)
    out.steps = out.wall = out.gpu_hours = None
    out.goodput = 1.0
    if total_tokens is not None:
        out.steps = max(math.ceil(total_tokens / work.step_tokens), 1)
        compute_hours = out.steps * step / 3600
        if compute_hours > prm.goodput_threshold_hours:
            out.goodput = prm.goodput_long_run
        out.wall = compute_hours / out.goodput
        out.gpu_hours = out.wall * work.gpus
    return out


def _dp_exposed(work: StepWork, gpu: Gpu, sm: SpeedModel, node: int, t_micro: float) -> float:
    """Data-parallel communication left exposed per step: what each GPU sends ((n-1)/n of the volume in ring
    collectives) beyond what hides behind the compute it overlaps with."""
    w, lay, dp, tp, pp, micro = work.w, work.lay, work.dp, work.tp, work.pp, work.micro
    if dp <= 1:
        return 0.0
    prm = sm.params
    dp_bw = link_gbs(gpu, sm, work.gpus if work.gpus > node else dp, node) * GB
    grad_b = 2 if (w.precision == "bf16" or lay.zero >= 2) else 4  # FSDP/ZeRO-2+ reduce in 16 bits
    shard = work.trainable / (tp * pp)
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
        phases = [(4 * work.total_params / (tp * pp) + grad_b * shard, t_micro, micro)]
    frac = (dp - 1) / dp
    hops = 2 * math.ceil(math.log2(dp)) * prm.collective_latency_s
    total = 0.0
    for volume, window, times in phases:
        t = frac * volume / dp_bw + hops
        # what does not fit in the window is exposed, and overlapping never hides all of it (contention)
        total += times * _exposed(t, window, prm.comm_overlap)
    return total


def estimate_training_speed(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu,
                            sm: SpeedModel, table: ActivationTable, *, trainable: int,
                            total_tokens: float | None = None, gpus_per_node: int | None = None,
                            virtual_stages: int = 1) -> SpeedResult:
    """Training step time and throughput of `gpus` x `gpu`; GPU-hours when `total_tokens` is known (tokens;
    images for CNNs). `virtual_stages` > 1: an interleaved pipeline schedule (Megatron), which divides the
    bubble."""
    work = StepWork(arch, p, w, lay, gpus, sm, table, trainable)
    return training_speed_result(work, step_time(work, gpu, sm, total_tokens=total_tokens,
                                                 gpus_per_node=gpus_per_node, virtual_stages=virtual_stages),
                                 gpu, sm, total_tokens)


def training_speed_result(work: StepWork, st: StepTime, gpu: Gpu, sm: SpeedModel,
                          total_tokens: float | None) -> SpeedResult:
    """The SpeedResult of a timed step: figures with their ranges, the step's breakdown, assumptions and notes."""
    prm, w, gen = sm.params, work.w, sm.generations[gpu.generation]
    notes: list[Note] = []
    if w.precision.startswith("bf16") and not gpu.tflops.bf16:
        notes.append(Note(code="no-bf16", severity="warning",
                          message=f"{gpu.name} has no bf16 tensor cores; timed as fp16 (bf16 runs far slower)"))
    assumptions = [
        f"matmul efficiency {st.eff:.0%} of the {st.peak / 1e12:,.0f} TFLOPS {precision_class(w.precision)} dense "
        f"peak ({gen.id}: {_base_efficiency(gen, w.precision):.0%}"
        f" for large micro-batches, {gen.basis}; x the micro-batch penalty)",
        f"{work.micro} micro-batch(es) of {work.r.batch} x {work.tok_sample} tokens per GPU per step; {work.dp}-way "
        "data parallel",
        f"plain eager PyTorch + transformers: x{prm.eager_step_factor:g} the tuned step (measured on an H200)"
        if w.stack == "eager" else
        f"a tuned training stack (workload.stack: eager, the HF Trainer's default, measured "
        f"x{prm.eager_step_factor:g} slower on an H200)",
    ]
    if st.goodput != 1.0:
        assumptions.append(f"goodput {st.goodput:.0%}: restarts, evaluation and checkpoints on a run longer than "
                           f"{prm.goodput_threshold_hours:g} h")
    assumptions += _stack_assumptions(work, st, gpu, sm)
    notes += _calibration_notes(gen)
    if w.optimizer_in_backward and work.micro > 1:
        notes.append(Note(code="optimizer-in-backward-accumulation", severity="warning",
                          message=f"optimizer_in_backward cannot accumulate gradients over the {work.micro} micro-batches "
                                  "of a step (torchtune refuses it): timed as an optimizer step per micro-batch"))
    micro, tps, wall, gpu_hours = work.micro, st.tokens_per_s, st.wall, st.gpu_hours
    breakdown = {"matmul": micro * st.t_matmul, "elementwise": micro * st.t_elem, "overhead": micro * st.t_launch,
                 "qlora_dequant": micro * st.t_dequant, "optimizer": st.t_opt, "communication": st.t_comm,
                 "bubble": st.bubble}
    if st.t_offload or st.t_cpu_opt:  # only when something is offloaded: plain runs keep their keys
        breakdown.update(offload=st.t_offload, cpu_optimizer=st.t_cpu_opt)
    time = TimeEstimate(
        tokens_per_s=tps, tokens_per_s_range=_span(tps, sm, speed=True),
        tokens_per_s_per_gpu=tps / work.gpus, step_seconds=st.step, step_seconds_range=_span(st.step, sm),
        steps=st.steps, tokens=total_tokens, wall_hours=wall, wall_hours_range=None if wall is None else _span(wall, sm),
        gpu_hours=gpu_hours, gpu_hours_range=None if gpu_hours is None else _span(gpu_hours, sm),
        goodput=st.goodput, mfu=st.mfu, efficiency=st.eff, step_breakdown_s=breakdown, assumptions=assumptions,
    )
    tf = work.tf
    compute = ComputeOut(flops_per_token=tf.model_per_token, hardware_flops_per_token=tf.hardware_per_token,
                         flops_total=tf.model_per_token * total_tokens if total_tokens is not None else None)
    return SpeedResult(compute=compute, time=time, notes=notes)


def _stack_assumptions(work: StepWork, st: StepTime, gpu: Gpu, sm: SpeedModel) -> list[str]:
    """What the stack features and offload add to the step, in words."""
    w, lay, prm = work.w, work.lay, sm.params
    out = []
    if w.stack == "eager" and w.compile:
        out.append(f"torch.compile: the eager stack's x{prm.eager_step_factor:g} becomes "
                   f"x{_stack_factor(w, prm):.2f} (compiled {prm.compile_speedup:g}x faster, torchtune)")
    if work.logit_bytes:
        out.append(f"chunked cross-entropy: {prm.logits_fp32_passes:g} passes over the fp32 logits saved")
    if work.fill != 1.0:
        out.append(f"unpacked batches padded to their longest sample: {work.fill:.0%} of the computed tokens are "
                   "real; throughput and steps count real tokens (set packing: true for full sequences)")
    link = host_link_gbs(gpu, sm)
    if work.act_offload_bytes:
        out.append(f"activation offloading: {work.act_offload_bytes / 1e9:,.2f} GB per micro-batch to the host and back "
                   f"over PCIe {gpu.interconnect.pcie_gen}.0 x{gpu.interconnect.pcie_lanes} ({link:g} GB/s), "
                   f"{prm.offload_overlap:.0%} hidden behind the compute where it fits")
    if lay.offload != "none":
        out.append(f"offload={lay.offload}: gradients to the host and 16-bit weights back over PCIe ({link:g} GB/s"
                   + (", weights fetched for every forward and backward" if lay.offload == "params" else "")
                   + f"), {st.t_offload:.2f} s exposed; CPU Adam on the host's CPUs "
                   f"({prm.cpu_adam_params_per_s / 1e9:g}e9 parameters/s per host): {st.t_cpu_opt:.2f} s per step")
    return out


__all__ = [
    "StepTime",
    "StepWork",
    "estimate_inference_speed",
    "estimate_training_speed",
    "host_link_gbs",
    "link_gbs",
    "matmul_efficiency",
    "peak_flops",
    "precision_class",
    "step_time",
    "tokens_per_sample",
    "training_speed_result",
]
