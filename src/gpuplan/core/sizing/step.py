"""One training step's work: what a step asks of each GPU whatever the GPU (`StepWork`, once per layout and
micro-batch), from which core/sizing/step_time.py times it on each GPU type; core/sizing/speed.py builds the results
and describes the model. Pure."""

from __future__ import annotations

import math

from gpuplan.core.sizing.activations import resolve, saved_bytes_per_sample
from gpuplan.core.sizing.experts import expert_split
from gpuplan.core.sizing.flops import Flops, TrainingFlops, forward_flops, training_flops
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.rates import WorkloadTerms, workload_terms
from gpuplan.schema.estimate import ActivationTable
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.speed import SpeedModel, SpeedParams


class SampleWork:
    """What a step's work is made of for one sample, whatever the layout, micro-batch and recomputation."""

    __slots__ = ("forward", "seq", "terms")

    def __init__(self, terms: WorkloadTerms, seq: int, forward: Flops) -> None:
        self.terms = terms
        self.seq = seq
        self.forward = forward


class WorkCache:
    """What the works of one model and workload share (workloads that differ in micro-batch, global batch or
    recomputation alone may share it): what no layout or batch changes, the training FLOPs with and without
    recomputation, the bytes a sample saves for backward by tensor-parallel degree."""

    __slots__ = ("sample", "saved", "training")

    def __init__(self) -> None:
        self.sample: SampleWork | None = None
        self.training: dict[bool, TrainingFlops] = {}
        self.saved: dict[int, float] = {}

    def sample_work(self, arch: ModelArch, p: ParamCount, w: Workload, sm: SpeedModel) -> SampleWork:
        if self.sample is None:
            terms = workload_terms(arch, p, w, sm)
            r = resolve(arch, w)
            fwd = forward_flops(arch, p, r.seq, target=r.target, eager=terms.eager, image_size=r.seq)
            self.sample = SampleWork(terms, r.seq, fwd)
        return self.sample

    def training_flops(self, ckpt: bool) -> TrainingFlops:
        hit = self.training.get(ckpt)
        if hit is None:
            assert self.sample is not None, "sample_work first"
            hit = self.training[ckpt] = training_flops(self.sample.forward, frozen_base=self.sample.terms.frozen,
                                                       checkpointing=ckpt,
                                                       reference_forward=self.sample.terms.reference)
        return hit

    def saved_per_sample(self, arch: ModelArch, w: Workload, table: ActivationTable, tp: int) -> float:
        hit = self.saved.get(tp)
        if hit is None:
            hit = self.saved[tp] = saved_bytes_per_sample(arch, w, table, tp)
        return hit


class DpPhase:
    """One data-parallel collective of a step: the bytes each GPU sends, the compute it hides behind (0: the whole
    micro-batch, 1: its backward (2/3), 2: its forward (1/3)) and how many per step."""

    __slots__ = ("times", "volume", "window")

    def __init__(self, volume: float, window: int, times: int) -> None:
        self.volume = volume
        self.window = window
        self.times = times


class DpTraffic:
    """A layout's data-parallel traffic, whatever the GPU: the share of the volume each GPU sends in ring collectives
    ((n-1)/n), the hops' latency, the collectives."""

    __slots__ = ("hops", "phases", "share")

    def __init__(self, share: float, hops: float, phases: tuple[DpPhase, ...]) -> None:
        self.share = share
        self.hops = hops
        self.phases = phases


NO_DP_TRAFFIC = DpTraffic(0.0, 0.0, ())


