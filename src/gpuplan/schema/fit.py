"""What `gpuplan fit` answers: on given hardware, the largest value of each setting that still fits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Out(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)


class FitLimit(_Out):
    """The largest value of one setting that still fits, the others as the project gives them."""

    setting: Literal["micro_batch_size", "sequence_length", "context_length", "batch_size", "model_scale"]
    gradient_checkpointing: bool | None
    #: None: not even the smallest value fits
    largest: float | None
    #: for model_scale: the parameters of the largest model
    parameters: int | None = None
    device_bytes_at_largest: int | None = None
    note: str | None = None


class FitResult(_Out):
    project: str
    gpu_id: str
    gpus: int
    layout: dict[str, int | str]
    usable_bytes: int
    limits: list[FitLimit]


__all__ = ["FitLimit", "FitResult"]
