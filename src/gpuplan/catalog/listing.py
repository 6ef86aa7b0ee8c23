"""Filtering and rendering catalog rows for `gpuplan catalog` (pure: rows in, rows out)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from gpuplan.catalog.hardware import Catalog, Origin
from gpuplan.catalog.loader import ModelPreset, find_preset, load_presets
from gpuplan.errors import InputError, suggest

_WHERE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(>=|<=|=)\s*(.+?)\s*$")


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, f in model.model_fields.items():
        ann = f.annotation
        sub = next((a for a in getattr(ann, "__args__", (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)),
                   None)
        if sub is not None:
            out += _fields(sub, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def _get(row: Any, path: str) -> Any:
    v = row
    for part in path.split("."):
        v = getattr(v, part, None) if not isinstance(v, dict) else v.get(part)
        if v is None:
            return None
    return v


def filter_rows(rows: list[Any], where: list[str], kind: str) -> list[Any]:
    """Rows matching every FIELD=VALUE / FIELD>=N / FIELD<=N condition. `=` on a list field means 'contains';
    text compares case-insensitively."""
    if not rows:
        return rows
    known = _fields(type(rows[0]))
    for cond in where:
        m = _WHERE.match(cond)
        if not m:
            raise InputError(["--where"], f"{cond!r} is not a condition", "FIELD=VALUE, FIELD>=NUMBER, FIELD<=NUMBER")
        field, op, value = m.groups()
        if field not in known:
            hint = suggest(field, known)
            raise InputError(["--where"], f"{kind} rows have no field {field!r}"
                             + (f"; did you mean {' or '.join(map(repr, hint))}?" if hint else ""),
                             None if len(known) > 30 else ", ".join(known))
        if op != "=":
            try:
                number = float(value)
            except ValueError:
                raise InputError(["--where"], f"{op} needs a number, not {value!r}") from None
            rows = [r for r in rows if isinstance(_get(r, field), (int, float)) and not isinstance(_get(r, field), bool)
                    and (_get(r, field) >= number if op == ">=" else _get(r, field) <= number)]
            continue
        rows = [r for r in rows if _matches(_get(r, field), value)]
    return rows


def _matches(v: Any, value: str) -> bool:
    if v is None:
        return value.lower() in ("none", "null", "")
    if isinstance(v, bool):
        return value.lower() in (("true", "yes", "1") if v else ("false", "no", "0"))
    if isinstance(v, (list, tuple)):
        return any(_matches(x, value) for x in v)
    if isinstance(v, (int, float)):
        try:
            return float(v) == float(value)
        except ValueError:
            return False
    return str(v).lower() == value.lower()


def row_json(row: BaseModel, origin: Origin) -> dict[str, Any]:
    out = row.model_dump(mode="json")
    out["origin"] = origin.model_dump()
    return out


def catalog_rows(catalog: Catalog, kind: str, row_id: str | None = None, where: Sequence[str] = ()) -> list[Any]:
    """What `gpuplan catalog KIND [ID] [--where ...]` lists: one row by id or alias, or the rows matching every
    condition."""
    table = catalog.table(kind)
    return [table.find(row_id, [kind])] if row_id else filter_rows(list(table.rows.values()), list(where), kind)


def catalog_json(catalog: Catalog, kind: str, row_id: str | None = None,
                 where: Sequence[str] = ()) -> list[dict[str, Any]]:
    """What `gpuplan catalog KIND [ID] [--where ...] --json` prints and `GET /api/catalog/...` returns: the rows
    of catalog_rows, each with where it came from."""
    origins = catalog.table(kind).origins
    return [row_json(r, origins[r.id]) for r in catalog_rows(catalog, kind, row_id, where)]


def model_rows(row_id: str | None = None) -> list[ModelPreset]:
    """The built-in model presets, or one by id or alias."""
    return [find_preset(row_id, ["models"])] if row_id else list(load_presets().values())


def models_json(row_id: str | None = None) -> list[dict[str, Any]]:
    """The presets of model_rows, without their config, each with its origin."""
    origin = {"file": "gpuplan/data/models.toml", "overrides_builtin": False}
    return [{**p.model_dump(mode="json", exclude={"config"}), "origin": origin} for p in model_rows(row_id)]


__all__ = ["catalog_json", "catalog_rows", "filter_rows", "model_rows", "models_json", "row_json"]
