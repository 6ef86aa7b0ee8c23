"""The project file: what the user wants to train or serve, under which goals and constraints.

YAML (or JSON) with these top-level keys: name, model, workload, data, goals, growth, constraints,
deployment, hardware. Unknown keys, wrong types and impossible values are errors naming the field.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from gpuplan.schema.defaults import DEFAULT_OBJECTIVE, HORIZON_MONTHS, MEMORY_HEADROOM, Objective
from gpuplan.schema.speculative import Speculative

Task = Literal["pretrain", "full-finetune", "lora", "qlora", "inference", "dpo", "grpo"]
#: how a preference-tuned policy trains (DPO): every parameter, or LoRA adapters on a frozen base
DpoMethod = Literal["full", "lora"]
#: where DPO's reference log-probabilities come from: a frozen copy of the model run each step, or computed once
#: before training (TRL precompute_ref_log_probs)
DpoReference = Literal["model", "precomputed"]
#: where GRPO's rollout engine runs: on the trainer's GPUs, swapping memory between the phases (verl's hybrid engine,
#: TRL vllm_mode=colocate), or on GPUs of its own (OpenRLHF, NeMo RL non-colocated, TRL vllm_mode=server)
GrpoPlacement = Literal["colocated", "separate"]
Precision = Literal["fp32", "fp16-mixed", "bf16-mixed", "bf16", "fp8-mixed"]
#: paged-adamw-8bit: bitsandbytes' PagedAdamW8bit (states in CUDA unified memory, paged to the host under pressure)
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd"]
Attention = Literal["sdpa", "eager", "flash"]
Stack = Literal["tuned", "eager"]
#: nvfp4: NVIDIA's FP4 (E2M1) in blocks of 16 with an FP8 (E4M3) scale each; mxfp4: the OCP microscaling FP4,
#: blocks of 32 with an 8-bit power-of-two (E8M0) scale each
WeightsDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
KvDtype = Literal["bf16", "fp16", "fp8"]
Modality = Literal["text", "image", "audio", "video", "tabular"]
Purpose = Literal["experiment", "production"]
Currency = Literal["EUR", "USD"]
BudgetPeriod = Literal["total", "monthly"]
DeploymentOption = Literal["on-prem", "managed", "cloud"]
DEPLOYMENT_OPTIONS: tuple[DeploymentOption, ...] = ("on-prem", "managed", "cloud")
#: cloud price groups (issue 28): the provider classes of data/prices.toml `tier`, and the commitments priced
ProviderClass = Literal["hyperscaler", "specialist", "marketplace"]
Commitment = Literal["on-demand", "reserved-1y", "reserved-3y"]
Offload = Literal["none", "optimizer", "params"]
OptimizerImpl = Literal["fused", "foreach", "for-loop"]
Loss = Literal["standard", "chunked"]
Framework = Literal["hf-trainer", "torchtune", "axolotl", "unsloth", "litgpt", "nemo", "torchtitan", "deepspeed"]
Arrival = Literal["poisson", "constant"]
UseCase = Literal["chat", "rag", "code-completion", "summarization", "batch"]
SloPercentile = Literal[50, 90, 95, 99]
#: the inference engine whose memory and scheduling an estimate follows (vllm: continuous batching, the default;
#: transformers: Hugging Face generate(), the whole batch prefilled at once and a full KV cache per sequence)
ServingEngine = Literal["vllm", "sglang", "tensorrt-llm", "transformers"]


def _no_bool(value: Any) -> Any:
    """A number field refuses true/false: YAML reads yes, no, on, off as booleans, and pydantic would take
    `batch_size: yes` as 1."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()} (YAML reads yes, no, on and off as booleans)")
    return value


_NUMBER = BeforeValidator(_no_bool)
#: numbers of the project file: never a boolean; each field adds its own bounds (a batch of 1e12, a model scaled
#: by 1e307 or 1e300 tokens are refused with the bound, rather than overflowing later)
PositiveInt = Annotated[int, _NUMBER, Field(gt=0)]
PositiveFloat = Annotated[float, _NUMBER, Field(gt=0)]
Number = Annotated[float, _NUMBER]
Integer = Annotated[int, _NUMBER]
Name = Annotated[str, Field(min_length=1, max_length=200)]

