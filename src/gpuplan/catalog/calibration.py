"""What `gpuplan calibrate` measured on the user's machine, turned into a catalog row (issue #30, point 4).

The speed model times a GPU from its catalog peak (`tflops`, `memory_bandwidth_gbs`) times its generation's
efficiencies (data/speed.toml: the fraction of the peak a training step's matmuls and its elementwise kernels
reach). A measurement says what this very card reaches: the measured row keeps the generation's efficiencies and
scales the peaks so that efficiency x peak is what was measured, with `measured_here` saying what, where and when.
Written as a catalog file (`[[gpu]]`, the built-in row's id), it replaces the built-in row wherever a catalog file
is read (`--catalog`, `--rates`), and the plan's evidence calls the speed "measured" (core/search/evidence.py).
Pure: the measuring is in gpuplan.cli.calibrate."""

from __future__ import annotations

import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.schema.hardware import Gpu
from gpuplan.schema.speed import GenerationEfficiency


class Measurement(BaseModel):
    """One run of `gpuplan calibrate`: the device, the software, and what it reached."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the device as torch names it ("NVIDIA H100 80GB HBM3", or the CPU standing in)
    device: str = Field(min_length=1)
    #: torch's CPU device measured in place of a GPU (a machine without one: the same code path, not a GPU's rates)
    stand_in: bool = False
    driver: str | None = None
    torch: str = Field(min_length=1)
    on: datetime.date
    #: dense bf16 matmul throughput reached, TFLOPS, and at what shape (m x n x k)
    matmul_tflops: float = Field(gt=0)
    matmul_shape: str
    #: device memory read + written per second by a large copy, GB/s
    bandwidth_gbs: float = Field(gt=0)
    #: GPU-to-GPU copy between the first two devices, GB/s (None: one device)
    link_gbs: float | None = Field(None, gt=0)
    #: one training step of a small transformer (forward, backward, AdamW): seconds, and tokens per second
    step_s: float | None = Field(None, gt=0)
    step_tokens_per_s: float | None = Field(None, gt=0)


def measured_gpu(gpu: Gpu, gen: GenerationEfficiency, m: Measurement) -> Gpu:
    """`gpu`'s row with its peaks scaled so that the speed model reaches what `m` measured: every tensor rate by
    measured bf16 matmul / (generation matmul_16bit x catalog bf16 peak), the memory bandwidth by measured bandwidth
    / (generation bandwidth x catalog bandwidth)."""
    peak16 = gpu.tflops.bf16 or gpu.tflops.fp16
    compute = m.matmul_tflops / (gen.matmul_16bit * peak16)
    memory = m.bandwidth_gbs / (gen.bandwidth * gpu.memory_bandwidth_gbs)
    rates = {k: (v * compute if isinstance(v, float) else v) for k, v in gpu.tflops.model_dump().items()}
    where = f"{m.device}" + (" (the CPU standing in for a GPU: not this GPU's rates)" if m.stand_in else "")
    link = f", GPU-to-GPU copy {m.link_gbs:,.0f} GB/s" if m.link_gbs else ""
    step = (f", a small transformer's training step {m.step_s * 1000:,.1f} ms ({m.step_tokens_per_s:,.0f} tokens/s)"
            if m.step_s and m.step_tokens_per_s else "")
    what = (f"gpuplan calibrate on {where}, driver {m.driver or 'none'}, torch {m.torch}, {m.on}: bf16 matmul "
            f"{m.matmul_tflops:,.3g} TFLOPS at {m.matmul_shape} ({_pct(compute)} of what the speed model assumes for "
            f"{gpu.id}: {gen.matmul_16bit:.0%} of {peak16:,.1f}), memory {m.bandwidth_gbs:,.0f} GB/s ({_pct(memory)} "
            f"of {gen.bandwidth:.0%} of {gpu.memory_bandwidth_gbs:,.0f}){link}{step}")
    return gpu.model_copy(update={
        "tflops": type(gpu.tflops).model_validate(rates),
        "memory_bandwidth_gbs": gpu.memory_bandwidth_gbs * memory,
        "measured_here": what,
        "source": f"{gpu.source}; peaks scaled to the measurement of gpuplan calibrate ({m.on})"[:2000],
        "as_of": m.on,
    })


def _pct(x: float) -> str:
    """A share: "63%", "140%"; below 10 %, two significant digits ("0.049%")."""
    return f"{x:.0%}" if x >= 0.1 else f"{x * 100:.2g}%"


def rates_document(row: Gpu) -> dict[str, Any]:
    """The catalog file holding the measured row (TOML tables; `--catalog` and `--rates` read it)."""
    data = row.model_dump(mode="python", exclude_none=True)
    if row.price is not None:  # a file's price is in USD, as the built-in data's: no plan's conversion in it
        data["price"] = row.price.model_dump(mode="python", exclude_none=True, exclude={"amount", "currency"})
    return {"schema_version": 1, "gpu": [data]}


__all__ = ["Measurement", "measured_gpu", "rates_document"]
