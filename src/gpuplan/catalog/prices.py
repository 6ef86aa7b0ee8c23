"""Price lists (data/prices.toml: cloud GPU-hours, managed dedicated servers) and cost assumptions
(data/tco.toml), plus the user's quotes (`--prices FILE`, CSV or YAML). Every error names the file, the row and
the field."""

from __future__ import annotations

import csv
import datetime
import io
import math
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuplan.catalog import reading
from gpuplan.catalog.loader import SCHEMA_VERSIONS, read_toml
from gpuplan.catalog.price_rules import check_reserved_below_on_demand
from gpuplan.core.search.evidence import STALE_DAYS
from gpuplan.errors import CatalogError, clip, suggest
from gpuplan.schema.prices import Assumption, CloudPrice, ClusterOffer, HostingOffer, PriceBook

TABLES: dict[str, type[CloudPrice] | type[HostingOffer]] = {"cloud": CloudPrice, "hosting": HostingOffer}
#: the tables a YAML or TOML price file may also have: a provider's multi-node cluster offer (data/clusters.toml)
EXTRA_TABLES: dict[str, type[ClusterOffer]] = {"cluster": ClusterOffer}


def _rows(table: str, raw: Any, path: str, first_row: int = 1, as_of: datetime.date | None = None) -> list[Any]:
    """The validated rows of one table; with `as_of` (the date the plan is made for), none may be dated after it."""
    model = TABLES[table] if table in TABLES else EXTRA_TABLES[table]
    if not isinstance(raw, list):
        raise CatalogError(path, f"{table} must be a list of rows", field=table)
    out = []
    for i, row in enumerate(raw):
        if not isinstance(row, dict):
            raise CatalogError(path, "a row must be a table of fields", row=i + first_row)
        try:
            out.append(model.model_validate(row))
        except ValidationError as exc:
            err = exc.errors()[0]
            ident = row.get("id") or row.get("provider")
            raise CatalogError(path, err["msg"].removeprefix("Value error, "),
                               row=ident[:80] if isinstance(ident, str) else i + first_row,
                               field=".".join(map(str, err["loc"])) or None) from None
        if as_of is not None and out[-1].as_of > as_of:
            raise CatalogError(path, f"as_of {out[-1].as_of} is after the date the plan is made for ({as_of})",
                               row=i + first_row, field="as_of")
    return out


#: the columns a price CSV may have: `table`, then the fields of the cloud and hosting rows
CSV_COLUMNS = ("table", *sorted(set(CloudPrice.model_fields) | set(HostingOffer.model_fields)))


