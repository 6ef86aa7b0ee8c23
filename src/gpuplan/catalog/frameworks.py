"""Loads data/frameworks.toml: each training framework's recipe defaults, validated on load (every default a
workload key with a value that key accepts, a source on every row and default). Errors name the file, the row and
the field."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from gpuplan.catalog.loader import _data_text, _read_toml
from gpuplan.core.sizing.frameworks import (
    FRAMEWORK_KEYS,
    FrameworkDefault,
    FrameworkDefaults,
    apply_framework,
    default_framework,
    framework_note_text,
)
from gpuplan.errors import CatalogError, InputError
from gpuplan.schema.estimate import Note
from gpuplan.schema.framework import FrameworkCaps
from gpuplan.schema.project import Framework, Project, Workload

PATH = "gpuplan/data/frameworks.toml"
SCHEMA_VERSIONS = (1,)
_KNOWN = set(Framework.__args__)  # type: ignore[attr-defined]


def _default(row_id: str, i: int, d: Any) -> FrameworkDefault:
    field = f"defaults[{i}]"
    if not isinstance(d, dict) or not {"key", "value", "source"} <= set(d):
        raise CatalogError(PATH, "each default needs key, value and source", row=row_id, field=field)
    if d["key"] not in FRAMEWORK_KEYS:
        raise CatalogError(PATH, f"unknown key {d['key']!r} (allowed: {', '.join(FRAMEWORK_KEYS)})", row=row_id,
                           field=f"{field}.key")
    tasks = tuple(d.get("tasks", ()))
    try:  # the value must be one the workload key accepts
        Workload.model_validate({"task": tasks[0] if tasks else "full-finetune", d["key"]: d["value"]})
    except ValidationError as exc:
        raise CatalogError(PATH, f"{d['key']} = {d['value']!r}: {exc.errors()[0]['msg']}", row=row_id,
                           field=f"{field}.value") from None
    if not isinstance(d["source"], str) or not d["source"].strip():
        raise CatalogError(PATH, "source must be a non-empty string", row=row_id, field=f"{field}.source")
    return FrameworkDefault(key=d["key"], value=d["value"], source=d["source"], tasks=tasks)


def parse_frameworks(data: dict[str, Any]) -> dict[str, FrameworkDefaults]:
    """The rows of a frameworks.toml document, by id."""
    if data.get("schema_version") not in SCHEMA_VERSIONS:
        raise CatalogError(PATH, f"schema_version must be one of {SCHEMA_VERSIONS}", field="schema_version")
    out: dict[str, FrameworkDefaults] = {}
    for n, row in enumerate(data.get("framework", [])):
        row_id = row.get("id", n)
        for key in ("id", "source", "as_of", "defaults"):
            if key not in row:
                raise CatalogError(PATH, f"missing {key}", row=row_id, field=key)
        if row["id"] not in _KNOWN:
            raise CatalogError(PATH, f"unknown framework (allowed: {', '.join(sorted(_KNOWN))})", row=row_id,
                               field="id")
        if row["id"] in out:
            raise CatalogError(PATH, "duplicate id", row=row_id, field="id")
        as_of = row["as_of"]
        if not isinstance(as_of, datetime.date):
            raise CatalogError(PATH, "as_of must be a date (YYYY-MM-DD)", row=row_id, field="as_of")
        defaults = tuple(_default(row["id"], i, d) for i, d in enumerate(row["defaults"]))
        out[row["id"]] = FrameworkDefaults(id=row["id"], source=row["source"], as_of=as_of.isoformat(),
                                           defaults=defaults)
    return out


def _caps(row_id: str, can: Any) -> FrameworkCaps:
    """A row's `can` table as FrameworkCaps; errors name the row and the field."""
    if not isinstance(can, dict):
        raise CatalogError(PATH, "can must be a table", row=row_id, field="can")
    data = dict(can)
    zero = data.get("zero")
    if isinstance(zero, dict):  # TOML keys are strings: {0 = "DDP"} reads as {"0": "DDP"}
        if not all(k in ("0", "1", "2", "3") for k in zero):
            raise CatalogError(PATH, f"zero stages must be 0-3, not {', '.join(sorted(zero))}", row=row_id,
                               field="can.zero")
        data["zero"] = {int(k): v for k, v in zero.items()}
    as_of = data.get("as_of")
    if isinstance(as_of, datetime.date):
        data["as_of"] = as_of.isoformat()
    try:
        caps = FrameworkCaps.model_validate({"id": row_id, **data})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise CatalogError(PATH, f"{loc}: {err['msg']}", row=row_id, field=f"can.{loc}") from None
    if not caps.source.strip():
        raise CatalogError(PATH, "source must be a non-empty string", row=row_id, field="can.source")
    return caps


