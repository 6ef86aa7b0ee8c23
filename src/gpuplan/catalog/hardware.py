"""The hardware catalog: built-in rows (data/gpus.toml, cpus.toml, platforms.toml, drives.toml, nics.toml)
plus the user's own files (`--catalog FILE`, TOML or YAML with the same tables). A user row replaces the
built-in row with the same id, and the catalog remembers that it did. Every error names the file, the row
and the field."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from gpuplan.catalog import reading
from gpuplan.errors import CatalogError, clip
from gpuplan.schema.catalog import Catalog, Origin, Table
from gpuplan.schema.hardware import CatalogRow, Gpu
from gpuplan.schema.server import Cpu, Drive, Nic, Platform

SCHEMA_VERSIONS = (1,)

#: table name in a catalog file -> (row model, built-in file, plural used by `gpuplan catalog`)
KINDS: dict[str, tuple[type[CatalogRow], str, str]] = {
    "gpu": (Gpu, "gpus.toml", "gpus"),
    "cpu": (Cpu, "cpus.toml", "cpus"),
    "platform": (Platform, "platforms.toml", "platforms"),
    "drive": (Drive, "drives.toml", "drives"),
    "nic": (Nic, "nics.toml", "nics"),
}


def _parse(text: str, path: str) -> dict[str, Any]:
    try:
        data = reading.parse(text, reading.kind_of(path), check=False)
    except reading.Unreadable as exc:
        raise CatalogError(path, exc.message) from None
    if not isinstance(data, dict):
        raise CatalogError(path, "a catalog file is a mapping of tables (gpu, cpu, platform, drive, nic)")
    try:
        reading.check_values(data)
        reading.check_rows(data, list(KINDS))
    except reading.Unreadable as exc:
        row, field = reading.row_error_at(data, exc.loc)
        raise CatalogError(path, exc.message, row=row, field=field) from None
    version = data.get("schema_version", 1)
    if version not in SCHEMA_VERSIONS:
        raise CatalogError(path, f"schema_version {clip(version)} is not one this gpuplan reads "
                                 f"({', '.join(map(str, SCHEMA_VERSIONS))})", field="schema_version")
    return data


def _rows(data: Mapping[str, Any], path: str, kinds: Iterable[str], *, user: bool,
          as_of: datetime.date | None = None) -> dict[str, list[CatalogRow]]:
    out: dict[str, list[CatalogRow]] = {k: [] for k in KINDS}
    if user:
        unknown = [k for k in data if k not in KINDS and k != "schema_version"]
        if unknown:
            from gpuplan.errors import suggest

            hint = suggest(unknown[0], KINDS)
            raise CatalogError(path, f"unknown table {clip(unknown[0])}"
                               + (f"; did you mean {hint[0]!r}?" if hint else "")
                               + f" (allowed: {', '.join(KINDS)})")
    for kind in kinds:
        model = KINDS[kind][0]
        raw = data.get(kind, [])
        if not isinstance(raw, list):
            raise CatalogError(path, f"{kind} must be a list of rows ([[{kind}]] in TOML)", field=kind)
        seen: set[str] = set()
        for i, row in enumerate(raw):
            if not isinstance(row, dict):
                raise CatalogError(path, "a row must be a table of fields", row=i + 1)
            try:
                obj = model.model_validate(row)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(map(str, err["loc"]))
                msg = err["msg"].removeprefix("Value error, ")
                ident = row.get("id")
                raise CatalogError(path, msg, row=ident[:80] if isinstance(ident, str) else i + 1,
                                   field=loc or None) from None
            if obj.id in seen:
                raise CatalogError(path, f"id {clip(obj.id)} appears twice", row=obj.id, field="id")
            if as_of is not None:
                check_dated(obj, path, as_of)
            seen.add(obj.id)
            out[kind].append(obj)
    return out


def check_dated(obj: CatalogRow, path: str, as_of: datetime.date) -> None:
    """A row (and its purchase price) is dated no later than `as_of`, the date the plan is made for: a quote from
    after it is a typo, or a plan asked for a past date with newer quotes."""
    if obj.as_of > as_of:
        raise CatalogError(path, f"as_of {obj.as_of} is after the date the plan is made for ({as_of})", row=obj.id,
                           field="as_of")
    price = getattr(obj, "price", None)
    if price is not None and price.as_of > as_of:
        raise CatalogError(path, f"price.as_of {price.as_of} is after the date the plan is made for ({as_of})",
                           row=obj.id, field="price.as_of")


@lru_cache(maxsize=1)
def _builtin() -> dict[str, list[CatalogRow]]:
    out: dict[str, list[CatalogRow]] = {}
    for kind, (_, fname, _) in KINDS.items():
        path = f"gpuplan/data/{fname}"
        text = resources.files("gpuplan.data").joinpath(fname).read_text(encoding="utf-8")
        out[kind] = _rows(reading.builtin_toml(text), path, [kind], user=False)[kind]
    return out


def _check_aliases(kind: str, rows: dict[str, CatalogRow], origins: dict[str, Origin]) -> None:
    """Every id and alias names one row; a clash is reported in the file of the row that brought it."""
    owner: dict[str, str] = {}
    for row in rows.values():
        for name in (row.id, *row.aliases):
            key = name.lower()
            if key in owner and owner[key] != row.id:
                raise CatalogError(origins[row.id].file, f"{kind} name {clip(name)} would mean both "
                                   f"{clip(owner[key])} and {clip(row.id)}", row=row.id, field="aliases")
            owner[key] = row.id


def load_catalog(user_files: Sequence[str | Path] = (), *, as_of: datetime.date | None = None) -> Catalog:
    """The built-in catalog, with the rows of `user_files` added or replacing built-ins by id. `as_of`: the date
    the plan is made for, which no user row may postdate (None: not checked; the built-in rows are checked by the
    test suite)."""
    builtin = _builtin()
    tables: dict[str, Table[Any]] = {}
    user_rows: list[tuple[str, dict[str, list[CatalogRow]]]] = []
    for f in user_files:
        p = Path(f)
        try:
            text = reading.read_text(p)
        except reading.Unreadable as exc:
            raise CatalogError(str(p), exc.reason or exc.message) from None
        user_rows.append((str(p), _rows(_parse(text, str(p)), str(p), KINDS, user=True, as_of=as_of)))
    for kind, (_, fname, plural) in KINDS.items():
        rows: dict[str, CatalogRow] = {r.id: r for r in builtin[kind]}
        builtin_ids = set(rows)
        origins = {i: Origin(file=f"gpuplan/data/{fname}") for i in rows}
        for path, by_kind in user_rows:
            for r in by_kind[kind]:
                origins[r.id] = Origin(file=path, overrides_builtin=r.id in builtin_ids)
                rows[r.id] = r
        _check_aliases(kind, rows, origins)
        table = cast(Any, Table)[KINDS[kind][0]]  # Table[Gpu], Table[Cpu], ...: the row type is the kind's
        tables[plural] = table(kind=kind, rows=rows, origins=origins)
    from gpuplan.catalog.frameworks import load_capabilities

    return Catalog(**tables, user_files=tuple(str(f) for f in user_files), frameworks=load_capabilities())


@lru_cache(maxsize=1)
def builtin_catalog() -> Catalog:
    return load_catalog()


__all__ = ["KINDS", "Catalog", "Origin", "Table", "builtin_catalog", "load_catalog"]
