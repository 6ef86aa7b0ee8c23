"""What the serving model returns (gpuplan.core.sizing.serving) and the serving engine's facts it works from
(data/serving.toml): latency percentiles, throughput and capacity of replicas of a continuous-batching engine.
Times are seconds."""

import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


#: (low, high): the range the calibration spread gives around a value
Span = tuple[float, float]


class Percentiles(_Frozen):
    """A latency at the 50th, 90th and 99th percentile of requests (p50 <= p90 <= p99)."""

    p50: float
    p90: float
    p99: float


class Objectives(_Frozen):
    """The serving objectives a capacity is computed against: each a time `percentile` % of requests stay within
    (None: not constrained), and where they came from (the project's slo, target_latency_s or use case)."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    percentile: int = 90
    origin: str = "none"
    #: where each objective in force comes from, by name ("ttft", "itl", "e2e"): "slo" (the project's own),
    #: "target_latency_s", or the use case's template ("use_case chat", "use_case chat, scaled to 400 output tokens
    #: and the project's own objectives")
    origins: dict[str, str] = Field(default_factory=dict)


class InferenceSpeed(_Frozen):
    #: mean time to first token (arrival to first output token, queueing included)
    time_to_first_token_s: float
    time_to_first_token_s_range: Span
    #: one request's decoding speed: 1 / its mean inter-token latency
    decode_tokens_per_s_per_request: float
    decode_tokens_per_s_per_request_range: Span
    #: output tokens per second of every replica together: requests_per_s x mean output tokens
    aggregate_tokens_per_s: float
    aggregate_tokens_per_s_range: Span
    #: prefilling every prompt of the batch at once (Hugging Face generate() with all prompts together)
    batch_prefill_s: float
    #: mean end-to-end time of a request, arrival to last token (queueing and the other requests' prefills in)
    request_latency_s: float
    #: requests per second served, every replica together (the load the figures are at)
    requests_per_s: float
    #: what bounds a decoding step: "memory-bandwidth" or "compute"
    decode_bound: str
    #: workload.target_latency_s, the largest concurrency per replica that meets it, and the requests/s there
    target_latency_s: float | None = None
    max_batch_for_target: int | None = None
    requests_per_s_at_target: float | None = None
    #: latency percentiles at the load: time to first token, inter-token latency (a request's mean time per
    #: output token after the first, vLLM's TPOT) and end-to-end time
    ttft_s: Percentiles | None = None
    itl_s: Percentiles | None = None
    e2e_s: Percentiles | None = None
    #: mean requests in flight (queued, prefilling or decoding), every replica together: requests_per_s x e2e
    concurrency: float = 0.0
    #: where the load came from: "arrival_rate", "users" or "batch_size" (a fixed concurrency per replica)
    load: str = "batch_size"
    replicas: int = 1
    #: the highest arrival rate every replica together sustains within the objectives (None: not serving
    #: text), and per replica
    capacity_requests_per_s: float | None = None
    capacity_requests_per_s_per_replica: float | None = None
    #: what bounds the capacity: an objective ("ttft", "itl", "e2e"), or "kv-cache", "max-num-seqs", "compute"
    capacity_bound: str | None = None
    #: replicas of this layout the project's load needs within the objectives, with the load headroom
    replicas_needed: int | None = None
    #: the same before rounding up to whole replicas: linear in the load, so growth.users_scale x this is what the
    #: grown load needs (core/cost/growth.py)
    replica_demand: float | None = None
    objectives: Objectives | None = None
    #: whether the objectives hold at the load (None: no objectives)
    objectives_met: bool | None = None
    #: the engine's state at the load, per replica: mean decoding requests per step, step time, the KV cache
    #: blocks in use over those allocated, the tokens the KV cache holds
    decode_batch: float = 0.0
    step_s: float = 0.0
    kv_cache_occupancy: float = 0.0
    kv_cache_tokens: int = 0
    #: the requests of the workload's mean lengths (prompt + output) the KV cache holds at once, per replica
    kv_cache_requests: float = 0.0
    #: the engine settings the figures assume (vLLM's defaults unless the project sets them)
    max_num_batched_tokens: int = 0
    max_num_seqs: int = 0
    #: the engine the figures follow (workload.engine: vllm, or transformers for Hugging Face generate())
    engine: str = "vllm"
    assumptions: list[str]


class LatencyPoint(_Frozen):
    """The latencies of the deployment at one arrival rate: each a percentile by name ("p50", "p90", and the
    objectives' percentile when it is another), seconds."""

    #: requests per second arriving at the whole deployment, shared evenly by its replicas
    requests_per_s: float
    ttft_s: dict[str, float]
    itl_s: dict[str, float]
    e2e_s: dict[str, float]


class LatencyCurve(_Frozen):
    """Latency against load (issue #29): the percentiles of the time to first token, the inter-token latency and
    the end-to-end time of a serving configuration as the arrival rate rises from a light load to beyond its
    capacity within the objectives, from the same queueing model and engine state the plan's figures come from
    (core/sizing/latency_curve.py). Rates are the whole deployment's (`replicas` replicas); the load is open, with
    the arrivals the project's load makes (Poisson, or evenly spaced for a fixed concurrency)."""

    #: the percentiles each point gives, ascending ("p" + each)
    percentiles: list[int]
    #: ascending in requests_per_s; each latency series never falls as the load grows
    points: list[LatencyPoint]
    #: the load the plan serves (InferenceSpeed.requests_per_s), its capacity within the objectives
    #: (capacity_requests_per_s; None without objectives' capacity) and the rate the engine saturates at
    planned_requests_per_s: float
    capacity_requests_per_s: float | None = None
    saturation_requests_per_s: float
    replicas: int
    #: "poisson" or "constant"
    arrival: str
    #: the objectives drawn across (the plan's), each at objectives.percentile
    objectives: Objectives | None = None


# --- data/serving.toml ----------------------------------------------------------------------------------------

class EngineTier(_Frozen):
    """SGLang's defaults for GPUs of less than `below_gib` of memory (sglang server_args._handle_gpu_memory_settings):
    its chunked-prefill size and the largest batch it captures CUDA graphs for, below and from tensor parallel 4."""

    below_gib: float = Field(gt=0)
    chunked_prefill_tokens: int = Field(gt=0)
    cuda_graph_max_bs: int = Field(gt=0)
    cuda_graph_max_bs_tp4: int = Field(gt=0)


class EngineDefaults(_Frozen):
    """A serving engine's defaults (vLLM's unless noted), by id in data/serving.toml's [[param]] rows."""

    #: --gpu-memory-utilization: the fraction of each GPU's memory the engine takes (weights, activations,
    #: CUDA graphs, then KV blocks fill the rest)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    #: tokens per KV cache block (--block-size)
    block_size_tokens: int = Field(gt=0)
    #: --max-num-batched-tokens and --max-num-seqs of the OpenAI server on GPUs of at least
    #: `large_gpu_min_gib` (A100 excepted), and on the others
    max_num_batched_tokens_large: int = Field(gt=0)
    max_num_batched_tokens_small: int = Field(gt=0)
    max_num_seqs_large: int = Field(gt=0)
    max_num_seqs_small: int = Field(gt=0)
    large_gpu_min_gib: float = Field(gt=0)
    #: memory the captured CUDA graphs take per GPU, GiB
    cuda_graph_gib: float = Field(ge=0)
    #: the load headroom replicas are sized with: the load x (1 + this)
    load_headroom: float = Field(ge=0, le=10)
    #: without any objective, a replica is loaded to at most this fraction of the rate it saturates at
    max_utilization: float = Field(gt=0, lt=1)
    #: seconds each kernel of a decoding step takes at the least when the engine replays it from a CUDA graph
    #: (launch gap and the floor of a tiny kernel), in place of the eager launch cost training pays
    decode_kernel_s: float = Field(gt=0, lt=1e-3)
    #: the decode-attention kernels read the KV cache at this fraction of the bandwidth the weights are read at
    attention_bandwidth_ratio: float = Field(gt=0, le=1.5)
    #: the decode-attention kernel reads each KV head once per query head of its group (TensorRT-LLM before its
    #: XQA kernel: one thread block per query head), not once per group (vLLM's paged attention, FlashInfer, XQA);
    #: an engine's property, not a default: off unless a caller says so
    kv_read_per_query_head: bool = False
    #: how the engine sizes its KV pool: "share", a share of each GPU holds everything (vLLM's
    #: gpu_memory_utilization); "static", the GPU less a reserve for activations and CUDA graphs holds the weights
    #: and the KV cache (SGLang's mem_fraction_static, the reserve `reserve_*`, workload.gpu_memory_utilization the
    #: fraction itself); "free", a fraction (gpu_memory_utilization) of the memory left free after the weights and
    #: the step's buffers (TensorRT-LLM's free_gpu_memory_fraction)
    pool: Literal["share", "static", "free"] = "share"
    #: SGLang's reserve, MiB per GPU: a constant, per token of its chunked-prefill size (at least 2,048), per batch
    #: its CUDA graphs are captured for, per GPU of tensor x pipeline parallelism, and at least `reserve_min_mib` on
    #: GPUs of more than `reserve_min_above_gib`
    reserve_base_mib: float = Field(0.0, ge=0)
    reserve_mib_per_prefill_token: float = Field(0.0, ge=0)
    reserve_min_prefill_tokens: int = Field(0, ge=0)
    reserve_mib_per_graph_batch: float = Field(0.0, ge=0)
    reserve_mib_per_gpu: float = Field(0.0, ge=0)
    reserve_min_mib: float = Field(0.0, ge=0)
    reserve_min_above_gib: float = Field(0.0, ge=0)
    #: the engine's defaults by GPU memory (SGLang), smallest first; its budget without a GPU is
    #: max_num_batched_tokens_large, its CUDA-graph batch `cuda_graph_max_bs`
    gpu_tiers: tuple[EngineTier, ...] = ()
    cuda_graph_max_bs: int = Field(0, ge=0)
    #: speculative decoding with a model's MTP modules: the chance its drafted token is accepted (DeepSeek-V3's
    #: published figure; None: none published)
    mtp_acceptance_rate: float | None = Field(None, ge=0, lt=1)
    #: SGLang's reserve grows when it speculates, MiB: an EAGLE or MTP draft's weights and CUDA graphs, a standalone
    #: draft model's (n-gram adds nothing)
    reserve_mib_speculative: float = Field(0.0, ge=0)
    reserve_mib_speculative_draft: float = Field(0.0, ge=0)
    #: the engine these defaults are (workload.engine; data/serving.toml's [[engine]] rows change vLLM's)
    id: str = "vllm"
    #: a paged KV pool the engine preallocates and admits requests into, chunked prefill at a token budget, a
    #: sliding window's cache capped at the window (vLLM, SGLang, TensorRT-LLM); False: Hugging Face generate(),
    #: the whole batch prefilled at once, every prefilled token of every layer kept, no pool
    paged: bool = True


class AllReduceCost(_Frozen):
    """A tensor-parallel all-reduce of a decoding step's activations, measured: fixed latency and seconds per
    byte, by group size (2, 4, 8), on one kind of link."""

    id: Literal["nvlink", "pcie"]
    latency_s: dict[str, float]
    s_per_byte: dict[str, float]
    #: NCCL's ring: its fixed latency (the bandwidth term comes from the link)
    nccl_latency_s: float = Field(ge=0)
    source: str = Field(min_length=1)
    as_of: datetime.date

    @model_validator(mode="after")
    def _sizes(self) -> "AllReduceCost":
        if set(self.latency_s) != set(self.s_per_byte) or not self.latency_s:
            raise ValueError("latency_s and s_per_byte need the same group sizes")
        if any(not k.isdigit() or int(k) < 2 for k in self.latency_s):
            raise ValueError("group sizes are integers of at least 2")
        if any(v < 0 for v in (*self.latency_s.values(), *self.s_per_byte.values())):
            raise ValueError("latencies and seconds per byte are not negative")
        return self


class UseCaseTemplate(_Frozen):
    """Typical lengths and objectives of a kind of service, each with its source."""

    id: Literal["chat", "rag", "code-completion", "summarization", "batch"]
    prompt_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    ttft_s: float = Field(gt=0)
    itl_s: float = Field(gt=0)
    e2e_s: float = Field(gt=0)
    percentile: Literal[50, 90, 95, 99]
    source: str = Field(min_length=1)
    as_of: datetime.date


class EngineRow(_Frozen):
    """An engine other than vLLM (data/serving.toml [[engine]]): what it sets differently from vLLM's defaults, each
    row with its source. A key left out is vLLM's."""

    id: Literal["sglang", "tensorrt-llm", "transformers"]
    paged: bool | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    block_size_tokens: int | None = Field(None, gt=0)
    cuda_graph_gib: float | None = Field(None, ge=0)
    decode_kernel_s: float | None = Field(None, gt=0, lt=1e-3)
    max_num_batched_tokens_large: int | None = Field(None, gt=0)
    max_num_batched_tokens_small: int | None = Field(None, gt=0)
    max_num_seqs_large: int | None = Field(None, gt=0)
    max_num_seqs_small: int | None = Field(None, gt=0)
    pool: Literal["share", "static", "free"] | None = None
    reserve_base_mib: float | None = Field(None, ge=0)
    reserve_mib_per_prefill_token: float | None = Field(None, ge=0)
    reserve_min_prefill_tokens: int | None = Field(None, ge=0)
    reserve_mib_per_graph_batch: float | None = Field(None, ge=0)
    reserve_mib_per_gpu: float | None = Field(None, ge=0)
    reserve_min_mib: float | None = Field(None, ge=0)
    reserve_min_above_gib: float | None = Field(None, ge=0)
    gpu_tiers: tuple[EngineTier, ...] | None = None
    cuda_graph_max_bs: int | None = Field(None, ge=0)
    reserve_mib_speculative: float | None = Field(None, ge=0)
    reserve_mib_speculative_draft: float | None = Field(None, ge=0)
    #: why gpuplan cannot model the engine yet (its facts sourced, its memory semantics not): refused with this
    refused: str | None = None
    source: str = Field(min_length=1)
    as_of: datetime.date


class ServingData(_Frozen):
    """data/serving.toml: the engine's defaults, the all-reduce costs by link, the use-case templates."""

    engine: EngineDefaults
    allreduce: dict[str, AllReduceCost]
    use_cases: dict[str, UseCaseTemplate]
    sources: dict[str, str]
    #: the other engines by id (workload.engine), each what it changes of `engine`
    engines: dict[str, EngineRow] = Field(default_factory=dict)


__all__ = ["AllReduceCost", "EngineDefaults", "EngineRow", "EngineTier", "InferenceSpeed", "LatencyCurve",
           "LatencyPoint", "Objectives", "Percentiles", "ServingData", "Span", "UseCaseTemplate"]