#: upper bounds of the project's numbers: far beyond any real project, low enough that the arithmetic stays finite
MAX_BATCH = 1_000_000
MAX_TOKENS_PER_SEQUENCE = 100_000_000
MAX_TOKENS = 1e16
MAX_EPOCHS = 10_000
MAX_SAMPLES = 10**13
MAX_GPUS = 100_000
MAX_AMOUNT = 1e13


class _Section(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


class ModelRef(_Section):
    """Which model: exactly one of a built-in preset, a local config.json, its content inline, or a Hub id."""

    preset: Name | None = None
    hf_config: Annotated[str, Field(max_length=4096)] | None = None
    #: a Hugging Face config.json's content, inline (what the web page's paste sends)
    config: dict[str, Any] | None = None
    hf_id: str | None = Field(None, pattern=r"^[\w.\-]+/[\w.\-]+$", max_length=200)
    #: any PyTorch model: MODULE:FUNCTION returning (model, example_inputs), traced under FakeTensorMode
    #: (runs your code; needs the `trace` extra). Its measured step feeds estimate and plan
    trace: str | None = Field(None, pattern=r"^[\w.]+:[\w]+$", max_length=200)

    @model_validator(mode="after")
    def _exactly_one(self) -> "ModelRef":
        given = [k for k in ("preset", "hf_config", "config", "hf_id", "trace") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of preset, hf_config, config, hf_id, trace"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class LoraSpec(_Section):
    rank: PositiveInt = Field(16, le=65_536)
    alpha: PositiveFloat = Field(32.0, le=1e6)
    #: module names as in the model (q_proj, v_proj, ...); "all-linear" adapts every linear of the blocks
    targets: list[Name] = Field(default_factory=lambda: ["all-linear"], max_length=64)


class DpoSpec(_Section):
    """Direct preference optimisation (task dpo): the policy trains as `method` on the chosen and rejected responses
    of each pair in one forward (as TRL's DPOTrainer runs them); the reference is a frozen 16-bit copy (full), the
    base with its adapters disabled (lora), or log-probabilities computed before training (precomputed)."""

    method: DpoMethod = "full"
    reference: DpoReference = "model"


class GrpoSpec(_Section):
    """Group relative policy optimisation (task grpo), colocated: each step a vLLM engine on the trainer's GPUs
    generates `group_size` responses of up to `response_length` tokens to each of `prompts_per_step` prompts of
    `prompt_length` tokens, the old policy (and with `kl` a frozen reference) scores them, and the policy trains as
    `method` on every sequence. Defaults (docs/project.md): verl's data defaults (train_batch_size 1024,
    max_prompt_length 512, max_response_length 512), TRL's num_generations (8), the KL term of DeepSeekMath's GRPO."""

    method: DpoMethod = "full"
    #: a KL penalty to a frozen reference model: its 16-bit copy is held (none with LoRA: the base without adapters)
    #: and run each step
    kl: bool = True
    group_size: PositiveInt = Field(8, le=4096)
    prompts_per_step: PositiveInt = Field(1024, le=MAX_BATCH)
    prompt_length: PositiveInt = Field(512, le=MAX_TOKENS_PER_SEQUENCE)
    response_length: PositiveInt = Field(512, le=MAX_TOKENS_PER_SEQUENCE)
    #: the responses' mean length where a run's logs give it; none: every response runs to response_length
    mean_response_length: PositiveInt | None = Field(None, le=MAX_TOKENS_PER_SEQUENCE)
    placement: GrpoPlacement = "colocated"
    #: the share of each engine GPU the engine takes (none: colocated verl's 0.5, separate vLLM's 0.9;
    #: core/sizing/grpo_share.py, grpo_pools.py)
    gpu_memory_utilization: Number | None = Field(None, gt=0, lt=1)
    #: separate: the GPUs of the engine's pool (the trainer has the rest of hardware.gpus)
    rollout_gpus: PositiveInt | None = Field(None, le=MAX_GPUS)
    #: the engine's tensor parallel degree (none: the trainer's tensor x pipeline group)
    rollout_tp: PositiveInt | None = Field(None, le=64)


class Slo(_Section):
    """Serving objectives: each a time the given percentile of requests stays within (seconds)."""

    #: time to first token
    ttft_s: PositiveFloat | None = Field(None, le=1e5)
    #: inter-token latency (time between two output tokens of one request)
    itl_s: PositiveFloat | None = Field(None, le=1e4)
    #: end-to-end time of a request, arrival to last token
    e2e_s: PositiveFloat | None = Field(None, le=1e6)
    percentile: SloPercentile = 90


class PrefixCache(_Section):
    """Automatic prefix caching (vLLM's, on by default in its V1 engine): the share of prompt tokens found in the
    cache (vLLM's `prefix_cache_hits / prefix_cache_queries`, in tokens), which skip prefill; `shared`: the cached
    prefix is common to the requests in flight (a system prompt, a shared document: its KV blocks held once per
    replica), else each request's own (a conversation's earlier turns: held by that request alone)."""

    hit_rate: float = Field(ge=0, lt=1)
    shared: bool = True


class Workload(_Section):
    task: Task
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    #: how the optimizer step runs: fused (HF Trainer's default with torch >= 2.8) and for-loop keep only
    #: small temporaries; foreach (torch.optim's default on CUDA) allocates one state-sized temporary
    optimizer_implementation: OptimizerImpl = "fused"
    micro_batch_size: PositiveInt = Field(1, le=MAX_BATCH)
    global_batch_size: PositiveInt | None = Field(None, le=MAX_BATCH * 1000)
    sequence_length: PositiveInt | None = Field(None, le=MAX_TOKENS_PER_SEQUENCE)
    target_length: PositiveInt | None = Field(None, le=MAX_TOKENS_PER_SEQUENCE)
    image_size: PositiveInt | None = Field(None, le=65_536)
    gradient_checkpointing: bool = False
    #: fp32 training: let matmuls run as TF32 on Ampere and later (torch.backends.cuda.matmul.allow_tf32,
    #: HF Trainer --tf32); memory is unchanged, speed uses the TF32 tensor-core peak
    tf32: bool = False
    attention: Attention = "sdpa"
    #: training software: "tuned" (Megatron, NeMo, torchtitan, compiled or fused kernels: what published runs
    #: use) or "eager" (plain PyTorch + transformers as the HF Trainer runs by default: measured slower)
    stack: Stack = "tuned"
    lora: LoraSpec | None = None
    #: task dpo: the policy's method and the reference (micro_batch_size, global_batch_size and data.samples count
    #: preference pairs, each a chosen and a rejected sequence of sequence_length tokens)
    dpo: DpoSpec | None = None
    #: task grpo: the policy's method, the KL reference, the group, the prompts per step and the lengths
    #: (data.samples counts prompts; micro_batch_size counts sequences, each a prompt and one response)
    grpo: GrpoSpec | None = None
    tokens: PositiveFloat | None = Field(None, le=MAX_TOKENS)
    epochs: PositiveFloat | None = Field(None, le=MAX_EPOCHS)
    batch_size: PositiveInt = Field(1, le=MAX_BATCH)
    context_length: PositiveInt | None = Field(None, le=MAX_TOKENS_PER_SEQUENCE)
    output_tokens: PositiveInt | None = Field(None, le=MAX_TOKENS_PER_SEQUENCE)
    #: inference: the engine's token budget per step (vLLM's max_num_batched_tokens); default the engine's own
    #: (data/serving.toml); engine transformers prefills the whole batch at once and takes none
    prefill_tokens: PositiveInt | None = Field(None, le=MAX_TOKENS_PER_SEQUENCE)
    weights_dtype: WeightsDtype | None = None
    kv_cache_dtype: KvDtype | None = None
    #: inference: the time a request may take (prompt and every output token); gpuplan reports the largest
    #: batch that meets it and the requests per second there
    target_latency_s: PositiveFloat | None = Field(None, le=1e6)
    #: inference load: requests per second arriving (Poisson unless `arrival: constant`) ...
    arrival_rate: PositiveFloat | None = Field(None, le=1e7)
    arrival: Arrival = "poisson"
    #: ... or a closed population of users, each sending its next request `think_time_s` after the last answer
    users: PositiveInt | None = Field(None, le=10**9)
    think_time_s: Number | None = Field(None, ge=0, le=1e6)
    #: spread (standard deviation) of the prompt and output lengths around context_length and output_tokens
    prompt_tokens_std: Number | None = Field(None, ge=0, le=MAX_TOKENS_PER_SEQUENCE)
    output_tokens_std: Number | None = Field(None, ge=0, le=MAX_TOKENS_PER_SEQUENCE)
    slo: Slo | None = None
    #: typical lengths and objectives of a kind of service (each sourced in data/use_cases.toml)
    use_case: UseCase | None = None
    #: fraction of each GPU's memory the serving engine may take (vLLM's --gpu-memory-utilization, default 0.9)
    gpu_memory_utilization: Number | None = Field(None, gt=0, le=1)
    #: inference: the engine whose memory and scheduling the estimate follows (None: vllm)
    engine: ServingEngine | None = None
    #: inference: prefix caching (None: the use case's default hit rate where data/serving.toml has a sourced one,
    #: else off; docs/serving.md)
    prefix_cache: PrefixCache | None = None
    #: inference: speculative decoding (None: off)
    speculative: Speculative | None = None
    #: training stack features (None: the framework's default, else off / standard). loss: chunked or fused
    #: cross-entropy never materialises the full fp32 logits
    loss: Loss | None = None
    #: saved activations moved to host memory during forward and back for backward
    activation_offload: bool | None = None
    #: each parameter's optimizer step runs in backward as its gradient is ready (gradients freed per parameter)
    optimizer_in_backward: bool | None = None
    #: several samples packed into each sequence (no padding)
    packing: bool | None = None
    #: torch.compile
    compile: bool | None = None
    #: the training framework: sets the defaults of the keys above, precision, optimizer implementation,
    #: attention kernel and speed stack as its recipes do (explicit keys win)
    framework: Framework | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Workload":
        if self.global_batch_size is not None and self.global_batch_size < self.micro_batch_size:
            raise ValueError("global_batch_size must be at least micro_batch_size")
        if self.lora is not None and self.task not in ("lora", "qlora", "dpo", "grpo"):
            raise ValueError(f"lora settings only apply to task lora, qlora, dpo or grpo, not {self.task}")
        if self.dpo is not None and self.task != "dpo":
            raise ValueError(f"dpo settings only apply to task dpo, not {self.task}")
        if self.task == "dpo" and self.lora is not None and (self.dpo or DpoSpec()).method != "lora":
            raise ValueError("lora settings with task dpo need dpo.method: lora")
        if self.grpo is not None and self.task != "grpo":
            raise ValueError(f"grpo settings only apply to task grpo, not {self.task}")
        if self.task == "grpo" and self.lora is not None and (self.grpo or GrpoSpec()).method != "lora":
            raise ValueError("lora settings with task grpo need grpo.method: lora")
        if self.task == "grpo" and self.sequence_length is not None:
            raise ValueError("task grpo takes its sequences' length from grpo.prompt_length and "
                             "grpo.response_length; drop sequence_length")
        if self.arrival_rate is not None and self.users is not None:
            raise ValueError("give arrival_rate or users, not both")
        if self.prefix_cache is not None and self.task != "inference":
            raise ValueError(f"prefix_cache applies to task inference, not {self.task}")
        if self.prefix_cache is not None and self.engine == "transformers":
            raise ValueError("prefix_cache needs a serving engine that keeps one (engine: vllm); Hugging Face "
                             "generate() (engine: transformers) prefills every prompt whole")
        if self.speculative is not None and self.task != "inference":
            raise ValueError(f"speculative applies to task inference, not {self.task}")
        if self.speculative is not None and self.engine == "transformers":
            raise ValueError("speculative decoding needs a serving engine (vllm, sglang, tensorrt-llm); gpuplan's "
                             "engine transformers models plain generate()")
        if self.think_time_s is not None and self.users is None:
            raise ValueError("think_time_s applies to users (a closed population); give users too")
        return self


class Data(_Section):
    samples: PositiveInt | None = Field(None, le=MAX_SAMPLES)
    size_gb: PositiveFloat | None = Field(None, le=1e9)
    modality: Modality = "text"


class Budget(_Section):
    amount: PositiveFloat = Field(le=MAX_AMOUNT)
    currency: Currency = "EUR"
    period: BudgetPeriod = "total"


class Goals(_Section):
    purpose: Purpose = "experiment"
    deadline_days: PositiveFloat | None = Field(None, le=36_500)
    objective: Objective = DEFAULT_OBJECTIVE
    budget: Budget | None = None


class Growth(_Section):
    model_scale: Number = Field(1.0, ge=1.0, le=1000)
    data_scale: Number = Field(1.0, ge=1.0, le=1e6)
    #: sequence (training) or context (inference) length grows by this factor
    context_scale: Number = Field(1.0, ge=1.0, le=1000)
    #: inference: concurrent requests grow by this factor
    users_scale: Number = Field(1.0, ge=1.0, le=1e6)
    horizon_months: PositiveInt = Field(HORIZON_MONTHS, le=600)


class Constraints(_Section):
    gpus: list[Name] = Field(default_factory=list, max_length=1000)
    exclude_gpus: list[Name] = Field(default_factory=list, max_length=1000)
    datacenter_only: bool = False
    max_gpus_per_server: PositiveInt | None = Field(None, le=MAX_GPUS)
    #: fraction of each GPU's memory kept free (allocator fragmentation, other processes, surprises)
    memory_headroom: Number = Field(MEMORY_HEADROOM, ge=0.0, lt=0.9)
    #: at most this many servers (multi-node training)
    max_servers: PositiveInt | None = Field(None, le=MAX_GPUS)


class PriceGroups(_Section):
    """The cloud prices a plan may use (issue 28): only these provider classes and/or commitments; empty: all."""

    providers: list[ProviderClass] = Field(default_factory=list, max_length=3)
    commitments: list[Commitment] = Field(default_factory=list, max_length=3)


class Deployment(_Section):
    """Where the hardware lives, and the cost assumptions to use instead of the defaults of data/tco.toml."""

    options: list[DeploymentOption] = Field(default_factory=lambda: list(DEPLOYMENT_OPTIONS))
    #: the cloud price groups to price with (provider classes, commitments); empty lists: every group
    price_groups: PriceGroups = Field(default_factory=PriceGroups)
    #: facility power usage effectiveness (total facility power / IT power)
    pue: Number | None = Field(None, ge=1.0, le=3.0)
    #: electricity price per kWh, in the budget's currency
    electricity_per_kwh: Number | None = Field(None, gt=0, lt=2)
    #: fraction of the time the hardware is busy (owned hardware draws power and earns its keep accordingly)
    utilization: Number | None = Field(None, gt=0, le=1)
    depreciation_years: Number | None = Field(None, gt=0, le=15)
    #: what the hardware is worth at the end of its depreciation, as a fraction of its price
    residual_value_fraction: Number | None = Field(None, ge=0, lt=1)
    #: engineers' time to run the servers, full-time equivalents per server, and their yearly cost
    staff_fte_per_server: Number | None = Field(None, ge=0, le=5)
    staff_cost_per_fte_year: Number | None = Field(None, ge=0, le=1e8)
    #: colocation or rack space per kW provisioned per month, in the budget's currency (0: your own room)
    colocation_per_kw_month: Number | None = Field(None, ge=0, le=1e6)
    #: yearly support contract as a fraction of the hardware price
    support_fraction_per_year: Number | None = Field(None, ge=0, le=1)


class Layout(_Section):
    """How the model is spread over the GPUs: ZeRO/FSDP stage, tensor and pipeline parallel degrees."""

    zero: Integer = Field(0, ge=0, le=3)
    tp: PositiveInt = Field(1, le=4096)
    pp: PositiveInt = Field(1, le=4096)
    offload: Offload = "none"


class Hardware(_Section):
    """A fixed GPU type, count and layout to evaluate."""

    gpu: Name | None = None
    gpus: PositiveInt = Field(1, le=MAX_GPUS)
    layout: Layout = Field(default_factory=Layout)

    @model_validator(mode="after")
    def _layout_fits(self) -> "Hardware":
        mp = self.layout.tp * self.layout.pp
        if self.gpus % mp:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of tp × pp ({mp})")
        if self.layout.offload != "none" and self.layout.zero == 0:
            raise ValueError("offload needs ZeRO (zero: 1-3; offload: params needs zero: 3)")
        if self.layout.offload == "params" and self.layout.zero != 3:
            raise ValueError("offload: params needs zero: 3")
        return self


class Project(_Section):
    name: Name = "project"
    model: ModelRef
    workload: Workload
    data: Data = Field(default_factory=Data)
    goals: Goals = Field(default_factory=Goals)
    growth: Growth = Field(default_factory=Growth)
    constraints: Constraints = Field(default_factory=Constraints)
    deployment: Deployment = Field(default_factory=Deployment)
    hardware: Hardware | None = None
