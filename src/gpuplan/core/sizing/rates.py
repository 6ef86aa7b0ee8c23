"""The hardware rates the speed model works from: dense peaks by precision, matmul efficiency, link bandwidths,
collective times, calibration spans. Pure functions over the GPU row and data/speed.toml's assumptions."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from gpuplan.core.sizing.lora import block_linears
from gpuplan.core.sizing.memory import resolve
from gpuplan.core.sizing.params import ParamCount
from gpuplan.schema.estimate import Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Workload
from gpuplan.schema.speed import GenerationEfficiency, Span, SpeedModel, SpeedParams

GB = 1e9


def span(v: float, sm: SpeedModel, *, speed: bool = False) -> Span:
    """(low, high) around `v` from the calibration spread of measured/predicted speed; a time is the
    inverse of a speed, so its range flips."""
    lo, hi = sm.params.range_low, sm.params.range_high
    if speed:
        return (v * lo, v * hi)
    return (v / hi, v / lo)


def precision_class(precision: str) -> str:
    if precision == "fp32":
        return "fp32"
    if precision == "fp4":  # serving FP4 weights on FP4 tensor cores (Blackwell)
        return "fp4"
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
    if cls == "fp4" and t.fp4:
        return t.fp4 * 1e12
    if precision.startswith("bf16") and t.bf16:
        return t.bf16 * 1e12
    return t.fp16 * 1e12


def base_efficiency(gen: GenerationEfficiency, precision: str) -> float:
    cls = precision_class(precision)
    # FP4 matmuls: no published run calibrates them; taken at the fp8 efficiency of the generation (an assumption)
    return gen.matmul_fp32 if cls == "fp32" else (gen.matmul_fp8 if cls in ("fp8", "fp4") else gen.matmul_16bit)


def matmul_efficiency(gen: GenerationEfficiency, sm: SpeedModel, precision: str, tokens: float) -> float:
    """Fraction of the dense peak the matmuls of a micro-batch of `tokens` tokens (per GPU) reach."""
    return efficiency_at(base_efficiency(gen, precision), tokens, sm.params.matmul_half_tokens)


def efficiency_at(base: float, tokens: float, half_tokens: float) -> float:
    """`matmul_efficiency` from its terms: the generation's efficiency at the precision (`base_efficiency`) and the
    micro-batch's tokens per GPU against the tokens at which half of it is reached (what a search reads once)."""
    return base * tokens / (tokens + half_tokens)


def link_gbs(gpu: Gpu, sm: SpeedModel, group: int, gpus_per_node: int) -> float:
    """One-way bandwidth (GB/s) a collective over `group` GPUs gets: the scale-up link inside its domain,
    PCIe otherwise, the network across nodes; times the link efficiency."""
    p = sm.params
    if group > gpus_per_node:
        net = sm.generations[gpu.generation].network_gbs_per_gpu
        bw = min(net, intranode_gbs(gpu, sm, gpus_per_node))
    else:
        bw = intranode_gbs(gpu, sm, group)
    return bw * p.link_efficiency


def node_gpus(gpu: Gpu) -> int:
    """GPUs that share the fast link: an NVLink/Infinity Fabric domain (8 on a board, 72 in an NVL72 rack), else
    the 8 of a server."""
    ic = gpu.interconnect
    return max(ic.domain_gpus, 8) if ic.kind in ("nvlink-switch", "infinity-fabric", "roce-on-die") else 8


def intranode_gbs(gpu: Gpu, sm: SpeedModel, group: int) -> float:
    ic = gpu.interconnect
    if ic.kind != "none" and group <= ic.domain_gpus:
        return ic.bandwidth_gbs / 2
    if gpu.market_class == "consumer" and gpu.generation in ("ada", "blackwell"):
        return sm.params.pcie_no_p2p_gbs
    return sm.params.pcie_p2p_gbs.get(str(ic.pcie_gen), 22.0)


def exposed(t: float, window: float, overlap: float) -> float:
    """What a transfer of `t` seconds leaves exposed beside `window` seconds of compute it can overlap with:
    all that does not fit, and (1 - overlap) of what does (contention)."""
    return exposed_of(((t, window, 1),), overlap)


def exposed_of(transfers: Iterable[tuple[float, float, int]], overlap: float) -> float:
    """What transfers of (seconds, the seconds of compute each can overlap with, how many times) leave exposed in
    all: `exposed` of each, times its count, summed in order (the collectives of a step, in one call)."""
    keep = 1 - overlap
    total = 0.0
    for t, window, times in transfers:
        late = t - window
        total += times * ((late if late > 0.0 else 0.0) + keep * (t if t < window else window))
    return total


def host_link_gbs(gpu: Gpu, sm: SpeedModel) -> float:
    """GB/s one way between `gpu` and host memory (pinned copies over its PCIe link)."""
    ic = gpu.interconnect
    return sm.params.host_link_gbs.get(str(ic.pcie_gen), 25.0) * ic.pcie_lanes / 16


def stack_factor(w: Workload, prm: SpeedParams) -> float:
    """A GPU's own step / the tuned stack's: 1, or the eager factor (divided by compile's speed-up)."""
    if w.stack != "eager":
        return 1.0
    return max(prm.eager_step_factor / (prm.compile_speedup if w.compile else 1.0), 1.0)


