"""One training step's arithmetic: what a step asks of each GPU whatever the GPU (`StepWork`, once per layout) and
its time on one GPU type (`step_time`, plain arithmetic, no result objects); core/sizing/speed.py builds the
results and describes the model. Pure."""

from __future__ import annotations

import math

from gpuplan.core.sizing.flops import forward_flops, training_flops
from gpuplan.core.sizing.memory import resolve, saved_bytes_per_sample
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.rates import (
    GB,
    WorkloadTerms,
    allreduce_s,
    base_efficiency,
    exposed,
    node_gpus,
    host_link_gbs,
    link_gbs,
    peak_flops,
    workload_terms,
)
from gpuplan.schema.estimate import ActivationTable
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.speed import SpeedModel, SpeedParams


class StepWork:
    """What one training step asks of each GPU, whatever the GPU: FLOPs, bytes saved for backward, kernels,
    optimizer and communication volumes for one workload on one layout. Computed once per layout and timed
    on every GPU type by `step_time` (the search times the same layouts on many GPUs)."""

    __slots__ = (
        "act_offload_bytes",
        "af",
        "attn_share",
        "ckpt",
        "dequant_bytes",
        "dp",
        "dp_phases",
        "elem_bytes",
        "factor",
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
        "launch_s",
        "micro",
        "mm_attn",
        "mm_dense",
        "mm_tokens",
        "model_per_token",
        "offloaded",
        "opt_bytes",
        "opt_factor",
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
        "tp_bytes",
        "tp_calls",
        "trainable",
        "tuned",
        "w",
    )

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, sm: SpeedModel,
                 table: ActivationTable, trainable: int, cache: dict[object, object] | None = None) -> None:
        """`cache`: a dict shared by the works of one model and workload (the search's; workloads that differ in
        micro-batch, global batch or recomputation alone may share it), which keeps what depends on neither the
        layout nor the batch (the forward FLOPs of a sample, the bytes it saves, the kernel counts)."""
        c = {} if cache is None else cache
        rkey = ("resolved", w.micro_batch_size, w.batch_size)  # all a cache's workloads share but the batches
        r = c.get(rkey)
        if r is None:
            r = c[rkey] = resolve(arch, w)
        self.r = r  # type: ignore[assignment]
        k: WorkloadTerms | None = c.get("terms")  # type: ignore[assignment]  # what no layout or batch changes
        if k is None:
            k = c["terms"] = workload_terms(arch, p, w, sm)
        self.w, self.lay, self.gpus = w, lay, gpus
        tp, pp = self.tp, self.pp = lay.tp, lay.pp
        dp = self.dp = max(gpus // (tp * pp), 1)
        ckpt = self.ckpt = w.gradient_checkpointing
        if "fwd" not in c:
            c["fwd"] = forward_flops(arch, p, r.seq, target=r.target, eager=k.eager, image_size=r.seq)
        fwd = self.fwd = c["fwd"]  # type: ignore[assignment]
        if ("tf", ckpt) not in c:
            c[("tf", ckpt)] = training_flops(fwd, frozen_base=k.frozen, checkpointing=ckpt)
        tf = self.tf = c[("tf", ckpt)]  # type: ignore[assignment]
        tok_sample = self.tok_sample = fwd.tokens
        micro = self.micro = max((w.global_batch_size or r.batch * dp) // (r.batch * dp), 1)
        global_samples = r.batch * dp * micro
        self.step_tokens = global_samples * tok_sample
        mb_tokens = self.mb_tokens = r.batch * tok_sample
        # a CNN's convolutions run over its feature maps: count 14 x 14 positions per image as its "tokens"
        self.mm_tokens = mb_tokens if not k.cnn else r.batch * 196
        self.attn_share = fwd.attention_forward / fwd.forward if fwd.forward else 0.0
        self.hw_flops = tf.hardware_per_token * mb_tokens / (tp * pp)
        if ("saved", tp) not in c:
            c[("saved", tp)] = saved_bytes_per_sample(arch, w, table, tp)
        saved = self.saved = c[("saved", tp)] * r.batch / pp  # type: ignore[operator]
        self.fp8 = k.fp8
        layers = self.layers = k.layers / pp
        self.kernels = layers * k.kernels_per_layer + k.lora_linears / pp * k.kernels_per_lora
        self.dequant_bytes = 0.0
        dequant = k.dequant
        if dequant is not None:  # QLoRA: (the base's linear weights, bytes read per parameter dequantised)
            passes = 3 if ckpt else 2
            self.dequant_bytes = passes * dequant[0] / (tp * pp) * dequant[1]
        shard = tp * pp * (dp if lay.zero >= 1 else 1)
        opt_bytes = k.opt_per_param * k.master_bytes / 4 * trainable / shard
        if k.unfused is not None:
            opt_bytes *= k.unfused
        self.opt_bytes, self.opt_launches = opt_bytes, k.opt_launches
        self.trainable, self.total_params, self.hidden = trainable, p.total, arch.hidden_size
        # the stack features' work: fp32-logit bytes a chunked loss saves, activation bytes offloaded per
        # micro-batch, the real share of padded tokens, optimizer steps per step
        self.logit_bytes = (k.logit_passes * mb_tokens * arch.vocab_size / tp * 4 / pp if k.lm_chunked else 0.0)
        self.act_offload_bytes = 0.0
        if k.offload_acts:  # with recomputation only each layer's input is saved (and offloaded)
            ckpt_saved = layers * mb_tokens * arch.hidden_size * 2 / tp
            self.act_offload_bytes = ckpt_saved if ckpt else saved
        # unpacked batches of several samples are padded to their longest: only part of the computed tokens are real
        self.fill = k.fill if k.unpacked and r.batch > 1 else 1.0
        self.step_tokens *= self.fill
        # the optimizer step in backward cannot accumulate gradients: it steps on every micro-batch
        self.opt_steps = micro if k.in_backward else 1
        _gpu_free(self, sm, k)


def _gpu_free(work: StepWork, sm: SpeedModel, k: WorkloadTerms) -> None:
    """The parts of `step_time`'s arithmetic no GPU figure enters, computed once (in step_time's order, so that
    the times are the same to the last bit): the matmul FLOPs outside and inside attention, the elementwise bytes,
    the launch time, the stack's factor and the optimizer step's, the data- and tensor-parallel traffic."""
    ckpt, hw_flops, attn_share = work.ckpt, work.hw_flops, work.attn_share
    work.af = k.af
    work.mm_dense = hw_flops * (1 - attn_share)
    work.mm_attn = hw_flops * attn_share
    work.elem_bytes = k.elem_passes * work.saved * (4 / 3 if ckpt else 1.0)
    work.launch_s = work.kernels * k.launch * (4 / 3 if ckpt else 1.0)
    work.factor = k.factor
    work.opt_factor = k.eager_step * work.opt_steps
    work.dp_phases = _dp_phases(work, sm.params) if work.dp > 1 else (0.0, 0.0, ())
    work.offloaded = work.lay.offload != "none"
    # tensor parallel: the bytes of one all-reduce, and how many per step (two per layer in forward, two in
    # backward, and two more to recompute)
    work.tp_bytes = work.r.batch * work.tok_sample * work.hidden * 2
    work.tp_calls = work.micro * work.layers * (6 if ckpt else 4)
    work.tuned = k.tuned  # tuned stacks pipeline the all-reduces with the GEMMs around them
    work.model_per_token = work.tf.model_per_token


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
    out = (exposed(grad_b * shard / link, t_micro * 2 / 3, ov) + 2 * shard / link) * work.opt_steps
    ranks_on_host = min(work.gpus, node)
    cpu_step = shard * ranks_on_host / prm.cpu_adam_params_per_s * work.opt_steps
    if lay.offload == "params":
        fetch = 2 * 2 * work.total_params / (work.tp * work.pp * work.dp) / link
        out += work.micro * exposed(fetch, t_micro, ov)
    return out, cpu_step


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


class GpuRates:
    """What `step_time` reads of one GPU type for one precision, computed once (the search times many layouts on
    each GPU): the generation's efficiencies, the dense peak, the memory bandwidth it reaches, the link bandwidths
    by collective group (memoised)."""

    __slots__ = ("base_eff", "bw", "comm_keep", "gen", "goodput_hours", "goodput_long", "gpu", "half_tokens", "latency",
                 "links", "node", "peak", "sm", "tp_keep")

    def __init__(self, gpu: Gpu, sm: SpeedModel, precision: str, tf32: bool) -> None:
        self.gpu, self.sm = gpu, sm
        self.gen = sm.generations[gpu.generation]
        self.peak = peak_flops(gpu, precision, tf32)
        self.bw = gpu.memory_bandwidth_gbs * GB * self.gen.bandwidth
        self.node = node_gpus(gpu)
        self.links: dict[tuple[int, int], float] = {}
        #: matmul_efficiency's terms: the generation's efficiency at this precision, the half-efficiency tokens
        self.base_eff = base_efficiency(self.gen, precision)
        prm = sm.params
        self.half_tokens = prm.matmul_half_tokens
        #: the speed model's constants step_time reads on every layout: the share of overlapped communication left
        #: exposed (data parallel; tensor parallel on a tuned stack), a collective's hop latency, the goodput of
        #: long runs and the hours from which it applies
        self.comm_keep, self.tp_keep = 1 - prm.comm_overlap, 1 - prm.tp_comm_overlap
        self.latency = prm.collective_latency_s
        self.goodput_hours, self.goodput_long = prm.goodput_threshold_hours, prm.goodput_long_run

    def link(self, group: int, node: int) -> float:
        """link_gbs(gpu, sm, group, node)."""
        hit = self.links.get((group, node))
        if hit is None:
            hit = self.links[(group, node)] = link_gbs(self.gpu, self.sm, group, node)
        return hit


def step_time(work: StepWork, gpu: Gpu, sm: SpeedModel, *, total_tokens: float | None = None,
              gpus_per_node: int | None = None, virtual_stages: int = 1, rates: GpuRates | None = None) -> StepTime:
    """Time `work` on `gpu`: plain arithmetic, no result objects (estimate_training_speed builds those). `rates`:
    the GPU's, when the caller keeps them (for `work.w`'s precision)."""
    r = rates if rates is not None else GpuRates(gpu, sm, work.w.precision, work.w.tf32)
    return timed(work, r, total_tokens, gpus_per_node or min(work.gpus, r.node), virtual_stages)


def timed(work: StepWork, r: GpuRates, total_tokens: float | None, node: int, virtual_stages: int = 1) -> StepTime:
    """`step_time` of `work` on `r`'s GPU in nodes of `node` GPUs, its arguments by position (the search times
    every layout it keeps through this)."""
    gpu, sm = r.gpu, r.sm
    pp, micro = work.pp, work.micro
    out = StepTime()

    # --- one micro-batch on one GPU --------------------------------------------------------------------
    peak = out.peak = r.peak
    tokens = work.mm_tokens  # matmul_efficiency, with the GPU's terms read once
    eff = out.eff = r.base_eff * tokens / (tokens + r.half_tokens)
    pe = peak * eff
    t_matmul = work.mm_dense / pe + work.mm_attn / (pe * work.af)
    bw = r.bw
    t_elem = work.elem_bytes / bw
    if work.logit_bytes:  # a chunked or fused loss never writes the fp32 logits
        t_elem = max(t_elem - work.logit_bytes / bw, 0.0)
    t_launch = work.launch_s
    t_dequant = work.dequant_bytes / bw  # 0 but for QLoRA
    f = work.factor
    if f != 1.0:  # the eager stack's factor (a tuned stack's 1.0 would change no bit)
        t_matmul, t_elem, t_launch, t_dequant = t_matmul * f, t_elem * f, t_launch * f, t_dequant * f
    t_compute = t_matmul + t_elem + t_launch + t_dequant
    t_act = 0.0
    if work.act_offload_bytes:  # saved activations go to the host behind forward and come back behind backward
        t_copy = work.act_offload_bytes / (host_link_gbs(gpu, sm) * GB)
        ov = sm.params.offload_overlap
        t_act = exposed(t_copy, t_compute / 3, ov) + exposed(t_copy, t_compute * 2 / 3, ov)
    t_micro = t_compute + t_act

    # --- once per step ----------------------------------------------------------------------------------
    t_opt = 0.0
    if not work.offloaded:  # offloaded, the optimizer steps on the host (_offload_s); launches: a for-loop's
        t_opt = (work.opt_bytes / bw + work.opt_launches) * work.opt_factor
    t_dp_exposed = _dp_exposed(work, r, node, t_compute) if work.dp > 1 else 0.0
    t_tp = 0.0
    if work.tp > 1:
        tp_bw = r.link(work.tp, node)
        t_tp = work.tp_calls * allreduce_s(work.tp_bytes, work.tp, tp_bw, r.latency)
        if work.tuned:  # tuned stacks pipeline the all-reduces with the GEMMs around them
            t_tp *= r.tp_keep
    bubble = (pp - 1) * t_micro / virtual_stages  # 1F1B: the pipeline fills and drains once per step
    t_zero_off, t_cpu = _offload_s(work, gpu, sm, node, t_compute) if work.offloaded else (0.0, 0.0)

    step = micro * t_micro + t_opt + t_dp_exposed + t_tp + bubble + t_zero_off + t_cpu
    tokens_per_s = work.step_tokens / step
    out.t_matmul, out.t_elem, out.t_launch, out.t_dequant, out.t_opt = t_matmul, t_elem, t_launch, t_dequant, t_opt
    out.t_comm, out.bubble, out.step, out.tokens_per_s = t_dp_exposed + t_tp, bubble, step, tokens_per_s
    out.t_offload, out.t_cpu_opt = micro * t_act + t_zero_off, t_cpu
    out.mfu = work.model_per_token * tokens_per_s / (work.gpus * peak)
    if total_tokens is None:
        out.steps = out.wall = out.gpu_hours = None
        out.goodput = 1.0
        return out
    steps = max(math.ceil(total_tokens / work.step_tokens), 1)
    compute_hours = steps * step / 3600
    goodput = r.goodput_long if compute_hours > r.goodput_hours else 1.0
    wall = compute_hours / goodput
    out.steps, out.goodput, out.wall, out.gpu_hours = steps, goodput, wall, wall * work.gpus
    return out


def _dp_phases(work: StepWork, prm: SpeedParams) -> tuple[float, float, tuple[tuple[float, int, int], ...]]:
    """What `_dp_exposed` needs of a layout, whatever the GPU: the share of the volume each GPU sends in ring
    collectives ((n-1)/n), the hops' latency, and per phase (bytes per GPU, the compute it can hide behind: 0 the
    whole micro-batch, 1 its backward (2/3), 2 its forward (1/3), times per step)."""
    w, lay, dp, tp, pp, micro = work.w, work.lay, work.dp, work.tp, work.pp, work.micro
    grad_b = 2 if (w.precision == "bf16" or lay.zero >= 2) else 4  # FSDP/ZeRO-2+ reduce in 16 bits
    shard = work.trainable / (tp * pp)
    phases: tuple[tuple[float, int, int], ...]
    if lay.zero == 0:  # DDP: all-reduce the gradients during the last micro-batch's backward
        phases = ((2 * grad_b * shard, 1, 1),)
    elif lay.zero == 1:  # reduce-scatter the gradients behind the last backward, all-gather the updated
        # 16-bit weights behind the next forward
        phases = (((grad_b + 2) * shard, 0, 1),)
    elif lay.zero == 2:  # sharded gradients cannot accumulate unsharded: reduce-scatter every micro-batch
        phases = ((grad_b * shard, 1, micro), (2 * shard, 2, 1))
    else:  # ZeRO-3/FSDP: gather 16-bit weights for forward and again for backward, reduce-scatter the
        # gradients, every micro-batch, behind that micro-batch's compute
        phases = ((4 * work.total_params / (tp * pp) + grad_b * shard, 0, micro),)
    return (dp - 1) / dp, 2 * math.ceil(math.log2(dp)) * prm.collective_latency_s, phases


def _dp_exposed(work: StepWork, rates: GpuRates, node: int, t_micro: float) -> float:
    """Data-parallel communication left exposed per step: what each GPU sends ((n-1)/n of the volume in ring
    collectives) beyond what hides behind the compute it overlaps with."""
    dp = work.dp
    if dp <= 1:
        return 0.0
    keep = rates.comm_keep
    group = work.gpus if work.gpus > node else dp
    dp_bw = rates.links.get((group, node)) or rates.link(group, node)  # the memo read inline: once per layout
    dp_bw *= GB
    frac, hops, phases = work.dp_phases
    total = 0.0
    for volume, window, times in phases:
        t = frac * volume / dp_bw + hops
        # what does not fit in the window is exposed, and overlapping never hides all of it (contention):
        # rates.exposed, written out
        win = t_micro if window == 0 else (t_micro * 2 / 3 if window == 1 else t_micro / 3)
        late = t - win
        total += times * ((0.0 if late < 0.0 else late) + keep * (win if win < t else t))  # noqa: FURB136 (calls)
    return total


__all__ = ["GpuRates", "StepTime", "StepWork", "step_time", "timed"]
