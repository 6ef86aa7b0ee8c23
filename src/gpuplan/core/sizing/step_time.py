"""A training step's time on one GPU type: what the speed model reads of the GPU, once (`GpuRates`), and the step of
a `StepWork` on it (`timed`: plain arithmetic, no result objects; core/sizing/speed.py builds the results). Pure."""

from __future__ import annotations

import math
from typing import NamedTuple

from gpuplan.core.sizing.rates import (
    GB,
    allreduce_s,
    base_efficiency,
    efficiency_at,
    exposed,
    host_link_gbs,
    link_gbs,
    node_gpus,
    peak_flops,
)
from gpuplan.core.sizing.step import StepWork
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.speed import SpeedModel


class StepTime(NamedTuple):
    """A training step of a `StepWork` on one GPU type: its parts (s), throughput and, given the run's tokens, the
    wall time and GPU-hours."""

    peak: float  # dense FLOP/s at the precision
    eff: float  # the matmuls' share of it
    t_matmul: float  # per micro-batch
    t_elem: float
    t_launch: float
    t_dequant: float
    t_opt: float  # per step
    t_comm: float
    bubble: float
    t_offload: float
    t_cpu_opt: float
    step: float
    tokens_per_s: float
    mfu: float
    goodput: float
    steps: int | None  # None: no token count
    wall: float | None  # hours
    gpu_hours: float | None


class GpuRates:
    """What `timed` reads of one GPU type for one precision, computed once (the search times many layouts on each
    GPU): the generation's efficiencies, the dense peak, the memory and host-link bandwidths, the speed model's
    constants, the link bandwidths by collective group in nodes of each size (memoised)."""

    __slots__ = ("base_eff", "bw", "comm_overlap", "gen", "goodput_hours", "goodput_long", "gpu", "half_tokens",
                 "host_bw", "latency", "links", "node", "offload_overlap", "peak", "sm", "tp_keep")

    def __init__(self, gpu: Gpu, sm: SpeedModel, precision: str, tf32: bool) -> None:
        self.gpu, self.sm = gpu, sm
        self.gen = sm.generations[gpu.generation]
        self.peak = peak_flops(gpu, precision, tf32)
        self.bw = gpu.memory_bandwidth_gbs * GB * self.gen.bandwidth
        self.host_bw = host_link_gbs(gpu, sm) * GB
        self.node = node_gpus(gpu)
        #: link_gbs by GPUs per node, then by collective group
        self.links: dict[int, dict[int, float]] = {}
        #: matmul_efficiency's terms: the generation's efficiency at this precision, the half-efficiency tokens
        self.base_eff = base_efficiency(self.gen, precision)
        prm = sm.params
        self.half_tokens = prm.matmul_half_tokens
        #: the share of data-parallel communication that overlaps compute, the share of tensor-parallel communication
        #: left exposed on a tuned stack, a collective's hop latency, the share of offload copies hidden, the goodput
        #: of long runs and the hours from which it applies
        self.comm_overlap, self.tp_keep = prm.comm_overlap, 1 - prm.tp_comm_overlap
        self.latency = prm.collective_latency_s
        self.offload_overlap = prm.offload_overlap
        self.goodput_hours, self.goodput_long = prm.goodput_threshold_hours, prm.goodput_long_run

    def links_at(self, node: int) -> dict[int, float]:
        """The link bandwidths memoised for nodes of `node` GPUs, by collective group (`link` fills them)."""
        by_group = self.links.get(node)
        if by_group is None:
            by_group = self.links[node] = {}
        return by_group

    def link(self, group: int, node: int) -> float:
        """link_gbs(gpu, sm, group, node), memoised."""
        by_group = self.links_at(node)
        hit = by_group.get(group)
        if hit is None:
            hit = by_group[group] = link_gbs(self.gpu, self.sm, group, node)
        return hit


def step_time(work: StepWork, gpu: Gpu, sm: SpeedModel, *, total_tokens: float | None = None,
              gpus_per_node: int | None = None, virtual_stages: int = 1, rates: GpuRates | None = None) -> StepTime:
    """Time `work` on `gpu`. `rates`: the GPU's, when the caller keeps them (for `work.workload`'s precision)."""
    r = rates if rates is not None else GpuRates(gpu, sm, work.workload.precision, work.workload.tf32)
    return timed(work, r, total_tokens, gpus_per_node or min(work.gpus, r.node), virtual_stages)