class StepWork:
    """What one training step asks of each GPU, whatever the GPU: FLOPs, bytes saved for backward, kernels,
    optimizer and communication volumes for one workload on one layout and micro-batch. Computed once per layout and
    micro-batch and timed on every GPU type (step_time.timed)."""

    __slots__ = ("a2a_bytes", "a2a_calls", "act_offload_bytes", "attention_factor", "attn_share", "batch", "ckpt",
                 "dequant_bytes", "dp", "dp_traffic", "elem_bytes", "ep", "factor", "fill", "flops", "fp8", "gpus",
                 "hidden", "hw_flops", "kernels", "launch_s", "layers", "layout", "logit_bytes", "mb_tokens", "micro",
                 "mm_attn", "mm_dense", "mm_tokens", "model_per_token", "offloaded", "opt_bytes", "opt_factor",
                 "opt_launches", "opt_steps", "pp", "saved", "step_tokens", "tok_sample", "total_params", "tp",
                 "tp_bytes", "tp_calls", "trainable", "tuned", "workload")

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, sm: SpeedModel,
                 table: ActivationTable, trainable: int, cache: WorkCache | None = None, *,
                 micro_batch: int | None = None, global_batch: int | None = None, expert_parallel: int = 1) -> None:
        """`cache`: what the works of one model and workload share (the search's); `micro_batch`, `global_batch`:
        the micro-batch and the sequences per step when not `w`'s (the search's configurations change them alone,
        and `w.gradient_checkpointing`, of the search's workload); `expert_parallel`: a MoE's routed experts spread
        over that many data-parallel ranks (core/sizing/experts.py)."""
        c = WorkCache() if cache is None else cache
        sample = c.sample if c.sample is not None else c.sample_work(arch, p, w, sm)
        k, fwd = sample.terms, sample.forward
        self.workload, self.layout, self.gpus = w, lay, gpus
        batch = self.batch = w.micro_batch_size if micro_batch is None else micro_batch
        gbs = w.global_batch_size if global_batch is None else global_batch
        tp, pp = self.tp, self.pp = lay.tp, lay.pp
        dp = self.dp = max(gpus // (tp * pp), 1)
        ckpt = self.ckpt = w.gradient_checkpointing
        tf = self.flops = c.training.get(ckpt) or c.training_flops(ckpt)
        tok_sample = self.tok_sample = fwd.tokens
        micro = self.micro = max((gbs or batch * dp) // (batch * dp), 1)
        mb_tokens = self.mb_tokens = batch * tok_sample
        # a CNN's convolutions run over its feature maps: count 14 x 14 positions per image as its "tokens"
        self.mm_tokens = mb_tokens if not k.cnn else batch * 196
        self.attn_share = attn_share = fwd.attention_forward / fwd.forward if fwd.forward else 0.0
        hw_flops = self.hw_flops = tf.hardware_per_token * mb_tokens / (tp * pp)
        saved = self.saved = (c.saved.get(tp) or c.saved_per_sample(arch, w, table, tp)) * batch / pp
        self.fp8 = k.fp8
        layers = self.layers = k.layers / pp
        kernels = self.kernels = layers * k.kernels_per_layer + k.lora_linears / pp * k.kernels_per_lora
        self.dequant_bytes = 0.0
        if k.dequant is not None:  # QLoRA: (the base's linear weights, bytes read per parameter dequantised)
            passes = 3 if ckpt else 2
            self.dequant_bytes = passes * k.dequant[0] / (tp * pp) * k.dequant[1]
        opt_bytes = k.opt_per_param * k.master_bytes / 4 * trainable / (tp * pp * (dp if lay.zero >= 1 else 1))
        if k.unfused is not None:
            opt_bytes *= k.unfused
        self.ep, self.a2a_bytes, self.a2a_calls, total = expert_parallel, 0.0, 0, p.total
        if expert_parallel > 1:  # each GPU holds, steps and reduces 1/ep of a MoE's experts; tokens go all-to-all
            trainable, total, opt_bytes, self.a2a_bytes, self.a2a_calls = expert_split(
                arch, w, trainable, total, opt_bytes, expert_parallel, batch * fwd.tokens, pp, ckpt)
        self.opt_bytes, self.opt_launches = opt_bytes, k.opt_launches
        self.trainable, self.total_params, self.hidden = trainable, total, arch.hidden_size
        # the stack features' work: fp32-logit bytes a chunked loss saves, activation bytes offloaded per
        # micro-batch, the real share of padded tokens, optimizer steps per step
        self.logit_bytes = (k.logit_passes * mb_tokens * arch.vocab_size / tp * 4 / pp if k.lm_chunked else 0.0)
        self.act_offload_bytes = 0.0
        if k.offload_acts:  # with recomputation only each layer's input is saved (and offloaded)
            self.act_offload_bytes = layers * mb_tokens * arch.hidden_size * 2 / tp if ckpt else saved
        # unpacked batches of several samples are padded to their longest: only part of the computed tokens are real
        self.fill = k.fill if k.unpacked and batch > 1 else 1.0
        self.step_tokens = batch * dp * micro * tok_sample * self.fill
        # the optimizer step in backward cannot accumulate gradients: it steps on every micro-batch
        self.opt_steps = micro if k.in_backward else 1
        # what step_time reads whatever the GPU: the matmul FLOPs outside and inside attention, the elementwise
        # bytes, the launch time, the stack's factor and the optimizer step's, the data- and tensor-parallel traffic
        self.attention_factor = k.af
        self.mm_dense, self.mm_attn = hw_flops * (1 - attn_share), hw_flops * attn_share
        recompute = 4 / 3 if ckpt else 1.0
        self.elem_bytes = k.elem_passes * saved * recompute
        self.launch_s = kernels * k.launch * recompute
        self.factor, self.opt_factor = k.factor, k.eager_step * self.opt_steps
        self.dp_traffic = dp_traffic(w, lay, dp, micro, trainable, total, sm.params) if dp > 1 else NO_DP_TRAFFIC
        self.offloaded = lay.offload != "none"
        # tensor parallel: the bytes of one all-reduce, and how many per step (two per layer in forward, two in
        # backward, and two more to recompute)
        self.tp_bytes = batch * tok_sample * arch.hidden_size * 2
        self.tp_calls = micro * layers * (6 if ckpt else 4)
        self.tuned = k.tuned  # tuned stacks pipeline the all-reduces with the GEMMs around them
        self.model_per_token = tf.model_per_token


def dp_traffic(w: Workload, lay: Layout, dp: int, micro: int, trainable: int, total_params: int,
               prm: SpeedParams) -> DpTraffic:
    """The data-parallel collectives of a step on `lay` with `dp` ranks and `micro` micro-batches per step."""
    tp, pp = lay.tp, lay.pp
    grad_b = 2 if (w.precision == "bf16" or lay.zero >= 2) else 4  # FSDP/ZeRO-2+ reduce in 16 bits
    shard = trainable / (tp * pp)
    phases: tuple[DpPhase, ...]
    if lay.zero == 0:  # DDP: all-reduce the gradients during the last micro-batch's backward
        phases = (DpPhase(2 * grad_b * shard, 1, 1),)
    elif lay.zero == 1:  # reduce-scatter the gradients behind the last backward, all-gather the updated
        # 16-bit weights behind the next forward
        phases = (DpPhase((grad_b + 2) * shard, 0, 1),)
    elif lay.zero == 2:  # sharded gradients cannot accumulate unsharded: reduce-scatter every micro-batch
        phases = (DpPhase(grad_b * shard, 1, micro), DpPhase(2 * shard, 2, 1))
    else:  # ZeRO-3/FSDP: gather 16-bit weights for forward and again for backward, reduce-scatter the
        # gradients, every micro-batch, behind that micro-batch's compute
        phases = (DpPhase(4 * total_params / (tp * pp) + grad_b * shard, 0, micro),)
    return DpTraffic((dp - 1) / dp, 2 * math.ceil(math.log2(dp)) * prm.collective_latency_s, phases)


__all__ = ["NO_DP_TRAFFIC", "DpPhase", "DpTraffic", "SampleWork", "StepWork", "WorkCache", "dp_traffic"]