def _csv_header(fields: Sequence[str] | None, path: str) -> None:
    if not fields or "table" not in fields:
        raise CatalogError(path, "a price CSV needs a 'table' column (cloud or hosting) and the fields of that table")
    for name in fields:
        if name.strip() and name.strip() not in CSV_COLUMNS:
            hint = suggest(name.strip(), CSV_COLUMNS)
            raise CatalogError(path, f"unknown column {clip(name)}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                               + f" (allowed: {', '.join(CSV_COLUMNS)})", row=1, field=name.strip()[:80])


def _csv_cell(key: str, value: str, path: str, line: int) -> Any:
    if key == "includes":
        return [x.strip() for x in value.split(";") if x.strip()]
    try:
        number = float(value)
    except ValueError:
        return value.strip()
    if not math.isfinite(number):
        raise CatalogError(path, f"must be a finite number, not {clip(value.strip())}", row=line, field=key)
    return value.strip()


def _csv_rows(text: str, path: str) -> dict[str, list[dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    out: dict[str, list[dict[str, Any]]] = {"cloud": [], "hosting": []}
    try:
        _csv_header(reader.fieldnames, path)
        for i, row in enumerate(reader, start=2):  # row 1 is the header
            if i > reading.MAX_ROWS + 1:
                raise CatalogError(path, f"more than {reading.MAX_ROWS:,} rows: a price file has at most "
                                   f"{reading.MAX_ROWS:,} (split it into several files, each with its own --prices)")
            if None in row:
                raise CatalogError(path, f"{len(row[None])} more cell(s) than the header has columns", row=i)
            table = (row.pop("table") or "").strip()
            if table not in TABLES:
                hint = suggest(table, TABLES)
                raise CatalogError(path, f"table {clip(table)} is not cloud or hosting"
                                   + (f"; did you mean {hint[0]!r}?" if hint else ""), row=i, field="table")
            clean = {k.strip(): _csv_cell(k.strip(), v, path, i) for k, v in row.items()
                     if v is not None and v.strip() != ""}
            if "" in clean:
                raise CatalogError(path, f"a value ({clip(clean[''])}) in a column with no name", row=i)
            clean["_row"] = i
            out[table].append(clean)
    except csv.Error as exc:
        raise CatalogError(path, f"not valid CSV: {clip(str(exc))}", row=reader.line_num or None) from None
    return out


def _parse_user(path: Path, as_of: datetime.date | None) -> tuple[list[CloudPrice], list[HostingOffer]]:
    name = str(path)
    try:
        text = reading.read_text(path)
    except reading.Unreadable as exc:
        raise CatalogError(name, exc.reason or exc.message) from None
    if name.endswith(".csv"):
        from gpuplan.catalog import skypilot  # a format of the user's price files only

        if skypilot.looks_like(text):
            return skypilot.parse(text, path, skypilot.modified(path)), []
        tables = _csv_rows(text, name)
        cloud: list[CloudPrice] = []
        hosting: list[HostingOffer] = []
        for table, rows in tables.items():
            for row in rows:
                line = row.pop("_row")
                parsed = _rows(table, [row], name, first_row=line, as_of=as_of)
                (cloud if table == "cloud" else hosting).extend(parsed)
        return cloud, hosting
    try:
        data = reading.parse(text, reading.kind_of(name), check=False)
    except reading.Unreadable as exc:
        raise CatalogError(name, exc.message) from None
    if not isinstance(data, dict):
        raise CatalogError(name, "a price file is a mapping with 'cloud' and/or 'hosting' lists")
    try:
        reading.check_values(data)
        reading.check_rows(data, list(TABLES))
    except reading.Unreadable as exc:
        at, field = reading.row_error_at(data, exc.loc)
        raise CatalogError(name, exc.message, row=at, field=field) from None
    unknown = [k for k in data if k not in TABLES and k not in EXTRA_TABLES and k != "schema_version"]
    if unknown:
        hint = suggest(str(unknown[0]), TABLES)
        raise CatalogError(name, f"unknown table {clip(unknown[0])}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                           + " (allowed: cloud, hosting, cluster)")
    if data.get("schema_version", 1 if reading.kind_of(name) != "toml" else None) not in SCHEMA_VERSIONS:
        raise CatalogError(name, f"schema_version {clip(data.get('schema_version'))} is not one this gpuplan reads (1)",
                           field="schema_version")
    return (_rows("cloud", data.get("cloud", []), name, as_of=as_of),
            _rows("hosting", data.get("hosting", []), name, as_of=as_of))


@lru_cache(maxsize=1)
def _builtin() -> PriceBook:
    pkg = resources.files("gpuplan.data")
    path = "gpuplan/data/prices.toml"
    data = read_toml(pkg.joinpath("prices.toml").read_text(encoding="utf-8"), path)
    cloud = _rows("cloud", data.get("cloud", []), path)
    check_reserved_below_on_demand(path, cloud)
    hosting = _rows("hosting", data.get("hosting", []), path)
    tpath = "gpuplan/data/tco.toml"
    tdata = read_toml(pkg.joinpath("tco.toml").read_text(encoding="utf-8"), tpath)
    assumptions: dict[str, Assumption] = {}
    for i, row in enumerate(tdata.get("assumption", [])):
        try:
            a = Assumption.model_validate(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise CatalogError(tpath, err["msg"], row=row.get("id", i + 1),
                               field=".".join(map(str, err["loc"]))) from None
        assumptions[a.id] = a
    cpath = "gpuplan/data/clusters.toml"
    clusters = _rows("cluster", read_toml(pkg.joinpath("clusters.toml").read_text(encoding="utf-8"), cpath)
                     .get("cluster", []), cpath)
    return PriceBook(cloud=cloud, hosting=hosting, assumptions=assumptions, clusters=clusters)


def _user_clusters(path: Path, as_of: datetime.date | None, gpu_ids: Sequence[str] | None) -> list[ClusterOffer]:
    """The `cluster` rows of a YAML or TOML price file (`_parse_user` has read and checked the file), each GPU id
    known to the catalog."""
    name = str(path)
    if name.endswith(".csv"):
        return []
    data = reading.parse(reading.read_text(path), reading.kind_of(name), check=False)
    rows: list[ClusterOffer] = _rows("cluster", data.get("cluster", []), name, as_of=as_of)
    for row in rows:
        for gid in row.gpu_ids:
            if gpu_ids is not None and gid not in gpu_ids:
                hint = suggest(gid, gpu_ids)
                raise CatalogError(name, f"unknown gpu_id {clip(gid)}"
                                   + (f"; did you mean {hint[0]!r}?" if hint else "") + " (`gpuplan catalog gpus`)",
                                   row=row.provider, field="gpu_ids")
    return rows


def load_prices(user_files: Sequence[str | Path] = (), gpu_ids: Sequence[str] | None = None, *,
                as_of: datetime.date | None = None) -> PriceBook:
    """The built-in price lists with the user's rows added (a hosting offer with a built-in id replaces it).
    `gpu_ids`: the catalog's GPUs, to refuse a price for a GPU the catalog does not know. `as_of`: the date the
    plan is made for, which no user row may postdate (None: not checked)."""
    book = _builtin()
    cloud, hosting, clusters = list(book.cloud), {h.id: h for h in book.hosting}, list(book.clusters)
    for f in user_files:
        c, h = _parse_user(Path(f), as_of)
        clusters += _user_clusters(Path(f), as_of, gpu_ids)
        rows: list[CloudPrice | HostingOffer] = [*c, *h]
        for row in rows:
            if gpu_ids is not None and row.gpu_id not in gpu_ids:
                hint = suggest(row.gpu_id, gpu_ids)
                raise CatalogError(str(f), f"unknown gpu_id {clip(row.gpu_id)}"
                                   + (f"; did you mean {hint[0]!r}?" if hint else "")
                                   + " (`gpuplan catalog gpus`)", row=getattr(row, "id", None) or row.provider,
                                   field="gpu_id")
        check_reserved_below_on_demand(str(f), c, cloud)
        cloud += c
        hosting.update({o.id: o for o in h})
    return PriceBook(cloud=cloud, hosting=list(hosting.values()), assumptions=book.assumptions,
                     user_files=tuple(str(f) for f in user_files), clusters=clusters)


__all__ = ["PriceBook", "STALE_DAYS", "load_prices"]
