"""What the serving model returns (gpuplan.core.sizing.serving): latency, throughput and capacity of a
replica serving requests. Times are seconds."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


#: (low, high): the range the calibration spread gives around a value
Span = tuple[float, float]


class InferenceSpeed(_Frozen):
    time_to_first_token_s: float
    time_to_first_token_s_range: Span
    decode_tokens_per_s_per_request: float
    decode_tokens_per_s_per_request_range: Span
    aggregate_tokens_per_s: float
    aggregate_tokens_per_s_range: Span
    #: prefilling every prompt of the batch at once (Hugging Face generate() with all prompts together)
    batch_prefill_s: float
    #: one request from its arrival to its last token, with the batch decoding alongside
    request_latency_s: float
    #: steady state: each request takes its own prefill and a share of the batch's decoding steps
    requests_per_s: float
    #: what bounds a decoding step: "memory-bandwidth" or "compute"
    decode_bound: str
    #: workload.target_latency_s, the largest batch whose requests meet it, and the requests/s there
    target_latency_s: float | None = None
    max_batch_for_target: int | None = None
    requests_per_s_at_target: float | None = None
    assumptions: list[str]


__all__ = ["InferenceSpeed", "Span"]
