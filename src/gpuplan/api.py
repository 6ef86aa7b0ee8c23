"""The Python API: glue between files and the pure core. The only place the API touches files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan.catalog.loader import (find_gpu, load_activation_table, load_overheads, load_project, parse_project,
                                    resolve_model)
from gpuplan.core.memory import estimate_memory, resolve
from gpuplan.core.params import count_params
from gpuplan.errors import InputError
from gpuplan.schema.project import Hardware, Layout, Project
from gpuplan.schema.result import EstimateResult, HardwareInfo, MemoryOut, ModelInfo
from gpuplan.units import GIB


def estimate(project: Project | dict[str, Any] | str | Path, *, gpu: str | None = None, gpus: int | None = None,
             base_dir: Path | None = None) -> EstimateResult:
    """Peak memory per GPU for a project (a Project, a dict, or a project file path).

    `gpu`/`gpus` override the project's `hardware` section. Without hardware: one GPU, no parallelism."""
    if isinstance(project, (str, Path)):
        project, base_dir = load_project(project)
    elif isinstance(project, dict):
        project = parse_project(project)
    hw = project.hardware or Hardware()
    if gpus is not None:
        try:
            hw = Hardware(gpu=hw.gpu, gpus=gpus, layout=hw.layout if gpus % (hw.layout.tp * hw.layout.pp) == 0
                          else Layout())
        except ValueError as exc:
            raise InputError(["--gpus"], str(exc)) from None
    gpu_id = gpu or hw.gpu
    gpu_row = find_gpu(gpu_id, ["--gpu"] if gpu else ["hardware", "gpu"]) if gpu_id else None

    model = resolve_model(project.model, base_dir)
    arch = model.arch
    w = project.workload
    if arch.kind == "cnn" and w.task in ("lora", "qlora"):
        raise InputError(["workload", "task"], f"{w.task} adapts linear layers of transformers; "
                         f"{arch.model_type} is a CNN", "pretrain, full-finetune, inference")
    if arch.kind == "cnn" and w.gradient_checkpointing:
        raise InputError(["workload", "gradient_checkpointing"], f"transformers has no gradient checkpointing for "
                         f"{arch.model_type}", "false")
    if w.task == "inference" and arch.kind in ("encoder", "vit", "cnn") and w.kv_cache_dtype:
        raise InputError(["workload", "kv_cache_dtype"], f"{arch.model_type} keeps no KV cache")
    params = count_params(arch)
    mem = estimate_memory(arch, params, w, hw.layout, hw.gpus, load_activation_table(), load_overheads())
    r = resolve(arch, w)
    gpu_bytes = int(gpu_row.memory_gib * GIB) if gpu_row else None
    bd = mem.breakdown
    memory = MemoryOut(
        **bd.model_dump(), peak_tensor_bytes=mem.peak_tensor_bytes, reserved_bytes=mem.reserved_bytes,
        device_bytes=mem.device_bytes, peak_phase=mem.peak_phase, phase_peaks_bytes=mem.phase_peaks_bytes,
        dominant=mem.dominant, fits=None if gpu_bytes is None else mem.device_bytes <= gpu_bytes,
        headroom_bytes=None if gpu_bytes is None else gpu_bytes - mem.device_bytes,
    )
    inference_keys = {"batch_size", "context_length", "output_tokens", "weights_dtype", "kv_cache_dtype",
                      "prefill_tokens"}
    training_keys = {"precision", "optimizer", "optimizer_implementation", "micro_batch_size", "global_batch_size",
                     "sequence_length", "target_length", "gradient_checkpointing", "lora", "tokens", "epochs"}
    drop = inference_keys if r.training else training_keys
    workload = {k: v for k, v in w.model_dump(exclude_none=True).items() if k not in drop}
    if r.training:
        workload.update(micro_batch_size=r.batch, sequence_length=r.seq)
        if arch.kind == "encoder-decoder":
            workload["target_length"] = r.target
    else:
        workload.update(batch_size=r.batch, context_length=r.seq, weights_dtype=w.weights_dtype or "bf16")
    return EstimateResult(
        project=project.name,
        model=ModelInfo(name=model.name, origin=model.origin, model_type=arch.model_type, parameters=params.total,
                        trainable_parameters=mem.trainable_parameters, active_parameters=params.active, source=model.source,
                        as_of=model.as_of),
        workload=workload,
        hardware=HardwareInfo(gpu=gpu_row.id if gpu_row else None, gpus=hw.gpus, layout=mem.layout,
                              gpu_memory_bytes=gpu_bytes),
        memory=memory, notes=mem.notes,
    )
