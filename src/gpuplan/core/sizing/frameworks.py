"""`workload.framework`: the settings a training framework's own recipes use, filled into the keys a project leaves
unset (explicit keys win). The defaults are data (data/frameworks.toml, each with its source), loaded by
catalog/frameworks.py; docs/project.md lists them. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuplan.schema.project import Workload

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


__all__ = ["FRAMEWORK_KEYS", "FrameworkDefault", "FrameworkDefaults", "apply_framework", "framework_note_text"]
