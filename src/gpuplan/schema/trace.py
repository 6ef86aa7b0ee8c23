"""What tracing a user's model factory measured (`gpuplan trace`, `model.trace`): the result type, so the pure
core can size a traced model without importing the tracer that runs user code (gpuplan.trace.custom)."""

from pydantic import BaseModel, ConfigDict


class CustomTraceResult(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)

    factory: str
    model_class: str
    training: bool
    precision: str
    parameters: int
    trainable_parameters: int
    peak_bytes: int
    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    other_bytes: int
    phase_peaks: dict[str, int]
    #: FLOPs of one step (training: forward and backward) or one forward (inference)
    flops_per_step: int
    seconds: float


__all__ = ["CustomTraceResult"]
