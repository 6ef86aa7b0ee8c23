"""Loads data/frameworks.toml: each training framework's recipe defaults, validated on load (every default a
workload key with a value that key accepts, a source on every row and default). Errors name the file, the row and
the field."""

from __future__ import annotations

import datetime
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from gpuplan.catalog.loader import _data_text, _read_toml
from gpuplan.core.sizing.frameworks import FRAMEWORK_KEYS, FrameworkDefault, FrameworkDefaults
from gpuplan.errors import CatalogError
from gpuplan.schema.project import Framework, Workload

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


@lru_cache(maxsize=1)
def load_frameworks() -> dict[str, FrameworkDefaults]:
    """The built-in framework defaults (data/frameworks.toml), by framework id."""
    return parse_frameworks(_read_toml(_data_text("frameworks.toml"), PATH))


__all__ = ["load_frameworks", "parse_frameworks"]
