"""A training step's time on one GPU type: what the speed model reads of the GPU, once (`GpuRates`), and the step of
a `StepWork` on it (`timed`: plain arithmetic, no result objects; core/sizing/speed.py builds the results). Pure."""

from __future__ import annotations

import math

from gpuplan.core.sizing.rates import (
    GB,
    allreduce_s,
    base_efficiency,
    efficiency_at,
    exposed,
    exposed_of,
    host_link_gbs,
    link_gbs,
    node_gpus,
    peak_flops,
)
from gpuplan.core.sizing.step import StepWork
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.speed import SpeedModel


class StepTime:
    """A training step of a `StepWork` on one GPU type: its parts (s), throughput and, given the run's tokens, the
    wall time and GPU-hours. Slots, filled by `timed` (no __init__ call per timing: CPython 3.11 reads and writes a
    slot faster than a NamedTuple's field or a keyword argument; a plain class, made at import faster than a
    dataclass)."""

    __slots__ = ("bubble", "eff", "goodput", "gpu_hours", "mfu", "peak", "step", "steps", "t_comm", "t_cpu_opt",
                 "t_dequant", "t_elem", "t_launch", "t_log_probs", "t_matmul", "t_offload", "t_opt", "t_prefill",
                 "t_decode", "t_sync", "tokens_per_s", "wall")

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
    #: GRPO (core/sizing/grpo.py): the rollout's prefill and decoding, the log-probability forwards; 0 otherwise
    t_prefill: float
    t_decode: float
    t_log_probs: float
    t_sync: float  # GRPO with separate pools: the weights' broadcast to the engine (core/sizing/grpo_pools.py)
    step: float
    tokens_per_s: float
    mfu: float
    goodput: float
    steps: int | None  # None: no token count
    wall: float | None  # hours
    gpu_hours: float | None

    def __eq__(self, other: object) -> bool:  # by value (and so not hashable), as a dataclass
        return isinstance(other, StepTime) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


