"""Low-precision serving weights on a GPU: FP4 (NVFP4, MXFP4) matmuls on FP4 tensor cores where it has them
(Blackwell), FP8 on FP8 tensor cores; else weight-only: the weights stored and read at their width, the matmuls in
16 bits (vLLM's Marlin kernels), said in a note. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.serving_memory import FP4_WEIGHTS
from gpuplan.schema.estimate import Note
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.project import Workload


def compute_precision(gpu: Gpu, prec: str) -> str:
    """The precision a step's matmuls run at on `gpu`: FP4 weights on FP4 tensor cores where it has them
    (Blackwell), else weight-only: read in 4 bits, multiplied in 16 (vLLM's Marlin W4A16 kernels)."""
    return "bf16" if prec == "fp4" and not gpu.tflops.fp4 else prec


def precision_notes(w: Workload, gpu: Gpu) -> list[Note]:
    """Low-precision weights the GPU has no tensor cores for: emulated as weight-only, and said so."""
    dtype = w.weights_dtype or "bf16"
    if dtype in FP4_WEIGHTS and not gpu.tflops.fp4:
        return [Note(code="fp4-emulated", message=f"{gpu.name} has no FP4 tensor cores: the {dtype} weights are "
                     "stored and read in 4 bits and the matmuls run in 16 bits (weight-only, as vLLM's Marlin FP4 "
                     "kernels run them before Blackwell); their FLOPs are not halved")]
    if dtype == "fp8" and not gpu.tflops.fp8:
        return [Note(code="fp8-emulated", message=f"{gpu.name} has no FP8 tensor cores: the fp8 weights are stored "
                     "and read in 8 bits and the matmuls run in 16 bits (weight-only, vLLM's Marlin FP8 kernels)")]
    return []


__all__ = ["compute_precision", "precision_notes"]
