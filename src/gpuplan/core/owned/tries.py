"""The changes worth trying when a job does not fit a machine's GPUs, as data: `gpuplan check` estimates them to
say what to change, `gpuplan plan --have` to say how the team's own server can do the job (issue #13: every fix
the estimator confirms, not a fixed list). Each is one project on one layout and GPU count; nothing is estimated
here. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuplan.schema.project import Layout, Project


@dataclass(frozen=True)
class Try:
    """One change: the project with it, on `gpus` GPUs with `layout`."""

    #: a stable id for programs ("adamw-8bit", "zero-3-offload-optimizer", "gpus-8", ...)
    code: str
    #: the change, for people
    change: str
    project: Project
    gpus: int
    layout: Layout
    #: needs hardware the machine lacks (more GPUs of its kind)
    needs_hardware: bool = False
    #: alters what is trained or how (numerics, method, sequence), not only where the bytes live
    changes_recipe: bool = False
    #: workload keys the change sets, with their new values
    workload_changes: dict[str, object] = field(default_factory=dict)


def _with(project: Project, **update: object) -> Project:
    return project.model_copy(update={"workload": project.workload.model_copy(update=update)})


def _setting(code: str, change: str, project: Project, n: int, layout: Layout, recipe: bool,
             **update: object) -> Try:
    return Try(code=code, change=change, project=_with(project, **update), gpus=n, layout=layout,
               changes_recipe=recipe, workload_changes=dict(update))


def layout_tries(project: Project, n: int, layout: Layout) -> list[Try]:
    """Where the bytes live, the recipe unchanged: ZeRO-3 over the GPUs, then CPU offload of the optimizer states
    (DeepSpeed ZeRO-Offload) or of the parameters too (ZeRO-Infinity). Training only."""
    if project.workload.task == "inference" or layout.tp * layout.pp != 1:
        return []
    out: list[Try] = []
    if n > 1 and layout.zero < 3:
        out.append(Try(code="zero-3", change=f"ZeRO-3 (FSDP) over the {n} GPUs", project=project, gpus=n,
                       layout=Layout(zero=3)))
    if layout.offload == "none":
        out.append(Try(code="zero-3-offload-optimizer", change="ZeRO-3 with the optimizer states offloaded to CPU RAM",
                       project=project, gpus=n, layout=Layout(zero=3, offload="optimizer")))
        out.append(Try(code="zero-3-offload-params",
                       change="ZeRO-3 with parameters and optimizer states offloaded to CPU RAM", project=project,
                       gpus=n, layout=Layout(zero=3, offload="params")))
    return out


#: the QLoRA try's label: it answers another question than the project's (a different task, a different model)
QLORA_INSTEAD = "QLoRA instead (a different task: a 4-bit frozen base with adapters)"


def stack_tries(project: Project, n: int, layout: Layout) -> list[Try]:
    """The training stack's own memory savers: an 8-bit optimizer, pure bf16, both, half the sequence."""
    w = project.workload
    out: list[Try] = []
    eight_bit = w.optimizer == "adamw"
    pure = w.task in ("full-finetune", "pretrain") and w.precision in ("bf16-mixed", "fp16-mixed", "fp32")
    if eight_bit:
        out.append(_setting("adamw-8bit", "8-bit AdamW (bitsandbytes)", project, n, layout, True,
                            optimizer="adamw-8bit"))
    if pure:
        out.append(_setting("pure-bf16", "pure bf16: bf16 weights, gradients and optimizer states", project, n,
                            layout, True, precision="bf16"))
    if eight_bit and pure:
        out.append(_setting("pure-bf16-adamw-8bit", "pure bf16 with 8-bit AdamW", project, n, layout, True,
                            precision="bf16", optimizer="adamw-8bit"))
    if w.sequence_length and w.sequence_length >= 512:
        half = w.sequence_length // 2
        out.append(_setting("half-sequence", f"sequences of {half} tokens instead of {w.sequence_length}", project,
                            n, layout, True, sequence_length=half))
    return out


