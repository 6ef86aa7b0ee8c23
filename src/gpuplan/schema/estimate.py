"""Results of the estimator: memory per GPU with its breakdown, and the assumptions behind it."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class Note(_Frozen):
    """A warning or an assumption the estimate rests on; data, not a log line."""

    code: str
    message: str
    severity: Literal["info", "warning"] = "info"


class ActivationCoefficients(_Frozen):
    """Bytes saved for backward per token and per layer, as a linear combination of the layer's widths:
    h hidden, q query width, kv key/value width, i MLP width, H heads, Hs heads x sequence (eager scores),
    s sequence (eager masks), qg query width when K/V are repeated for GQA (eager), r LoRA rank,
    iek routed expert width x experts per token, E experts, is shared-expert width, Er experts x LoRA rank,
    Eie experts x expert width (PEFT's per-expert adapters), Eh experts x hidden (transformers' Llama 4 runs every
    expert on every token, the unrouted ones at weight zero), MLA's latent widths (ql, kl, v), and a constant."""

    h: float = 0.0
    q: float = 0.0
    kv: float = 0.0
    i: float = 0.0
    H: float = 0.0
    Hs: float = 0.0
    s: float = 0.0
    qg: float = 0.0
    r: float = 0.0
    iek: float = 0.0
    E: float = 0.0
    is_: float = Field(0.0, alias="is")
    Er: float = 0.0
    Eie: float = 0.0
    Eh: float = 0.0
    #: multi-head latent attention (DeepSeek-V3): query rank, KV latent (kv_lora_rank + qk_rope_head_dim), and
    #: heads x v_head_dim (q and kv are then heads x (qk_nope + qk_rope))
    ql: float = 0.0
    kl: float = 0.0
    v: float = 0.0
    #: hidden x experts per token: the input each routed expert gathers (fitted for deepseek_v3, whose top-k varies)
    hk: float = 0.0
    const: float = Field(0.0, alias="1")
    max_rel_error: float = 0.0

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", populate_by_name=True)


class ActivationTable(_Frozen):
    """Measured activation coefficients, keyed "model_type/regime/full|ckpt/sdpa|eager"."""

    source: str
    as_of: str
    rows: dict[str, ActivationCoefficients]
    #: CNNs: bytes per feature-map element by regime (data/cnn_activations.toml)
    cnn: dict[str, float] = Field(default_factory=dict)


class Overheads(_Frozen):
    """Constants outside the tensors themselves (data/overheads.toml, each with its source)."""

    cuda_context_bytes: int
    cublas_workspace_bytes: int
    nccl_bytes_per_communicator: int
    allocator_fraction_training: float
    allocator_fraction_inference: float
    allocator_rounding_bytes: int
    ddp_bucket_bytes: int


class MemoryBreakdown(_Frozen):
    """Bytes on one GPU at its peak, by what holds them. The parts sum to `peak_tensor_bytes`."""

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    other_bytes: int
    #: DPO's and GRPO's frozen reference model (its 16-bit weights, sharded as the policy's); 0 for every other task
    reference_bytes: int = 0
    #: GRPO's colocated rollout engine: its own 16-bit copy of the weights, at the rollout phase's peak (its KV cache
    #: is kv_cache_bytes); 0 for every other task
    rollout_weights_bytes: int = 0

    @property
    def total(self) -> int:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
                + self.kv_cache_bytes + self.other_bytes + self.reference_bytes + self.rollout_weights_bytes)


class MemoryEstimate(_Frozen):
    """Peak GPU memory per GPU, at three levels, with the breakdown at the moment of the peak."""

    breakdown: MemoryBreakdown
    peak_phase: str  # forward | backward | optimizer | prefill
    phase_peaks_bytes: dict[str, int]
    trainable_parameters: int  # what gets gradients and optimizer states (0 for inference)
    peak_tensor_bytes: int  # torch.cuda.max_memory_allocated
    reserved_bytes: int  # torch.cuda.max_memory_reserved
    device_bytes: int  # what nvidia-smi shows for the process
    dominant: str
    gpus: int
    layout: dict[str, int | str]
    notes: list[Note] = Field(default_factory=list)
    #: loading the checkpoint (and quantizing it, QLoRA / int4 / int8): the tensor peak before the first step, and
    #: the device total then (CUDA context, allocator rounding); `fits` considers both phases
    load_peak_bytes: int = 0
    load_device_bytes: int = 0