def timed(work: StepWork, r: GpuRates, total_tokens: float | None, node: int, virtual_stages: int = 1) -> StepTime:
    """`step_time` of `work` on `r`'s GPU in nodes of `node` GPUs, its arguments by position (the search times every
    layout it keeps through this)."""
    # --- one micro-batch on one GPU --------------------------------------------------------------------
    peak = r.peak
    eff = efficiency_at(r.base_eff, work.mm_tokens, r.half_tokens)
    pe = peak * eff
    t_matmul = work.mm_dense / pe + work.mm_attn / (pe * work.attention_factor)
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
        t_copy, ov = work.act_offload_bytes / r.host_bw, r.offload_overlap
        t_act = exposed(t_copy, t_compute / 3, ov) + exposed(t_copy, t_compute * 2 / 3, ov)
    t_micro = t_compute + t_act

    # --- once per step ----------------------------------------------------------------------------------
    t_opt = 0.0
    if not work.offloaded:  # offloaded, the optimizer steps on the host (_offload_s); launches: a for-loop's
        t_opt = (work.opt_bytes / bw + work.opt_launches) * work.opt_factor
    t_dp_exposed = dp_exposed(work, r, node, t_compute) if work.dp > 1 else 0.0
    t_tp = 0.0
    if work.tp > 1:
        tp_bw = r.links_at(node).get(work.tp) or r.link(work.tp, node)  # the memo read inline: once per layout
        t_tp = work.tp_calls * allreduce_s(work.tp_bytes, work.tp, tp_bw, r.latency)
        if work.tuned:  # tuned stacks pipeline the all-reduces with the GEMMs around them
            t_tp *= r.tp_keep
    bubble = (work.pp - 1) * t_micro / virtual_stages  # 1F1B: the pipeline fills and drains once per step
    t_zero_off, t_cpu = _offload_s(work, r, node, t_compute) if work.offloaded else (0.0, 0.0)
    micro = work.micro
    step = micro * t_micro + t_opt + t_dp_exposed + t_tp + bubble + t_zero_off + t_cpu
    tokens_per_s = work.step_tokens / step
    mfu = work.model_per_token * tokens_per_s / (work.gpus * peak)
    steps = wall = gpu_hours = None
    goodput = 1.0
    if total_tokens is not None:
        steps = max(math.ceil(total_tokens / work.step_tokens), 1)
        compute_hours = steps * step / 3600
        goodput = r.goodput_long if compute_hours > r.goodput_hours else 1.0
        wall = compute_hours / goodput
        gpu_hours = wall * work.gpus
    return StepTime(peak, eff, t_matmul, t_elem, t_launch, t_dequant, t_opt, t_dp_exposed + t_tp, bubble,
                    micro * t_act + t_zero_off, t_cpu, step, tokens_per_s, mfu, goodput, steps, wall, gpu_hours)


def _offload_s(work: StepWork, r: GpuRates, node: int, t_micro: float) -> tuple[float, float]:
    """ZeRO-Offload per step: (PCIe copies left exposed, the CPU optimizer step). Gradient shards go to the host
    behind the last backward, CPU Adam updates every shard of the host's GPUs, 16-bit weights come back; `params`
    adds each micro-batch's fetch of the weight shard, for forward and for backward, behind that compute."""
    lay, prm = work.layout, r.sm.params
    link = r.host_bw
    shard = work.trainable / (work.tp * work.pp * (work.dp if lay.zero >= 1 else 1))
    grad_b = 2 if (work.workload.precision == "bf16" or lay.zero >= 2) else 4
    ov = r.offload_overlap
    out = (exposed(grad_b * shard / link, t_micro * 2 / 3, ov) + 2 * shard / link) * work.opt_steps
    ranks_on_host = min(work.gpus, node)
    cpu_step = shard * ranks_on_host / prm.cpu_adam_params_per_s * work.opt_steps
    if lay.offload == "params":
        fetch = 2 * 2 * work.total_params / (work.tp * work.pp * work.dp) / link
        out += work.micro * exposed(fetch, t_micro, ov)
    return out, cpu_step


def dp_exposed(work: StepWork, r: GpuRates, node: int, t_micro: float) -> float:
    """Data-parallel communication left exposed per step: what each GPU sends ((n-1)/n of the volume in ring
    collectives) beyond what hides behind the compute it overlaps with (rates.exposed, phase by phase)."""
    dp = work.dp
    if dp <= 1:
        return 0.0
    group = work.gpus if work.gpus > node else dp
    dp_bw = (r.links_at(node).get(group) or r.link(group, node)) * GB  # the memo read inline: once per layout
    share, hops, phases = work.dp_traffic
    windows = (t_micro, t_micro * 2 / 3, t_micro / 3)
    total = 0.0
    for volume, window, times in phases:
        total += times * exposed(share * volume / dp_bw + hops, windows[window], r.comm_overlap)
    return total


__all__ = ["GpuRates", "StepTime", "dp_exposed", "step_time", "timed"]
