"""Assumptions of the speed model (data/speed.toml) and what it returns. Every assumption is data with a
source; times are seconds unless the name says hours."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.schema.estimate import Note
from gpuplan.schema.serving import InferenceSpeed, Span


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class GenerationEfficiency(_Frozen):
    """What a GPU generation's matmuls reach in training, as a fraction of the dense tensor peak, before the
    micro-batch penalty; and its memory-bandwidth efficiency."""

    id: str
    #: large bf16/fp16 matmuls inside a real training step (kernel mix, not a GEMM micro-benchmark)
    matmul_16bit: float = Field(gt=0, le=1)
    #: fp8 training: fraction of the fp8 peak (scaling, casts and the bf16 parts keep it lower)
    matmul_fp8: float = Field(gt=0, le=1)
    #: fp32 training on CUDA cores (PyTorch keeps TF32 off for matmuls by default)
    matmul_fp32: float = Field(gt=0, le=1)
    #: fraction of the memory bandwidth elementwise kernels and decoding reach
    bandwidth: float = Field(gt=0, le=1)
    #: network bandwidth per GPU between nodes in the clusters of this generation, GB/s one way
    network_gbs_per_gpu: float = Field(gt=0)
    #: how this was set: "calibrated" on runs of this generation, or "prior" (from another generation)
    basis: Literal["calibrated", "prior"]
    source: str = Field(min_length=1)


class SpeedParams(_Frozen):
    """Scalar assumptions, by id in data/speed.toml."""

    #: matmul efficiency falls for small micro-batches: x tokens / (tokens + this)
    matmul_half_tokens: float = Field(gt=0)
    #: attention kernels (flash/SDPA) reach this fraction of the matmul efficiency
    attention_factor: float = Field(gt=0, le=1.5)
    #: the same for eager attention (the score matrix materialised, softmax in its own kernels); None: as flash
    eager_attention_factor: float | None = Field(None, gt=0, le=1.5)
    #: elementwise traffic per step = this x the bytes autograd saves for backward
    elementwise_passes: float = Field(gt=0)
    #: fp8 training: more passes over the activations to cast them (and their gradients) for each matmul
    fp8_cast_passes: float = Field(ge=0)
    #: kernels per transformer layer for one forward + backward, and per adapted linear for LoRA
    kernels_per_layer: float = Field(gt=0)
    kernels_per_lora_linear: float = Field(ge=0)
    kernel_launch_s: float = Field(gt=0)
    #: decode: kernels per layer of one decoding step (without CUDA graphs)
    decode_kernels_per_layer: float = Field(gt=0)
    #: optimizer step bytes moved per trainable parameter (read and write)
    optimizer_bytes_per_param: dict[str, float]
    #: for-loop optimizers launch this many kernels per parameter tensor
    optimizer_kernels_per_tensor: float = Field(ge=0)
    #: training on a plain eager PyTorch + transformers stack takes this many times the tuned step
    eager_step_factor: float = Field(1.0, ge=1.0)
    #: an unfused (foreach or for-loop) optimizer step moves this many times the bytes of the fused one
    optimizer_unfused_traffic: float = Field(1.0, ge=1.0)
    #: QLoRA: bytes moved per base parameter each time NF4 weights are dequantized to 16 bits
    qlora_dequant_bytes_per_param: float = Field(gt=0)
    #: fraction of the link bandwidth collectives reach
    link_efficiency: float = Field(gt=0, le=1)
    #: GPU-to-GPU bandwidth, GB/s one way, when there is no NVLink-class link (through PCIe switches/root)
    pcie_p2p_gbs: dict[str, float]
    #: consumer cards without peer-to-peer go through host memory
    pcie_no_p2p_gbs: float = Field(gt=0)
    #: fraction of the gradient all-reduce hidden behind the backward pass (DDP buckets, FSDP prefetch)
    comm_overlap: float = Field(ge=0, le=1)
    #: fraction of the tensor-parallel all-reduces a tuned stack hides behind the matmuls (Megatron/Transformer Engine
    #: communication overlap, sequence parallelism's reduce-scatter and all-gather pipelined with the GEMMs)
    tp_comm_overlap: float = Field(0.0, ge=0, le=0.95)
    collective_latency_s: float = Field(ge=0)
    #: prefill reaches this fraction of the training matmul efficiency (no backward, big GEMMs)
    prefill_factor: float = Field(gt=0)
    #: share of wall time a long run spends training (restarts, evaluation, checkpoints excluded)
    goodput_long_run: float = Field(gt=0, le=1)
    #: runs shorter than this many hours get goodput 1
    goodput_threshold_hours: float = Field(gt=0)
    #: GPU <-> host copies (pinned memory), GB/s one way for a x16 link, by PCIe generation: what activation
    #: offloading and ZeRO-Offload move over
    host_link_gbs: dict[str, float]
    #: ZeRO-Offload: parameters per second one host's CPU Adam updates (DeepSpeed CPU-Adam, all its cores)
    cpu_adam_params_per_s: float = Field(gt=0)
    #: fraction of a host copy that overlaps with compute when it fits in the compute window (copy streams)
    offload_overlap: float = Field(ge=0, le=1)
    #: torch.compile on the eager stack: the step runs this many times faster (the tuned stack is compiled already)
    compile_speedup: float = Field(ge=1)
    #: passes over fp32 logits (upcast, log-softmax, its gradient) that a chunked or fused cross-entropy avoids
    logits_fp32_passes: float = Field(ge=0)
    #: unpacked fine-tuning batches padded to their longest sample: the fraction of computed tokens that are real
    unpacked_token_fill: float = Field(gt=0, le=1)
    #: spread of measured/predicted on the calibration runs (10th and 90th percentiles)
    range_low: float = Field(gt=0, le=1)
    range_high: float = Field(ge=1)


class SpeedModel(_Frozen):
    """All speed assumptions: per generation, and scalars."""

    generations: dict[str, GenerationEfficiency]
    params: SpeedParams
    sources: dict[str, str]


class TimeEstimate(_Frozen):
    """Training time. `tokens_per_s` is for all GPUs together."""

    tokens_per_s: float
    tokens_per_s_range: Span
    tokens_per_s_per_gpu: float
    step_seconds: float
    step_seconds_range: Span
    steps: int | None
    tokens: float | None
    wall_hours: float | None
    wall_hours_range: Span | None
    gpu_hours: float | None
    gpu_hours_range: Span | None
    goodput: float
    mfu: float
    efficiency: float
    #: seconds of one step by part: matmul, elementwise, overhead, optimizer, communication, bubble; with offload also
    #: offload (PCIe copies left exposed) and cpu_optimizer (ZeRO-Offload's CPU Adam)
    step_breakdown_s: dict[str, float]
    assumptions: list[str]


class ComputeOut(_Frozen):
    """FLOPs: per token of a training step (model FLOPs, as MFU counts them) or of a forward pass."""

    flops_per_token: float
    hardware_flops_per_token: float
    flops_total: float | None


class SpeedResult(_Frozen):
    compute: ComputeOut
    time: TimeEstimate | None = None
    inference: InferenceSpeed | None = None
    notes: list[Note] = Field(default_factory=list)


__all__ = ["ComputeOut", "GenerationEfficiency", "InferenceSpeed", "SpeedModel", "SpeedParams",
           "Span", "SpeedResult", "TimeEstimate"]
