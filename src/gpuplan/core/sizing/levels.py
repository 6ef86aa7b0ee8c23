"""From the parts of each phase to the three levels a GPU shows: the tensor peak (max_memory_allocated, every
block rounded as the caching allocator rounds it), the allocator's reserve and the device total with the CUDA
context, cuBLAS and NCCL. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable

from gpuplan.schema.estimate import MemoryBreakdown, MemoryEstimate, Note, Overheads
from gpuplan.schema.project import Layout
from gpuplan.schema.result import MemoryOut

ALLOC_BLOCK = 512  # the CUDA caching allocator rounds every block to 512 bytes


def round_block(n: float) -> int:
    return int(math.ceil(n / ALLOC_BLOCK) * ALLOC_BLOCK)


def _levels(phases: dict[str, dict[str, float]], kv: float, oh: Overheads, gpus: int, lay: Layout,
            training: bool) -> tuple[dict[str, dict[str, int]], dict[str, int], str, int, int, int]:
    """(parts rounded to the allocator's blocks, each phase's total, the peak phase, the tensor peak, the
    reserve, the device total): plain arithmetic, shared by the estimate and the search."""
    rounded = {name: {k: round_block(v) for k, v in parts.items()} for name, parts in phases.items()}
    kv_r = round_block(kv)
    totals = {name: sum(parts.values()) + kv_r for name, parts in rounded.items()}
    peak_phase = max(totals, key=lambda k: totals[k])
    parts = rounded[peak_phase]
    peak = (parts["weights"] + parts["gradients"] + parts["optimizer"] + parts["activations"] + kv_r
            + parts["other"] + parts.get("reference", 0))
    # the caching allocator's reserve grows with what is allocated and freed in many sizes within a step
    # (activations, temporaries); weights, optimizer states, a preallocated KV cache and gradients (the same
    # sizes every step, so their blocks are reused) are not what fragments it
    reserved, device = reserve_and_device(peak, parts["activations"] + parts["other"], oh, gpus, lay, training)
    return rounded, totals, peak_phase, peak, reserved, device


def reserve_and_device(peak: int, churn: int, oh: Overheads, gpus: int, lay: Layout,
                        training: bool) -> tuple[int, int]:
    """The allocator's reserve above a tensor peak of which `churn` bytes are allocated and freed in many sizes
    within a step, and the device total with the CUDA context and NCCL's communicators."""
    frac = oh.allocator_fraction_training if training else oh.allocator_fraction_inference
    reserved = reserved_bytes(peak, churn, frac, oh.allocator_rounding_bytes, oh.cublas_workspace_bytes)
    outside = outside_bytes(oh.cuda_context_bytes, oh.nccl_bytes_per_communicator, gpus, lay.tp, lay.pp)
    return reserved, reserved + outside


def reserved_bytes(peak: int, churn: int, fraction: float, rounding: int, cublas: int) -> int:
    """What the caching allocator reserves above a tensor peak of which `churn` bytes are allocated and freed in many
    sizes within a step: `fraction` of the churn, cuBLAS's workspace (it comes from the caching allocator too,
    measured on an H200: benchmarks/device/), in segments of `rounding` bytes."""
    return reserved_bytes_of(((peak, churn),), fraction, rounding, cublas)[0]


def reserved_bytes_of(peaks: Iterable[tuple[int, int]], fraction: float, rounding: int, cublas: int,
                      outside: int = 0) -> list[int]:
    """`reserved_bytes` of each (tensor peak, churn), the overheads read once (a search's layout has many), plus
    `outside` (`outside_bytes`: the device total)."""
    ceil = math.ceil  # an int (no int() call: it is one per configuration of a search)
    return [ceil((peak + fraction * churn + cublas) / rounding) * rounding + outside for peak, churn in peaks]


def outside_bytes(context: int, per_communicator: int, gpus: int, tp: int, pp: int) -> int:
    """What a GPU holds outside the caching allocator: the CUDA context and NCCL's communicators (one per process
    group: data, tensor and pipeline parallel)."""
    communicators = (1 if gpus > 1 else 0) + (1 if tp > 1 else 0) + (1 if pp > 1 else 0)
    return context + communicators * per_communicator


def finish(phases: dict[str, dict[str, float]], oh: Overheads, gpus: int, lay: Layout, *, training: bool,
           notes: list[Note], kv: float, trainable: int, load: tuple[int, int] = (0, 0)) -> MemoryEstimate:
    """The estimate of a step's `phases`: its levels, the peak phase's breakdown; `load`: the tensor peak and the
    device total of loading the checkpoint, when the caller knows them (else 0)."""
    rounded, totals, peak_phase, peak, reserved, device = _levels(phases, kv, oh, gpus, lay, training)
    parts = rounded[peak_phase]
    bd = MemoryBreakdown(
        weights_bytes=parts["weights"], gradients_bytes=parts["gradients"], optimizer_bytes=parts["optimizer"],
        activations_bytes=parts["activations"], kv_cache_bytes=round_block(kv), other_bytes=parts["other"],
        reference_bytes=parts.get("reference", 0),
    )
    names = {"weights_bytes": "weights", "gradients_bytes": "gradients", "optimizer_bytes": "optimizer states",
             "activations_bytes": "activations", "kv_cache_bytes": "KV cache", "other_bytes": "temporaries",
             "reference_bytes": "reference model"}
    dump = bd.model_dump()
    dominant = names[max(dump, key=lambda k: dump[k])]
    phase_name = "backward" if peak_phase.startswith("backward") else peak_phase
    return MemoryEstimate(
        breakdown=bd, peak_phase=phase_name, phase_peaks_bytes=totals,
        trainable_parameters=trainable, peak_tensor_bytes=peak, reserved_bytes=reserved, device_bytes=device,
        dominant=dominant, gpus=gpus,
        layout={"zero": lay.zero, "tp": lay.tp, "pp": lay.pp, "dp": max(gpus // (lay.tp * lay.pp), 1),
                "offload": lay.offload},
        notes=notes, load_peak_bytes=load[0], load_device_bytes=load[1],
    )


def memory_out(m: MemoryEstimate, cap: int | None) -> MemoryOut:
    """An estimate in the JSON's terms, checked against `cap` bytes of GPU memory (None: no GPU given)."""
    top = max(m.device_bytes, m.load_device_bytes)  # the step, or loading the checkpoint, whichever needs more
    return MemoryOut(**m.breakdown.model_dump(), peak_tensor_bytes=m.peak_tensor_bytes, reserved_bytes=m.reserved_bytes,
                     device_bytes=m.device_bytes, peak_phase=m.peak_phase, phase_peaks_bytes=m.phase_peaks_bytes,
                     dominant=m.dominant, load_peak_bytes=m.load_peak_bytes, load_device_bytes=m.load_device_bytes,
                     fits=None if cap is None else top <= cap, headroom_bytes=None if cap is None else cap - top)


#: the names engine_memory.py and serving_memory.py import, as they were spelled before these became public (to go once
#: they read the public names)
_finish, _reserve_and_device, _round = finish, reserve_and_device, round_block

__all__ = ["ALLOC_BLOCK", "finish", "memory_out", "outside_bytes", "reserve_and_device", "reserved_bytes",
           "reserved_bytes_of", "round_block"]
