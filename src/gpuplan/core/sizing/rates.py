"""The hardware rates the speed model works from: dense peaks by precision, matmul efficiency, link bandwidths,
collective times, calibration spans. Pure functions over the GPU row and data/speed.toml's assumptions."""

from __future__ import annotations

import math

from gpuplan.core.sizing.lora import block_linears
from gpuplan.core.sizing.memory import resolve
from gpuplan.schema.estimate import Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Workload
from gpuplan.schema.speed import GenerationEfficiency, Span, SpeedModel, SpeedParams

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
    cls = precision_class(precision)
    return gen.matmul_fp32 if cls == "fp32" else (gen.matmul_fp8 if cls == "fp8" else gen.matmul_16bit)


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


def _exposed(t: float, window: float, overlap: float) -> float:
    """What a transfer of `t` seconds leaves exposed beside `window` seconds of compute it can overlap with:
    all that does not fit, and (1 - overlap) of what does (contention)."""
    return max(t - window, 0.0) + (1 - overlap) * min(t, window)


def host_link_gbs(gpu: Gpu, sm: SpeedModel) -> float:
    """GB/s one way between `gpu` and host memory (pinned copies over its PCIe link)."""
    ic = gpu.interconnect
    return sm.params.host_link_gbs.get(str(ic.pcie_gen), 25.0) * ic.pcie_lanes / 16


def _stack_factor(w: Workload, prm: SpeedParams) -> float:
    """A GPU's own step / the tuned stack's: 1, or the eager factor (divided by compile's speed-up)."""
    if w.stack != "eager":
        return 1.0
    return max(prm.eager_step_factor / (prm.compile_speedup if w.compile else 1.0), 1.0)


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


__all__ = ["GB", "host_link_gbs", "link_gbs", "matmul_efficiency", "peak_flops", "precision_class", "tokens_per_sample"]
