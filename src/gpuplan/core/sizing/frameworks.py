"""`workload.framework`: the settings a training framework's own recipes use, filled into the keys a project leaves
unset (explicit keys win). The defaults are data (data/frameworks.toml, each with its source), loaded by
catalog/frameworks.py; docs/project.md lists them. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuplan.schema.framework import FrameworkCaps
from gpuplan.schema.project import Layout, Workload

#: the workload keys a framework may set, in the order the implied settings are listed
FRAMEWORK_KEYS = ("precision", "optimizer", "optimizer_implementation", "attention", "stack", "gradient_checkpointing",
                  "loss", "activation_offload", "optimizer_in_backward", "packing", "compile")


#: what an unset stack-feature key means (schema/project.py: "None: the framework's default, else off / standard")
_UNSET_MEANS: dict[str, object] = {"loss": "standard", "activation_offload": False, "optimizer_in_backward": False,
                                   "packing": False, "compile": False}


@dataclass(frozen=True)
class FrameworkDefault:
    """One setting a framework's recipes use, and where that is written."""

    key: str
    value: object
    source: str
    #: only for these tasks (empty: every training task)
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class FrameworkDefaults:
    id: str
    source: str
    as_of: str
    defaults: tuple[FrameworkDefault, ...]


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def apply_framework(w: Workload, frameworks: Mapping[str, FrameworkDefaults]) -> tuple[Workload, list[str]]:
    """`w` with the keys its framework sets and the project left unset filled in, and those settings as
    "key value" strings (for the note "framework torchtune implied: loss chunked, ..."). Without a framework, or
    for inference (a training framework's recipe says nothing of serving), `w` unchanged."""
    if w.framework is None or w.task == "inference" or w.framework not in frameworks:
        return w, []
    implied: dict[str, object] = {}
    for d in frameworks[w.framework].defaults:
        if d.key in w.model_fields_set or d.key in implied or (d.tasks and w.task not in d.tasks):
            continue
        if d.value == _UNSET_MEANS.get(d.key, Workload.model_fields[d.key].default):
            continue  # what the unset key means already (off, standard, the schema's default): nothing implied
        implied[d.key] = d.value
    if not implied:
        return w, []
    filled = Workload.model_validate({**w.model_dump(exclude_unset=True), **implied})
    order = {k: i for i, k in enumerate(FRAMEWORK_KEYS)}
    return filled, [f"{k} {_shown(implied[k])}" for k in sorted(implied, key=lambda k: order.get(k, len(order)))]


def framework_note_text(framework: str, implied: list[str]) -> str:
    """The note an estimate shows for what the framework implied."""
    return f"framework {framework} implied: {', '.join(implied)} (explicit workload keys win)"


def default_framework(task: str, kind: str, caps: Mapping[str, FrameworkCaps]) -> str | None:
    """The framework a plan assumes when the project names none: the one whose `default_for` has the task and
    whose `default_kinds` (empty: every kind) has the model's kind; None when none does (inference, a traced
    model, a pre-trained ViT: the project's own script, on `workload.stack`)."""
    for c in caps.values():
        if task in c.default_for and (not c.default_kinds or kind in c.default_kinds):
            return c.id
    return None


def cannot_run(caps: FrameworkCaps, task: str, layout: Layout, n: int) -> str | None:
    """Why `caps`' framework cannot run `layout` on n GPUs for `task` (None: it can)."""
    dp = n // (layout.tp * layout.pp)
    if dp > 1 and layout.zero not in caps.zero:
        runs = ", ".join(f"{z} ({what})" for z, what in sorted(caps.zero.items())) or "none: one GPU only"
        return f"{caps.name} has no ZeRO stage {layout.zero} with several data-parallel ranks (it runs {runs})"
    for degree, tasks, what in ((layout.tp, caps.tp, "tensor"), (layout.pp, caps.pp, "pipeline")):
        if degree > 1 and task not in tasks:
            return f"{caps.name} runs no {what} parallelism for {task}" + (
                f" (only for {', '.join(tasks)})" if tasks else "")
    if layout.pp > 1 and dp > 1 and layout.zero not in caps.pp_zero:
        return f"{caps.name} combines pipeline parallelism with ZeRO {', '.join(map(str, caps.pp_zero))} only"
    if layout.offload != "none" and layout.offload not in caps.offload:
        return f"{caps.name} has no {layout.offload} offload"
    if task == "qlora" and not caps.qlora:
        return f"{caps.name} has no QLoRA"
    return None


def can_run(caps: FrameworkCaps | None, task: str, layout: Layout, n: int) -> bool:
    """Whether the framework runs `layout` on n GPUs for `task` (no capabilities: everything)."""
    return caps is None or cannot_run(caps, task, layout, n) is None


def stack_text(caps: FrameworkCaps | None, task: str, layout: Layout, n: int, stack: str) -> str:
    """The training stack a candidate is timed on, in words: "HF Trainer + PEFT + DeepSpeed ZeRO-3 (eager
    kernels)", "torchtitan + FSDP2 + TP 2 (tuned kernels)"; without a framework "your training script (tuned
    kernels)"."""
    kernels = f"({stack} kernels)"
    if caps is None:
        return f"your training script {kernels}"
    parts = [caps.name]
    if task in ("lora", "qlora") and caps.adapters:
        parts.append(caps.adapters)
    dp = n // (layout.tp * layout.pp)
    if dp > 1:
        parts.append(caps.zero.get(layout.zero, f"ZeRO-{layout.zero}"))
    if layout.tp > 1:
        parts.append(f"TP {layout.tp}")
    if layout.pp > 1:
        parts.append(f"PP {layout.pp}")
    if layout.offload != "none":
        parts.append(f"{layout.offload} offload")
    return " + ".join(parts) + " " + kernels


__all__ = ["FRAMEWORK_KEYS", "FrameworkDefault", "FrameworkDefaults", "apply_framework", "can_run", "cannot_run",
           "default_framework", "framework_note_text", "stack_text"]
