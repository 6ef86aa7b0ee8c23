"""A traced model (`model.trace`) on real hardware: memory per GPU and time per step from the trace's exact
numbers. Pure: the trace result, the GPU row and the assumptions in.

Only data parallelism is modelled for a traced model (each GPU runs the factory's batch; DDP keeps a gradient
bucket copy and all-reduces the gradients): gpuplan does not know the model's layers, so it cannot shard or
split it.

- memory: the traced tensor peak + the allocator's reserve (a fraction of what a step allocates and frees:
  the trace's activations and temporaries) + CUDA context and cuBLAS workspace; with more than one GPU, NCCL
  and DDP's bucket copy of the gradients;
- time per step: traced FLOPs at the generation's matmul efficiency for the precision, plus passes over the
  activations at the memory bandwidth, plus the optimizer's traffic, plus the gradient all-reduce beyond what
  overlaps with backward.
"""

from __future__ import annotations

from gpuplan.core.sizing.rates import _base_efficiency, link_gbs, peak_flops
from gpuplan.schema.estimate import Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.result import MemoryOut
from gpuplan.schema.speed import SpeedModel
from gpuplan.schema.trace import CustomTraceResult

GB = 1e9


def traced_device_bytes(tr: CustomTraceResult, gpus: int, oh: Overheads) -> tuple[int, int]:
    """(reserved, device) bytes per GPU for `gpus` data-parallel replicas."""
    frac = oh.allocator_fraction_training if tr.training else oh.allocator_fraction_inference
    reserved = tr.peak_bytes + frac * tr.other_bytes + oh.cublas_workspace_bytes  # cuBLAS's, from the allocator
    if gpus > 1 and tr.training:
        reserved += tr.gradients_bytes  # DDP's gradient buckets (gradient_as_bucket_view=False)
    device = reserved + oh.cuda_context_bytes
    if gpus > 1:
        device += oh.nccl_bytes_per_communicator
    return int(reserved), int(device)


def traced_step_seconds(tr: CustomTraceResult, gpu: Gpu, gpus: int, sm: SpeedModel,
                        gpus_per_node: int | None = None) -> tuple[float, dict[str, float]]:
    """Seconds of one step (each GPU its own batch) and its parts."""
    gen = sm.generations[gpu.generation]
    prm = sm.params
    peak = peak_flops(gpu, tr.precision)
    matmul = tr.flops_per_step / (peak * _base_efficiency(gen, tr.precision))
    bw = gpu.memory_bandwidth_gbs * GB * gen.bandwidth
    elementwise = prm.elementwise_passes * tr.other_bytes / bw
    optimizer = 2 * (tr.parameters_bytes + tr.gradients_bytes + tr.optimizer_bytes) / bw if tr.training else 0.0
    comm = 0.0
    if gpus > 1 and tr.training:
        node = gpus_per_node or min(gpus, 8)
        link = link_gbs(gpu, sm, gpus, node) * GB
        allreduce = 2 * (gpus - 1) / gpus * tr.gradients_bytes / link
        window = matmul * 2 / 3
        comm = max(allreduce - window, 0.0) + (1 - prm.comm_overlap) * min(allreduce, window)
    parts = {"matmul": matmul, "elementwise": elementwise, "optimizer": optimizer, "communication": comm}
    return sum(parts.values()), parts


def traced_memory_out(tr: CustomTraceResult, reserved: int, device: int, cap: int | None) -> MemoryOut:
    """The trace's memory per GPU in `estimate`'s terms (`cap`: the GPU's memory, None when there is no GPU)."""
    parts = {"weights": tr.parameters_bytes, "gradients": tr.gradients_bytes, "optimizer states": tr.optimizer_bytes,
             "activations": tr.other_bytes}
    return MemoryOut(weights_bytes=tr.parameters_bytes, gradients_bytes=tr.gradients_bytes,
                     optimizer_bytes=tr.optimizer_bytes, activations_bytes=tr.other_bytes, kv_cache_bytes=0,
                     other_bytes=0, peak_tensor_bytes=tr.peak_bytes, reserved_bytes=reserved, device_bytes=device,
                     peak_phase=max(tr.phase_peaks, key=tr.phase_peaks.__getitem__) if tr.phase_peaks else "forward",
                     phase_peaks_bytes=tr.phase_peaks, dominant=max(parts, key=parts.__getitem__),
                     fits=None if cap is None else device <= cap, headroom_bytes=None if cap is None else cap - device)


__all__ = ["traced_device_bytes", "traced_memory_out", "traced_step_seconds"]
