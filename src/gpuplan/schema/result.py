"""What `gpuplan estimate` returns: the model, the resolved workload, the hardware and the memory per GPU.
JSON keys carry their units; byte counts are integers."""

import datetime

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.schema.estimate import MemoryBreakdown, Note
from gpuplan.schema.speed import ComputeOut, InferenceSpeed, TimeEstimate


class _Out(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)


class ModelInfo(_Out):
    name: str
    origin: str
    model_type: str
    parameters: int
    trainable_parameters: int
    active_parameters: int
    source: str | None = None
    as_of: datetime.date | None = None


class HardwareInfo(_Out):
    gpu: str | None
    gpus: int
    layout: dict[str, int | str]
    gpu_memory_bytes: int | None = None


class MemoryOut(MemoryBreakdown):
    """The memory breakdown at the peak (the parts, from MemoryBreakdown), the three levels, and the check against
    a GPU's memory when one is given."""

    peak_tensor_bytes: int
    reserved_bytes: int
    device_bytes: int
    peak_phase: str
    phase_peaks_bytes: dict[str, int]
    dominant: str
    #: loading (and quantizing) the checkpoint: tensor peak and device total before the first step (None: a traced
    #: custom model, whose load is not modelled)
    load_peak_bytes: int | None = None
    load_device_bytes: int | None = None
    fits: bool | None = None
    headroom_bytes: int | None = None
    #: serving (None otherwise): the device memory per GPU the engine needs to hold every request the load keeps in
    #: flight per replica (`in_flight_requests`) at once, none of them queued ...
    in_flight_bytes: int | None = None
    in_flight_requests: int | None = None
    #: ... and the least on which it starts: weights, workspace, CUDA graphs, context and one request's KV cache (or
    #: loading the checkpoint, if more). `fits` is the engine starting; the figures above are what it holds
    start_bytes: int | None = None


class EstimateResult(_Out):
    project: str
    model: ModelInfo
    workload: dict[str, object]
    hardware: HardwareInfo
    memory: MemoryOut
    compute: ComputeOut
    #: training speed (with a GPU)
    time: TimeEstimate | None = None
    #: inference speed (with a GPU)
    inference: InferenceSpeed | None = None
    notes: list[Note] = Field(default_factory=list)
