"""Price lists (data/prices.toml: cloud GPU-hours, managed dedicated servers) and cost assumptions
(data/tco.toml), plus the user's quotes (`--prices FILE`, CSV or YAML). Every error names the file, the row and
the field."""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpuplan.catalog.loader import read_toml
from gpuplan.errors import CatalogError, suggest
from gpuplan.core.cost.deployments import STALE_DAYS, is_stale
from gpuplan.schema.prices import Assumption, CloudPrice, HostingOffer, PriceBook

TABLES = {"cloud": CloudPrice, "hosting": HostingOffer}


def _rows(table: str, raw: Any, path: str, first_row: int = 1) -> list[Any]:
    model = TABLES[table]
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
            raise CatalogError(path, err["msg"].removeprefix("Value error, "),
                               row=row.get("id") or row.get("provider") or i + first_row,
                               field=".".join(map(str, err["loc"])) or None) from None
        if out[-1].as_of > datetime.date.today():
            raise CatalogError(path, f"as_of {out[-1].as_of} is in the future", row=i + first_row, field="as_of")
    return out


def _csv_rows(text: str, path: str) -> dict[str, list[dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "table" not in reader.fieldnames:
        raise CatalogError(path, "a price CSV needs a 'table' column (cloud or hosting) and the fields of that table")
    out: dict[str, list[dict[str, Any]]] = {"cloud": [], "hosting": []}
    for i, row in enumerate(reader, start=2):  # row 1 is the header
        table = (row.pop("table") or "").strip()
        if table not in TABLES:
            hint = suggest(table, TABLES)
            raise CatalogError(path, f"table {table!r} is not cloud or hosting"
                               + (f"; did you mean {hint[0]!r}?" if hint else ""), row=i, field="table")
        clean: dict[str, Any] = {}
        for k, v in row.items():
            if k is None or v is None or v.strip() == "":
                continue
            clean[k.strip()] = [x.strip() for x in v.split(";") if x.strip()] if k.strip() == "includes" else v.strip()
        clean["_row"] = i
        out[table].append(clean)
    return out


def _parse_user(path: Path) -> tuple[list[CloudPrice], list[HostingOffer]]:
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(name, f"cannot read: {exc.strerror or exc}") from None
    if name.endswith(".csv"):
        tables = _csv_rows(text, name)
        cloud, hosting = [], []
        for table, rows in tables.items():
            for row in rows:
                line = row.pop("_row")
                parsed = _rows(table, [row], name, first_row=line)
                (cloud if table == "cloud" else hosting).extend(parsed)
        return cloud, hosting
    try:
        data = yaml.safe_load(text) if name.endswith((".yaml", ".yml")) else read_toml(text, name)
    except yaml.YAMLError as exc:
        raise CatalogError(name, f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise CatalogError(name, "a price file is a mapping with 'cloud' and/or 'hosting' lists")
    unknown = [k for k in data if k not in TABLES and k != "schema_version"]
    if unknown:
        hint = suggest(unknown[0], TABLES)
        raise CatalogError(name, f"unknown table {unknown[0]!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                           + " (allowed: cloud, hosting)")
    return _rows("cloud", data.get("cloud", []), name), _rows("hosting", data.get("hosting", []), name)


@lru_cache(maxsize=1)
def _builtin() -> PriceBook:
    pkg = resources.files("gpuplan.data")
    path = "gpuplan/data/prices.toml"
    data = read_toml(pkg.joinpath("prices.toml").read_text(encoding="utf-8"), path)
    cloud = _rows("cloud", data.get("cloud", []), path)
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
    return PriceBook(cloud=cloud, hosting=hosting, assumptions=assumptions)


def load_prices(user_files: Sequence[str | Path] = (), gpu_ids: Sequence[str] | None = None) -> PriceBook:
    """The built-in price lists with the user's rows added (a hosting offer with a built-in id replaces it).
    `gpu_ids`: the catalog's GPUs, to refuse a price for a GPU the catalog does not know."""
    book = _builtin()
    cloud, hosting = list(book.cloud), {h.id: h for h in book.hosting}
    for f in user_files:
        c, h = _parse_user(Path(f))
        for row in [*c, *h]:
            if gpu_ids is not None and row.gpu_id not in gpu_ids:
                hint = suggest(row.gpu_id, gpu_ids)
                raise CatalogError(str(f), f"unknown gpu_id {row.gpu_id!r}"
                                   + (f"; did you mean {hint[0]!r}?" if hint else "")
                                   + " (`gpuplan catalog gpus`)", row=getattr(row, "id", None) or row.provider,
                                   field="gpu_id")
        cloud += c
        hosting.update({o.id: o for o in h})
    return PriceBook(cloud=cloud, hosting=list(hosting.values()), assumptions=book.assumptions,
                     user_files=tuple(str(f) for f in user_files))


def stale(as_of: datetime.date, today: datetime.date | None = None) -> bool:
    """Older than STALE_DAYS on `today` (the machine's date when None): core.cost.deployments.is_stale."""
    return is_stale(as_of, today or datetime.date.today())


__all__ = ["PriceBook", "STALE_DAYS", "load_prices", "stale"]