def allreduce_s(bytes_: float, n: int, bw_gbs: float, latency: float) -> float:
    if n <= 1 or bytes_ <= 0:
        return 0.0
    return 2 * (n - 1) / n * bytes_ / (bw_gbs * GB) + 2 * math.ceil(math.log2(n)) * latency


def param_tensors(arch: ModelArch) -> int:
    """Parameter tensors of a transformer, roughly: each linear's weight (and bias), two norms per layer."""
    linears = sum(mult for _, _, _, mult in block_linears(arch)) if arch.kind != "cnn" else 3 * arch.num_layers
    return int(linears * (2 if arch.qkv_bias or arch.mlp_bias else 1) + arch.num_layers * arch.norms_per_layer + 3)


def lora_linears(arch: ModelArch, w: Workload) -> int:
    if w.task not in ("lora", "qlora"):
        return 0
    targets = (w.lora.targets if w.lora else ["all-linear"])
    total = 0
    for name, _, _, mult in block_linears(arch):
        if "all-linear" in targets or name in targets:
            total += mult
    return total


class WorkloadTerms(NamedTuple):
    """What StepWork reads of the model, the workload and the speed model that no layout, micro-batch or
    recomputation choice changes (`workload_terms`), read once for the works that share a cache."""

    frozen: bool  # LoRA/QLoRA: the base does not train
    eager: bool  # eager attention
    cnn: bool
    fp8: bool
    layers: int  # encoder and decoder layers
    kernels_per_layer: float
    kernels_per_lora: float  # per LoRA linear
    lora_linears: int
    #: QLoRA: (the base's linear weights, bytes read per parameter dequantised); None otherwise
    dequant: tuple[int, float] | None
    master_bytes: int  # of an optimizer's master weight
    opt_per_param: float  # optimizer bytes per parameter
    unfused: float | None  # an unfused optimizer's traffic factor (None: fused)
    opt_launches: float  # a for-loop optimizer's launch seconds per step
    lm_chunked: bool  # an LM head with a chunked loss
    logit_passes: float  # fp32-logit passes a chunked loss saves
    offload_acts: bool  # activation offloading
    unpacked: bool  # unpacked fine-tuning batches (padded to their longest)
    fill: float  # the real share of an unpacked batch's tokens
    in_backward: bool  # the optimizer steps in backward
    af: float  # the attention kernel's factor
    elem_passes: float  # elementwise passes, with fp8's casts
    launch: float  # seconds per kernel launch
    factor: float  # the stack's factor on a step
    eager_step: float  # the eager stack's factor on the optimizer step
    tuned: bool  # a tuned stack (all-reduces overlap their GEMMs)


def workload_terms(arch: ModelArch, p: ParamCount, w: Workload, sm: SpeedModel) -> WorkloadTerms:
    """The `WorkloadTerms` of `w` on `arch` (what core/sizing/step.StepWork reads of them)."""
    prm = sm.params
    per_param = prm.optimizer_bytes_per_param
    kernel_s = prm.kernel_launch_s
    lm_head = arch.kind in ("decoder", "encoder-decoder") and w.task != "inference"
    fp8 = precision_class(w.precision) == "fp8"
    eager_factor = prm.eager_attention_factor if w.attention == "eager" else None
    return WorkloadTerms(
        frozen=w.task in ("lora", "qlora"), eager=w.attention == "eager", cnn=arch.kind == "cnn", fp8=fp8,
        layers=arch.num_layers + arch.num_decoder_layers, kernels_per_layer=prm.kernels_per_layer,
        kernels_per_lora=prm.kernels_per_lora_linear, lora_linears=lora_linears(arch, w),
        dequant=(p.block_linear_weights, prm.qlora_dequant_bytes_per_param) if w.task == "qlora" else None,
        master_bytes=2 if w.precision == "bf16" else 4, opt_per_param=per_param.get(w.optimizer, per_param["adamw"]),
        unfused=prm.optimizer_unfused_traffic if w.optimizer_implementation != "fused" else None,
        opt_launches=(param_tensors(arch) * prm.optimizer_kernels_per_tensor * kernel_s
                      if w.optimizer_implementation == "for-loop" else 0.0),
        lm_chunked=lm_head and w.loss == "chunked", logit_passes=prm.logits_fp32_passes,
        offload_acts=bool(w.activation_offload),
        unpacked=w.packing is False and w.task in ("full-finetune", "lora", "qlora"), fill=prm.unpacked_token_fill,
        in_backward=bool(w.optimizer_in_backward),
        af=eager_factor if eager_factor else prm.attention_factor,
        elem_passes=prm.elementwise_passes + (prm.fp8_cast_passes if fp8 else 0.0), launch=kernel_s,
        factor=stack_factor(w, prm), eager_step=prm.eager_step_factor if w.stack == "eager" else 1.0,
        tuned=w.stack != "eager",
    )


def calibration_notes(gen: GenerationEfficiency) -> list[Note]:
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


#: the names serving.py and traced.py import, as they were spelled before these became public (to go once they read
#: the public names)
_base_efficiency, _calibration_notes, _node_gpus, _span = base_efficiency, calibration_notes, node_gpus, span

__all__ = ["GB", "WorkloadTerms", "allreduce_s", "base_efficiency", "calibration_notes", "efficiency_at", "exposed",
           "exposed_of", "host_link_gbs", "link_gbs", "matmul_efficiency", "node_gpus", "peak_flops", "precision_class",
           "span", "stack_factor", "tokens_per_sample", "workload_terms"]