class GpuRates:
    """What `timed` reads of one GPU type for one precision, computed once (the search times many layouts on each
    GPU): the generation's efficiencies, the dense peak, the memory and host-link bandwidths, the speed model's
    constants, the link bandwidths by collective group in nodes of each size (memoised)."""

    __slots__ = ("base_eff", "bw", "comm_overlap", "effs", "gen", "goodput_hours", "goodput_long", "gpu", "half_tokens",
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
        #: matmul efficiency by the micro-batch's tokens per GPU (rates.efficiency_at, memoised: a search's layouts
        #: have a few token counts)
        self.effs: dict[int, float] = {}
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

    def link(self, group: int, node: int) -> float:
        """link_gbs(gpu, sm, group, node), memoised (`timed` reads the memo first)."""
        by_group = self.links.get(node)
        if by_group is None:
            by_group = self.links[node] = {}
        hit = by_group.get(group)
        if hit is None:
            hit = by_group[group] = link_gbs(self.gpu, self.sm, group, node)
        return hit

    def efficiency(self, tokens: int) -> float:
        """matmul_efficiency at `tokens` tokens per GPU, memoised (`timed` reads the memo first)."""
        hit = self.effs.get(tokens)
        if hit is None:
            hit = self.effs[tokens] = efficiency_at(self.base_eff, tokens, self.half_tokens)
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
    eff = r.effs.get(work.mm_tokens) or r.efficiency(work.mm_tokens)  # the memo read inline
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
    links = r.links.get(node)  # link_gbs memoised, read inline
    t_dp_exposed = dp_exposed(work, r, node, t_compute, links) if work.dp > 1 else 0.0
    t_tp = 0.0
    if work.tp > 1:
        tp_bw = (links.get(work.tp) if links is not None else None) or r.link(work.tp, node)
        t_tp = work.tp_calls * allreduce_s(work.tp_bytes, work.tp, tp_bw, r.latency)
        if work.tuned:  # tuned stacks pipeline the all-reduces with the GEMMs around them
            t_tp *= r.tp_keep
    t_a2a = work.micro * a2a_s(work, r, node) if work.a2a_calls else 0.0  # expert parallel (core/sizing/experts.py)
    bubble = (work.pp - 1) * t_micro / virtual_stages  # 1F1B: the pipeline fills and drains once per step
    t_zero_off, t_cpu = _offload_s(work, r, node, t_compute) if work.offloaded else (0.0, 0.0)
    micro = work.micro
    step = micro * t_micro + t_opt + t_dp_exposed + t_tp + t_a2a + bubble + t_zero_off + t_cpu
    out = StepTime()
    out.peak, out.eff, out.t_matmul, out.t_elem, out.t_launch, out.t_dequant = peak, eff, t_matmul, t_elem, t_launch, \
        t_dequant
    out.t_opt, out.t_comm, out.bubble, out.t_offload, out.t_cpu_opt = t_opt, t_dp_exposed + t_tp + t_a2a, bubble, \
        micro * t_act + t_zero_off, t_cpu
    out.t_prefill = out.t_decode = out.t_log_probs = out.t_sync = 0.0
    out.step = step
    return finish_step(out, work, r, total_tokens)


def finish_step(out: StepTime, work: StepWork, r: GpuRates, total_tokens: float | None) -> StepTime:
    """`out` with its throughput, MFU and (given the run's tokens) steps, wall time and GPU-hours from `out.step`."""
    step = out.step
    out.tokens_per_s = tokens_per_s = work.step_tokens / step
    out.mfu = work.model_per_token * tokens_per_s / (work.gpus * out.peak)
    if total_tokens is None:
        out.steps = out.wall = out.gpu_hours = None
        out.goodput = 1.0
        return out
    steps = out.steps = max(math.ceil(total_tokens / work.step_tokens), 1)
    compute_hours = steps * step / 3600
    goodput = out.goodput = r.goodput_long if compute_hours > r.goodput_hours else 1.0
    wall = out.wall = compute_hours / goodput
    out.gpu_hours = wall * work.gpus
    return out


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


def a2a_s(work: StepWork, r: GpuRates, node: int) -> float:
    """A micro-batch's expert all-to-alls on one GPU (core/sizing/experts.py): the (ep - 1) / ep of the bytes that
    leave it, over the scale-up link when the expert group fits in a node (`node` GPUs), else the part bound for
    other nodes over the network (the NIC bounds it; the rest crosses the faster scale-up link meanwhile), plus a
    collective's latency per call. Exposed: the step waits for each (no DualPipe-style overlap)."""
    ep = work.ep
    if ep <= node:
        seconds = work.a2a_bytes * (ep - 1) / ep / (r.link(ep, node) * GB)
    else:
        seconds = work.a2a_bytes * (ep - node) / ep / (r.link(ep, node) * GB)
    return seconds + work.a2a_calls * r.latency


def dp_exposed(work: StepWork, r: GpuRates, node: int, t_micro: float,
               links: dict[int, float] | None = None) -> float:
    """Data-parallel communication left exposed per step: what each GPU sends ((n-1)/n of the volume in ring
    collectives) beyond what hides behind the compute it overlaps with (rates.exposed_of, over the step's
    collectives). `links`: `r`'s memo of link bandwidths in nodes of `node` GPUs, when the caller read it."""
    dp = work.dp
    if dp <= 1:
        return 0.0
    group = work.gpus if work.gpus > node else dp
    dp_bw = ((links.get(group) if links is not None else None) or r.link(group, node)) * GB
    traffic = work.dp_traffic
    share, hops = traffic.share, traffic.hops
    windows = (t_micro, t_micro * 2 / 3, t_micro / 3)
    transfers = []  # a loop, not a comprehension (a frame of its own in CPython 3.11)
    for phase in traffic.phases:
        transfers.append((share * phase.volume / dp_bw + hops, windows[phase.window], phase.times))
    return exposed_of(transfers, r.comm_overlap)


__all__ = ["GpuRates", "StepTime", "a2a_s", "dp_exposed", "finish_step", "step_time", "timed"]
