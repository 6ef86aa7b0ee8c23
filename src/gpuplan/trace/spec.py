"""TraceSpec / TraceResult: what to trace and what came out (pydantic v2, frozen; importable without torch)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Task = Literal["pretrain", "full-finetune", "lora", "inference"]
Precision = Literal["fp32", "fp16-mixed", "bf16-mixed", "bf16"]
Optimizer = Literal["adamw", "adafactor", "sgd"]


class TraceSpec(BaseModel):
    """One training step (or inference prefill) to trace.  See docs/tracer.md for the exact regime."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    config: dict = Field(description="a Hugging Face config.json dict (model_type required)")
    task: Task = "full-finetune"
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    micro_batch_size: int = Field(1, ge=1)
    sequence_length: int = Field(512, ge=1)
    target_length: int | None = Field(None, ge=1, description="t5/mt5 decoder length; default sequence_length")
    image_size: int | None = Field(None, ge=1, description="vit/resnet input size; default config or 224")
    gradient_checkpointing: bool = False
    attention: Literal["sdpa", "eager"] = "sdpa"
    lora_rank: int = Field(8, ge=1)
    lora_alpha: float = 16.0
    lora_targets: list[str] | None = Field(None, description="None: PEFT's default target modules per family")
    batch_size: int = Field(1, ge=1, description="inference: concurrent sequences")
    context_length: int = Field(512, ge=1, description="inference: prefill length (tokens held by the KV cache)")
    weights_dtype: Literal["fp32", "bf16", "fp16"] = "bf16"
    loss: Literal["standard", "chunked"] = Field(
        "standard", description="chunked: the LM head and an fp32 cross-entropy over 8 chunks of the sequence "
        "(torchtune CEWithChunkedOutputLoss), decoders only")
    dpo: Literal["off", "model", "precomputed"] = Field(
        "off", description="a DPO step as TRL's DPOTrainer runs it: the policy (task full-finetune or lora) on the "
        "chosen and rejected sequences of micro_batch_size pairs in one forward (2 x micro_batch_size sequences), "
        "the sigmoid loss on their summed log-probabilities; model: a frozen reference first runs a forward "
        "without grad (a bf16 copy for full-finetune, the base with adapters disabled for lora); precomputed: none")
    emulate_cuda: bool = Field(
        True, description="CUDA kernel/autocast/dropout footprints (default); False traces the plain CPU path")

    @model_validator(mode="after")
    def _check(self) -> TraceSpec:
        if "model_type" not in self.config:
            raise ValueError("config must contain model_type")
        if self.loss == "chunked" and self.task == "inference":
            raise ValueError("loss: chunked applies to training")
        if self.dpo != "off" and (self.task not in ("full-finetune", "lora") or self.loss != "standard"):
            raise ValueError("dpo traces a policy of task full-finetune or lora with the standard loss")
        return self

    @property
    def training(self) -> bool:
        return self.task != "inference"


class TraceResult(BaseModel):
    """Peak of live tensor bytes (512-B rounded) and its breakdown.  All byte counts are ints."""

    model_config = ConfigDict(frozen=True)

    peak_bytes: int
    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    other_bytes: int
    phase_peaks: dict[str, int]
    kv_cache_bytes: int = 0
    parameters: int
    trainable_parameters: int
    seconds: float
    model_class: str = ""
    attention: str = Field("", description="attention actually used (sdpa falls back to eager if HF lacks it)")
    sdpa_backends: dict[str, int] = Field(default_factory=dict, description="emulated CUDA SDPA kernel choices")

    @model_validator(mode="after")
    def _check(self) -> TraceResult:
        split = self.parameters_bytes + self.gradients_bytes + self.optimizer_bytes + self.other_bytes
        if split != self.peak_bytes:
            raise ValueError(f"category split {split} != peak {self.peak_bytes}")
        return self

    def gib(self) -> dict[str, float]:
        g = 2**30
        return {k: getattr(self, k) / g for k in
                ("peak_bytes", "parameters_bytes", "gradients_bytes", "optimizer_bytes", "other_bytes")}
