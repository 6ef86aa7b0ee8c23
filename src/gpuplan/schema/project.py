"""The project file: what the user wants to train or serve, under which goals and constraints.

YAML (or JSON) with these top-level keys: name, model, workload, data, goals, growth, constraints,
deployment, hardware. Unknown keys, wrong types and impossible values are errors naming the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from gpuplan.schema.defaults import (
    DEFAULT_OBJECTIVE,
    HORIZON_MONTHS,
    MEMORY_HEADROOM,
    Objective,
)

Task = Literal["pretrain", "full-finetune", "lora", "qlora", "inference"]
Precision = Literal["fp32", "fp16-mixed", "bf16-mixed", "bf16", "fp8-mixed"]
Optimizer = Literal["adamw", "adamw-8bit", "adafactor", "sgd"]
Attention = Literal["sdpa", "eager", "flash"]
Stack = Literal["tuned", "eager"]
WeightsDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
KvDtype = Literal["bf16", "fp16", "fp8"]
Modality = Literal["text", "image", "audio", "video", "tabular"]
Purpose = Literal["experiment", "production"]
Currency = Literal["EUR", "USD"]
BudgetPeriod = Literal["total", "monthly"]
DeploymentOption = Literal["on-prem", "managed", "cloud"]
Offload = Literal["none", "optimizer", "params"]
OptimizerImpl = Literal["fused", "foreach", "for-loop"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ModelRef(_Section):
    """Which model: exactly one of a built-in preset, a local config.json, its content inline, or a Hub id."""

    preset: str | None = None
    hf_config: str | None = None
    #: a Hugging Face config.json's content, inline (what the web page's paste sends)
    config: dict[str, Any] | None = None
    hf_id: str | None = Field(None, pattern=r"^[\w.\-]+/[\w.\-]+$")
    #: any PyTorch model: MODULE:FUNCTION returning (model, example_inputs), traced under FakeTensorMode
    #: (runs your code; needs the `trace` extra). Its measured step feeds estimate and plan
    trace: str | None = Field(None, pattern=r"^[\w.]+:[\w]+$")

    @model_validator(mode="after")
    def _exactly_one(self) -> ModelRef:
        given = [k for k in ("preset", "hf_config", "config", "hf_id", "trace") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of preset, hf_config, config, hf_id, trace"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class LoraSpec(_Section):
    rank: PositiveInt = 16
    alpha: PositiveFloat = 32.0
    #: module names as in the model (q_proj, v_proj, ...); "all-linear" adapts every linear of the blocks
    targets: list[str] = Field(default_factory=lambda: ["all-linear"])


class Workload(_Section):
    task: Task
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    #: how the optimizer step runs: fused (HF Trainer's default with torch >= 2.8) and for-loop keep only
    #: small temporaries; foreach (torch.optim's default on CUDA) allocates one state-sized temporary
    optimizer_implementation: OptimizerImpl = "fused"
    micro_batch_size: PositiveInt = 1
    global_batch_size: PositiveInt | None = None
    sequence_length: PositiveInt | None = None
    target_length: PositiveInt | None = None
    image_size: PositiveInt | None = None
    gradient_checkpointing: bool = False
    #: fp32 training: let matmuls run as TF32 on Ampere and later (torch.backends.cuda.matmul.allow_tf32,
    #: HF Trainer --tf32); memory is unchanged, speed uses the TF32 tensor-core peak
    tf32: bool = False
    attention: Attention = "sdpa"
    #: training software: "tuned" (Megatron, NeMo, torchtitan, compiled or fused kernels: what published runs
    #: use) or "eager" (plain PyTorch + transformers as the HF Trainer runs by default: measured slower)
    stack: Stack = "tuned"
    lora: LoraSpec | None = None
    tokens: PositiveFloat | None = None
    epochs: PositiveFloat | None = None
    batch_size: PositiveInt = 1
    context_length: PositiveInt | None = None
    output_tokens: PositiveInt | None = None
    #: inference: tokens prefilled in one forward pass (a serving engine's chunk, e.g. vLLM's
    #: max_num_batched_tokens); default: the whole batch at once, as Hugging Face generate() does
    prefill_tokens: PositiveInt | None = None
    weights_dtype: WeightsDtype | None = None
    kv_cache_dtype: KvDtype | None = None
    #: inference: the time a request may take (prompt and every output token); gpuplan reports the largest
    #: batch that meets it and the requests per second there
    target_latency_s: PositiveFloat | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.global_batch_size is not None and self.global_batch_size < self.micro_batch_size:
            raise ValueError("global_batch_size must be at least micro_batch_size")
        if self.lora is not None and self.task not in ("lora", "qlora"):
            raise ValueError(f"lora settings only apply to task lora or qlora, not {self.task}")
        return self


class Data(_Section):
    samples: PositiveInt | None = None
    size_gb: PositiveFloat | None = None
    modality: Modality = "text"


class Budget(_Section):
    amount: PositiveFloat
    currency: Currency = "EUR"
    period: BudgetPeriod = "total"


class Goals(_Section):
    purpose: Purpose = "experiment"
    deadline_days: PositiveFloat | None = None
    objective: Objective = DEFAULT_OBJECTIVE
    budget: Budget | None = None


class Growth(_Section):
    model_scale: float = Field(1.0, ge=1.0)
    data_scale: float = Field(1.0, ge=1.0)
    #: sequence (training) or context (inference) length grows by this factor
    context_scale: float = Field(1.0, ge=1.0)
    #: inference: concurrent requests grow by this factor
    users_scale: float = Field(1.0, ge=1.0)
    horizon_months: PositiveInt = HORIZON_MONTHS


class Constraints(_Section):
    gpus: list[str] = Field(default_factory=list)
    exclude_gpus: list[str] = Field(default_factory=list)
    datacenter_only: bool = False
    max_gpus_per_server: PositiveInt | None = None
    #: fraction of each GPU's memory kept free (allocator fragmentation, other processes, surprises)
    memory_headroom: float = Field(MEMORY_HEADROOM, ge=0.0, lt=0.9)
    #: at most this many servers (multi-node training)
    max_servers: PositiveInt | None = None


class Deployment(_Section):
    """Where the hardware lives, and the cost assumptions to use instead of the defaults of data/tco.toml."""

    options: list[DeploymentOption] = Field(default_factory=lambda: ["on-prem", "managed", "cloud"])
    #: facility power usage effectiveness (total facility power / IT power)
    pue: float | None = Field(None, ge=1.0, le=3.0)
    #: electricity price per kWh, in the budget's currency
    electricity_per_kwh: float | None = Field(None, gt=0, lt=2)
    #: fraction of the time the hardware is busy (owned hardware draws power and earns its keep accordingly)
    utilization: float | None = Field(None, gt=0, le=1)
    depreciation_years: float | None = Field(None, gt=0, le=15)
    #: what the hardware is worth at the end of its depreciation, as a fraction of its price
    residual_value_fraction: float | None = Field(None, ge=0, lt=1)
    #: engineers' time to run the servers, full-time equivalents per server, and their yearly cost
    staff_fte_per_server: float | None = Field(None, ge=0, le=5)
    staff_cost_per_fte_year: float | None = Field(None, ge=0)
    #: colocation or rack space per kW provisioned per month, in the budget's currency (0: your own room)
    colocation_per_kw_month: float | None = Field(None, ge=0)
    #: yearly support contract as a fraction of the hardware price
    support_fraction_per_year: float | None = Field(None, ge=0, le=1)


class Layout(_Section):
    """How the model is spread over the GPUs: ZeRO/FSDP stage, tensor and pipeline parallel degrees."""

    zero: int = Field(0, ge=0, le=3)
    tp: PositiveInt = 1
    pp: PositiveInt = 1
    offload: Offload = "none"


class Hardware(_Section):
    """A fixed GPU type, count and layout to evaluate."""

    gpu: str | None = None
    gpus: PositiveInt = 1
    layout: Layout = Field(default_factory=Layout)

    @model_validator(mode="after")
    def _layout_fits(self) -> Hardware:
        mp = self.layout.tp * self.layout.pp
        if self.gpus % mp:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of tp × pp ({mp})")
        if self.layout.offload != "none" and self.layout.zero == 0:
            raise ValueError("offload needs ZeRO (zero: 1-3; offload: params needs zero: 3)")
        if self.layout.offload == "params" and self.layout.zero != 3:
            raise ValueError("offload: params needs zero: 3")
        return self


class Project(_Section):
    name: str = "project"
    model: ModelRef
    workload: Workload
    data: Data = Field(default_factory=Data)
    goals: Goals = Field(default_factory=Goals)
    growth: Growth = Field(default_factory=Growth)
    constraints: Constraints = Field(default_factory=Constraints)
    deployment: Deployment = Field(default_factory=Deployment)
    hardware: Hardware | None = None
