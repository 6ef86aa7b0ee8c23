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
- expert parallelism (a MoE's experts over `ep` ranks): the tokens' all-to-all dispatch and combine, exposed;
- pipeline bubble: (pp - 1) / micro-batches of the compute;
- offload: PCIe copies to the host, hidden behind compute up to offload_overlap, and ZeRO-Offload's CPU Adam step.
Stack features: a chunked loss saves fp32-logit passes; compile divides the eager stack's factor; the optimizer step
in backward steps every micro-batch; unpacked batches (packing: false) of several samples are part padding.
Wall time adds goodput (restarts, evaluation, checkpoints) for runs longer than a day.

Decoding (per step): max(bytes read / bandwidth, FLOPs / compute) + launches + tensor-parallel all-reduce
latency; prefill is compute-bound like a training forward.
"""

from __future__ import annotations

from gpuplan.core.sizing.grpo import timed_step
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.rates import (
    base_efficiency,
    calibration_notes,
    host_link_gbs,
    link_gbs,
    matmul_efficiency,
    peak_flops,
    precision_class,
    span,
    stack_factor,
    tokens_per_sample,
)
from gpuplan.core.sizing.serving import estimate_inference_speed
from gpuplan.core.sizing.step import StepWork
from gpuplan.core.sizing.step_time import GpuRates, StepTime, step_time
from gpuplan.schema.estimate import ActivationTable, Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import ServingData
from gpuplan.schema.speed import ComputeOut, SpeedModel, SpeedResult, TimeEstimate


def estimate_training_speed(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, gpu: Gpu,
                            sm: SpeedModel, table: ActivationTable, *, trainable: int,
                            total_tokens: float | None = None, gpus_per_node: int | None = None,
                            virtual_stages: int = 1, serving: ServingData | None = None,
                            expert_parallel: int = 1) -> SpeedResult:
    """Training step time and throughput of `gpus` x `gpu`; GPU-hours when `total_tokens` is known (tokens;
    images for CNNs). `virtual_stages` > 1: an interleaved pipeline schedule (Megatron), which divides the
    bubble. `serving`: the serving engine's data, which a GRPO policy's view (core/sizing/grpo.py) times its
    rollout with. `expert_parallel` > 1: a MoE's routed experts spread over that many data-parallel ranks, their
    tokens sent all-to-all (core/sizing/experts.py)."""
    work = StepWork(arch, p, w, lay, gpus, sm, table, trainable, expert_parallel=expert_parallel)
    rates = GpuRates(gpu, sm, w.precision, w.tf32)
    node = gpus_per_node or min(gpus, rates.node)
    st = step_time(work, gpu, sm, total_tokens=total_tokens, gpus_per_node=node, virtual_stages=virtual_stages,
                   rates=rates)
    st = timed_step(st, work, rates, arch, p, sm, serving, node, total_tokens)
    return training_speed_result(work, st, gpu, sm, total_tokens)


def training_speed_result(work: StepWork, st: StepTime, gpu: Gpu, sm: SpeedModel,
                          total_tokens: float | None) -> SpeedResult:
    """The SpeedResult of a timed step: figures with their ranges, the step's breakdown, assumptions and notes."""
    prm, w, gen = sm.params, work.workload, sm.generations[gpu.generation]
    notes: list[Note] = []
    if w.precision.startswith("bf16") and not gpu.tflops.bf16:
        notes.append(Note(code="no-bf16", severity="warning",
                          message=f"{gpu.name} has no bf16 tensor cores; timed as fp16 (bf16 runs far slower)"))
    assumptions = [
        f"matmul efficiency {st.eff:.0%} of the {st.peak / 1e12:,.0f} TFLOPS {precision_class(w.precision)} dense "
        f"peak ({gen.id}: {base_efficiency(gen, w.precision):.0%}"
        f" for large micro-batches, {gen.basis}; x the micro-batch penalty)",
        f"{work.micro} micro-batch(es) of {work.batch} x {work.tok_sample} tokens per GPU per step; {work.dp}-way "
        "data parallel",
        f"plain eager PyTorch + transformers: x{prm.eager_step_factor:g} the tuned step (measured on an H200)"
        if w.stack == "eager" else
        f"a tuned training stack (Megatron-Core, NeMo, torchtitan, fused kernels; the HF Trainer's eager stack is "
        f"measured x{prm.eager_step_factor:g} slower on an H200)",
    ]
    if st.goodput != 1.0:
        assumptions.append(f"goodput {st.goodput:.0%}: restarts, evaluation and checkpoints on a run longer than "
                           f"{prm.goodput_threshold_hours:g} h")
    assumptions += _stack_assumptions(work, st, gpu, sm)
    notes += calibration_notes(gen)
    if w.optimizer_in_backward and work.micro > 1:
        notes.append(Note(code="optimizer-in-backward-accumulation", severity="warning",
                          message=f"optimizer_in_backward cannot accumulate gradients over the {work.micro} "
                                  "micro-batches of a step (torchtune refuses it): timed as an optimizer step per "
                                  "micro-batch"))
    micro, tps, wall, gpu_hours = work.micro, st.tokens_per_s, st.wall, st.gpu_hours
    breakdown = {"matmul": micro * st.t_matmul, "elementwise": micro * st.t_elem, "overhead": micro * st.t_launch,
                 "qlora_dequant": micro * st.t_dequant, "optimizer": st.t_opt, "communication": st.t_comm,
                 "bubble": st.bubble}
    if st.t_offload or st.t_cpu_opt:  # only when something is offloaded: plain runs keep their keys
        breakdown.update(offload=st.t_offload, cpu_optimizer=st.t_cpu_opt)
    if st.t_prefill or st.t_decode or st.t_log_probs:  # GRPO: the rollout and the log-probability forwards
        breakdown.update(rollout_prefill=st.t_prefill, rollout_decode=st.t_decode, log_probs=st.t_log_probs)
    if st.t_sync:  # GRPO with separate pools: the weights broadcast to the engine's GPUs
        breakdown.update(weight_sync=st.t_sync)
    time = TimeEstimate(
        tokens_per_s=tps, tokens_per_s_range=span(tps, sm, speed=True),
        tokens_per_s_per_gpu=tps / work.gpus, step_seconds=st.step, step_seconds_range=span(st.step, sm),
        steps=st.steps, tokens=total_tokens, wall_hours=wall, wall_hours_range=None if wall is None else span(wall, sm),
        gpu_hours=gpu_hours, gpu_hours_range=None if gpu_hours is None else span(gpu_hours, sm),
        goodput=st.goodput, mfu=st.mfu, efficiency=st.eff, step_breakdown_s=breakdown, assumptions=assumptions,
    )
    tf = work.flops
    compute = ComputeOut(flops_per_token=tf.model_per_token, hardware_flops_per_token=tf.hardware_per_token,
                         flops_total=tf.model_per_token * total_tokens if total_tokens is not None else None)
    return SpeedResult(compute=compute, time=time, notes=notes)


def _stack_assumptions(work: StepWork, st: StepTime, gpu: Gpu, sm: SpeedModel) -> list[str]:
    """What the stack features and offload add to the step, in words."""
    w, lay, prm = work.workload, work.layout, sm.params
    out = []
    if w.stack == "eager" and w.compile:
        out.append(f"torch.compile: the eager stack's x{prm.eager_step_factor:g} becomes "
                   f"x{stack_factor(w, prm):.2f} (compiled {prm.compile_speedup:g}x faster, torchtune)")
    if work.logit_bytes:
        out.append(f"chunked cross-entropy: {prm.logits_fp32_passes:g} passes over the fp32 logits saved")
    if work.fill != 1.0:
        out.append(f"unpacked batches padded to their longest sample: {work.fill:.0%} of the computed tokens are "
                   "real; throughput and steps count real tokens (set packing: true for full sequences)")
    link = host_link_gbs(gpu, sm)
    if work.act_offload_bytes:
        out.append(f"activation offloading: {work.act_offload_bytes / 1e9:,.2f} GB per micro-batch to the host and "
                   f"back over PCIe {gpu.interconnect.pcie_gen}.0 x{gpu.interconnect.pcie_lanes} ({link:g} GB/s), "
                   f"{prm.offload_overlap:.0%} hidden behind the compute where it fits")
    if work.a2a_calls:
        out.append(f"expert parallel {work.ep}: each GPU holds 1/{work.ep} of the routed experts; "
                   f"{work.a2a_calls} all-to-alls per micro-batch move {work.a2a_bytes / 1e9:,.2f} GB (tokens x "
                   "top-k x hidden, bf16), timed exposed")
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