def _training_tries(project: Project, n: int, layout: Layout, kind: str) -> list[Try]:
    w = project.workload
    out: list[Try] = []
    if not w.gradient_checkpointing and kind != "cnn":
        out.append(_setting("gradient-checkpointing", "turn on gradient checkpointing", project, n, layout, False,
                            gradient_checkpointing=True))
    if w.micro_batch_size > 1:
        out.append(_setting("micro-batch-1", "micro-batch 1 (gradient accumulation keeps the global batch)", project,
                            n, layout, False, micro_batch_size=1,
                            global_batch_size=w.global_batch_size or w.micro_batch_size * n))
    zero = [t for t in layout_tries(project, n, layout) if t.code == "zero-3"]
    out += zero
    out += stack_tries(project, n, layout)
    out += [t for t in layout_tries(project, n, layout) if t.code != "zero-3"]
    if w.task in ("lora", "full-finetune") and kind not in ("cnn", "vit"):
        # another task, not the project's: tried last, and said so
        out.append(_setting("qlora", QLORA_INSTEAD, project, n, layout, True, task="qlora"))
    return out


def _together(project: Project, tries: list[Try], n: int, layout: Layout) -> Try | None:
    """Every setting change at once, on this machine (ZeRO-3 over several GPUs), the method kept (QLoRA is another
    method, tried alone); None when they do not combine."""
    merged: dict[str, object] = {}
    settings = [t for t in tries if t.workload_changes and "task" not in t.workload_changes]
    for t in settings:
        merged.update(t.workload_changes)
    if len(settings) < 2:
        return None
    w = project.workload
    try:
        together = type(w).model_validate({**w.model_dump(), **merged})
    except ValueError:  # the changes do not combine (a task that takes no such precision, say)
        return None
    lay = Layout(zero=3) if n > 1 and layout.tp * layout.pp == 1 else layout
    return Try(code="all-together", change="all of these together",
               project=project.model_copy(update={"workload": together}), gpus=n, layout=lay, changes_recipe=True,
               workload_changes=merged)


def _inference_tries(project: Project, n: int, layout: Layout) -> list[Try]:
    w = project.workload
    out: list[Try] = []
    if w.kv_cache_dtype != "fp8":
        out.append(_setting("kv-fp8", "an fp8 KV cache", project, n, layout, True, kv_cache_dtype="fp8"))
    if w.weights_dtype in (None, "fp32", "bf16", "fp16"):
        out.append(_setting("weights-fp8", "fp8 weights", project, n, layout, True, weights_dtype="fp8"))
        out.append(_setting("weights-int4", "int4 weights (AWQ/GPTQ)", project, n, layout, True,
                            weights_dtype="int4"))
    if w.batch_size > 1:
        half = math.ceil(w.batch_size / 2)
        out.append(_setting("half-batch", f"{half} concurrent requests instead of {w.batch_size}", project, n,
                            layout, False, batch_size=half))
    return out


def more_gpu_tries(project: Project, n: int) -> list[Try]:
    """The same job on 2, 4 or 8 GPUs of the machine's kind (more than it has): ZeRO-3 for training, tensor
    parallel for serving."""
    serving = project.workload.task == "inference"
    return [Try(code=f"gpus-{k}", change=f"{k} GPUs like these, tensor parallel {k}" if serving
                else f"{k} GPUs like these with ZeRO-3", project=project, gpus=k,
                layout=Layout(tp=k) if serving else Layout(zero=3), needs_hardware=True) for k in (2, 4, 8) if k > n]


def memory_tries(project: Project, n: int, layout: Layout, kind: str) -> list[Try]:
    """Single changes that lower the memory per GPU on `n` GPUs with `layout` (the model's `kind`: cnn, vit, ...):
    the workload's settings and layouts first, every setting change at once, then more GPUs of the same kind."""
    if project.workload.task == "inference":
        return _inference_tries(project, n, layout) + more_gpu_tries(project, n)
    tries = _training_tries(project, n, layout, kind)
    together = _together(project, tries, n, layout)
    return tries + ([together] if together is not None else []) + more_gpu_tries(project, n)


__all__ = ["Try", "layout_tries", "memory_tries", "more_gpu_tries", "stack_tries"]