def parse_capabilities(data: dict[str, Any]) -> dict[str, FrameworkCaps]:
    """The `can` tables of a frameworks.toml document, by framework id (rows without one restrict nothing)."""
    parse_frameworks(data)  # the rows themselves valid first
    out = {row["id"]: _caps(row["id"], row["can"]) for row in data.get("framework", []) if "can" in row}
    taken: dict[str, list[tuple[str, frozenset[str]]]] = {}  # by task: (framework, its kinds; empty: every kind)
    for caps in out.values():  # one default framework per task and model kind
        kinds = frozenset(caps.default_kinds)
        for task in caps.default_for:
            for other, other_kinds in taken.get(task, []):
                if not kinds or not other_kinds or kinds & other_kinds:
                    raise CatalogError(PATH, f"{other} is the default for {task} already", row=caps.id,
                                       field="can.default_for")
            taken.setdefault(task, []).append((caps.id, kinds))
    return out


@lru_cache(maxsize=1)
def load_capabilities() -> dict[str, FrameworkCaps]:
    """What each built-in framework can run (data/frameworks.toml `can` tables), by framework id."""
    return parse_capabilities(_read_toml(_data_text("frameworks.toml"), PATH))


@lru_cache(maxsize=1)
def load_frameworks() -> dict[str, FrameworkDefaults]:
    """The built-in framework defaults (data/frameworks.toml), by framework id."""
    return parse_frameworks(_read_toml(_data_text("frameworks.toml"), PATH))


def with_framework(project: Project, kind: Callable[[], str] | None = None) -> tuple[Project, list[Note]]:
    """The project with its `workload.framework`'s defaults filled in where the file leaves a key unset, and the
    note saying what the framework implied (explicit keys win). `kind` (the model's kind, asked only when needed):
    a training project that names no framework takes the plan's default for its task and model kind
    (`default_for`: HF Trainer + PEFT for fine-tunes, NeMo / Megatron-Core for pre-training a decoder), with a
    note; None: no default (estimate, fit). QLoRA on a framework without it is refused."""
    w = project.workload
    if w.framework is None and (kind is None or w.task == "inference" or project.model.trace):
        return project, []  # nothing to fill in: the frameworks' file is not read
    caps = load_capabilities()
    if w.task == "qlora" and w.framework in caps and not caps[w.framework].qlora:
        raise InputError(["workload", "framework"], f"{caps[w.framework].name} has no QLoRA (task qlora)",
                         ", ".join(k for k, c in caps.items() if c.qlora) + "; or task lora")
    chosen = w.framework or (default_framework(w.task, kind(), caps) if kind is not None else None)
    if chosen is None:
        return project, []
    named = w if w.framework else Workload.model_validate({**w.model_dump(exclude_unset=True), "framework": chosen})
    filled, implied = apply_framework(named, load_frameworks())
    if w.framework:
        notes = [Note(code="framework-defaults", message=framework_note_text(chosen, implied))] if implied else []
    else:
        notes = [Note(code="framework-default", message=f"framework {chosen} ({caps[chosen].name}): the plan's "
                      f"default for {w.task}; set workload.framework to plan another" + (
                          f" (it implied: {', '.join(implied)}; explicit workload keys win)" if implied else ""))]
    return (project.model_copy(update={"workload": filled}) if filled is not w else project), notes


__all__ = ["load_capabilities", "load_frameworks", "parse_capabilities", "parse_frameworks",
           "with_framework"]
