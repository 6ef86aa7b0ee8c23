"""`gpuplan estimate` as one pure function: for a project's model on one GPU type and layout (or none), the peak
memory per GPU with its breakdown, the FLOPs, and the training time or the serving speed. The API resolves the
model and finds the GPU row; everything computed here is arithmetic over typed data."""

from __future__ import annotations

import datetime

from gpuplan.core.sizing.flops import forward_flops, training_flops
from gpuplan.core.sizing.memory import estimate_memory, memory_out, resolve
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.project import training_tokens
from gpuplan.core.sizing.speed import estimate_inference_speed, estimate_training_speed, tokens_per_sample
from gpuplan.errors import InputError
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Note, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Hardware, Project, Workload
from gpuplan.schema.result import EstimateResult, HardwareInfo, ModelInfo
from gpuplan.schema.speed import ComputeOut, InferenceSpeed, SpeedModel, TimeEstimate
from gpuplan.units import GIB

#: workload keys an estimate echoes only for serving, and only for training
INFERENCE_KEYS = frozenset({"batch_size", "context_length", "output_tokens", "weights_dtype", "kv_cache_dtype",
                            "prefill_tokens", "target_latency_s"})
TRAINING_KEYS = frozenset({"precision", "optimizer", "optimizer_implementation", "micro_batch_size",
                           "global_batch_size", "sequence_length", "target_length", "gradient_checkpointing", "lora",
                           "tokens", "epochs", "tf32"})


def check_workload(arch: ModelArch, w: Workload) -> None:
    """InputError when the workload asks what the architecture cannot do."""
    if arch.kind == "cnn" and w.task in ("lora", "qlora"):
        raise InputError(["workload", "task"], f"{w.task} adapts linear layers of transformers; "
                         f"{arch.model_type} is a CNN", "pretrain, full-finetune, inference")
    if arch.kind == "cnn" and w.gradient_checkpointing:
        raise InputError(["workload", "gradient_checkpointing"], f"transformers has no gradient checkpointing for "
                         f"{arch.model_type}", "false")
    if w.task == "inference" and arch.kind in ("encoder", "vit", "cnn") and w.kv_cache_dtype:
        raise InputError(["workload", "kv_cache_dtype"], f"{arch.model_type} keeps no KV cache")


def _training(project: Project, arch: ModelArch, params: ParamCount, mem: MemoryEstimate, hw: Hardware,
              gpu: Gpu | None, speed: SpeedModel, table: ActivationTable,
              notes: list[Note]) -> tuple[ComputeOut, TimeEstimate | None]:
    w = project.workload
    r = resolve(arch, w)
    total, how = training_tokens(project, tokens_per_sample(arch, w))
    fwd = forward_flops(arch, params, r.seq, target=r.target, eager=w.attention == "eager", image_size=r.seq)
    tf = training_flops(fwd, frozen_base=w.task in ("lora", "qlora"), checkpointing=w.gradient_checkpointing)
    compute = ComputeOut(flops_per_token=tf.model_per_token, hardware_flops_per_token=tf.hardware_per_token,
                         flops_total=tf.model_per_token * total if total else None)
    time = None
    if gpu is not None:
        sp = estimate_training_speed(arch, params, w, hw.layout, hw.gpus, gpu, speed, table,
                                     trainable=mem.trainable_parameters, total_tokens=total)
        time, compute = sp.time, sp.compute
        notes += sp.notes
        if how and time is not None:
            time = time.model_copy(update={"assumptions": [*time.assumptions, f"training tokens: {how}"]})
    if total is None:
        notes.append(Note(code="no-training-length", message="give workload.tokens, or workload.epochs and "
                          "data.samples, for the run's FLOPs, wall time and GPU-hours"))
    return compute, time


def _serving(w: Workload, arch: ModelArch, params: ParamCount, mem: MemoryEstimate, hw: Hardware, gpu: Gpu | None,
             speed: SpeedModel, notes: list[Note]) -> tuple[ComputeOut, InferenceSpeed | None]:
    r = resolve(arch, w)
    fwd = forward_flops(arch, params, r.seq, eager=w.attention == "eager", image_size=r.seq)
    compute = ComputeOut(flops_per_token=fwd.forward / fwd.tokens, hardware_flops_per_token=fwd.forward / fwd.tokens,
                         flops_total=None)
    if gpu is None:
        return compute, None
    # memory caps the batch a latency target may grow to: the KV cache per request must fit
    max_batch = None
    if mem.breakdown.kv_cache_bytes and r.batch:
        free = gpu.memory_gib * GIB - (mem.device_bytes - mem.breakdown.kv_cache_bytes)
        max_batch = max(int(free // (mem.breakdown.kv_cache_bytes / r.batch)), 1)
    sp = estimate_inference_speed(arch, params, w, hw.layout, hw.gpus, gpu, speed, max_batch=max_batch)
    notes += sp.notes
    return sp.compute, sp.inference


def shown_workload(arch: ModelArch, w: Workload) -> dict[str, object]:
    """The workload as the estimate ran it: the keys of its task, with the model's defaults filled in."""
    r = resolve(arch, w)
    drop = INFERENCE_KEYS if r.training else TRAINING_KEYS
    workload = {k: v for k, v in w.model_dump(exclude_none=True).items() if k not in drop}
    if r.training:
        workload.update(micro_batch_size=r.batch, sequence_length=r.seq)
        if arch.kind == "encoder-decoder":
            workload["target_length"] = r.target
    else:
        workload.update(batch_size=r.batch, context_length=r.seq, weights_dtype=w.weights_dtype or "bf16")
    return workload


def estimate(project: Project, arch: ModelArch, hw: Hardware, gpu: Gpu | None, *, model_name: str, origin: str,
             source: str | None, as_of: datetime.date | None, speed: SpeedModel, table: ActivationTable,
             overheads: Overheads, notes: list[Note]) -> EstimateResult:
    """Memory, FLOPs and speed of `project` (its model resolved as `arch`) on `hw` with `gpu` (None: memory and
    FLOPs only). `notes` come first (the catalog's, say)."""
    w = project.workload
    check_workload(arch, w)
    params = count_params(arch)
    mem = estimate_memory(arch, params, w, hw.layout, hw.gpus, table, overheads)
    notes = [*notes, *mem.notes]
    time = inference = None
    if w.task != "inference":
        compute, time = _training(project, arch, params, mem, hw, gpu, speed, table, notes)
    else:
        compute, inference = _serving(w, arch, params, mem, hw, gpu, speed, notes)
    gpu_bytes = int(gpu.memory_gib * GIB) if gpu else None
    return EstimateResult(
        project=project.name,
        model=ModelInfo(name=model_name, origin=origin, model_type=arch.model_type, parameters=params.total,
                        trainable_parameters=mem.trainable_parameters, active_parameters=params.active, source=source,
                        as_of=as_of),
        workload=shown_workload(arch, w),
        hardware=HardwareInfo(gpu=gpu.id if gpu else None, gpus=hw.gpus, layout=mem.layout, gpu_memory_bytes=gpu_bytes),
        memory=memory_out(mem, gpu_bytes), compute=compute, time=time, inference=inference, notes=notes,
    )


__all__ = ["INFERENCE_KEYS", "TRAINING_KEYS", "check_workload", "estimate", "shown_workload"]
