"""`gpuplan prices` (issue 28): the price rows in force, built-in and the user's, each with its age on the plan's
date and its source; and the import of a SkyPilot catalog `vms.csv` (or a price file in gpuplan's own format) into
a user's CSV price file, reporting the rows mapped and those skipped, and why.

The import never loses what the user's file held: its rows are kept (a row of the same GPU, provider and kind, or
a hosting offer of the same id, is replaced by the imported one), the file as it was is copied to `FILE.bak`
(`FILE.bak.1`, ... when that exists) before it is written, and the written file is read back through the loader;
if it does not load, the copy is put back."""

from __future__ import annotations

import csv
import datetime
import io
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplan.catalog import skypilot
from gpuplan.catalog.prices import CSV_COLUMNS, STALE_DAYS, PriceBook, _builtin, _parse_user
from gpuplan.errors import CatalogError, clip
from gpuplan.schema.prices import CloudPrice, HostingOffer

#: the columns of the CSV the import writes: gpuplan's own price CSV (`table`, then data/prices.toml's fields)
COLUMNS = CSV_COLUMNS


@dataclass(frozen=True)
class PriceLine:
    """One price row in force, as `gpuplan prices` lists it."""

    table: str
    gpu_id: str
    provider: str
    kind: str
    price: float
    unit: str
    currency: str
    tier: str | None
    as_of: datetime.date
    age_days: int
    stale: bool
    origin: str
    source: str


def in_force(book: PriceBook, as_of: datetime.date, gpu_ids: set[str] | None = None) -> list[PriceLine]:
    """Every row of `book` (for `gpu_ids`, or all), cloud first, by GPU, kind and price; each with its age on `as_of`
    and whether it is older than the six months after which a plan flags it."""
    builtin = _builtin()
    own = {id(r) for r in [*builtin.cloud, *builtin.hosting]}
    out: list[PriceLine] = []
    for c in book.cloud:
        if gpu_ids is None or c.gpu_id in gpu_ids:
            age = (as_of - c.as_of).days
            out.append(PriceLine("cloud", c.gpu_id, c.provider, c.kind, c.price_per_gpu_hour, "GPU-hour", c.currency,
                                 c.tier, c.as_of, age, age > STALE_DAYS,
                                 "built-in" if id(c) in own else "your file", c.source))
    for h in book.hosting:
        if gpu_ids is None or h.gpu_id in gpu_ids:
            age = (as_of - h.as_of).days
            out.append(PriceLine("hosting", h.gpu_id, f"{h.provider} {h.id}", f"monthly, {h.gpus} GPU(s)", h.monthly,
                                 "month", h.currency, None, h.as_of, age, age > STALE_DAYS,
                                 "built-in" if id(h) in own else "your file", h.source))
    out.sort(key=lambda p: (p.table, p.gpu_id, p.kind, p.price, p.provider))
    return out


@dataclass
class ImportReport:
    """What an import did: the rows it wrote, the accelerators or rows it skipped and why, and the target's rows."""

    source: str
    into: str
    mapped: list[CloudPrice | HostingOffer] = field(default_factory=list)
    #: (name, how many source rows, why), one per skipped accelerator (SkyPilot) or row
    skipped: list[tuple[str, int, str]] = field(default_factory=list)
    #: rows the target held and keeps, and those an imported row replaced
    kept: int = 0
    replaced: int = 0
    #: the copy of the target as it was (None: the target did not exist)
    backup: str | None = None


def _survey(text: str, source: Path) -> list[tuple[str, int, str]]:
    """Why a SkyPilot vms.csv's rows that give no price row were skipped, by accelerator."""
    rows = list(csv.DictReader(io.StringIO(text)))
    cloud = skypilot.cloud_of(source, rows)
    counts: dict[tuple[str, str], int] = {}
    for line, row in enumerate(rows, start=2):
        accel = (row.get("AcceleratorName") or "").strip()
        try:
            count = float(row.get("AcceleratorCount") or 0)
        except ValueError:
            count = 0.0
        if not accel or not count:
            why = "CPU-only instance type (no accelerator)"
            accel = accel or "(none)"
        elif skypilot.gpu_id(accel, cloud, str(source), line) is None:
            why = "not in gpuplan's catalog (gpuplan.catalog.skypilot.NOT_IN_CATALOG)"
        elif count < 1:
            why = "a fraction of a GPU (a shared slice is not a GPU-hour)"
        elif not (row.get("Price") or "").strip() and not (row.get("SpotPrice") or "").strip():
            why = "no price"
        else:
            continue
        counts[(accel, why)] = counts.get((accel, why), 0) + 1
    return [(name, n, why) for (name, why), n in sorted(counts.items())]


def _key(row: CloudPrice | HostingOffer) -> tuple[str, ...]:
    if isinstance(row, HostingOffer):
        return ("hosting", row.id)
    return ("cloud", row.gpu_id, row.provider, row.kind)


def _csv_line(row: CloudPrice | HostingOffer) -> dict[str, Any]:
    data = row.model_dump(mode="json", exclude_none=True)
    data["table"] = "hosting" if isinstance(row, HostingOffer) else "cloud"
    if "includes" in data:
        data["includes"] = ";".join(data["includes"]) or None
    return {k: v for k, v in data.items() if v is not None}


def _backup(into: Path) -> Path:
    path = into.with_name(into.name + ".bak")
    k = 1
    while path.exists():
        path = into.with_name(f"{into.name}.bak.{k}")
        k += 1
    shutil.copy2(into, path)
    return path


def import_prices(source: Path, into: Path, gpu_ids: set[str]) -> ImportReport:
    """Add the price rows of `source` (a SkyPilot vms.csv, or a price file in gpuplan's format) to the user's CSV
    price file `into`, keeping what it held (see the module's docstring). Raises CatalogError naming the file and
    row for an unreadable source or target."""
    if into.suffix.lower() != ".csv":
        raise CatalogError(str(into), "the import writes gpuplan's CSV price format: give --into a .csv file "
                           "(a YAML or TOML price file can stay as it is, next to it, with a second --prices)")
    text = source.read_text(encoding="utf-8", errors="replace") if source.is_file() else None
    if text is None:
        raise CatalogError(str(source), "no such file")
    report = ImportReport(source=str(source), into=str(into))
    if source.suffix.lower() == ".csv" and skypilot.looks_like(text):
        rows: list[CloudPrice | HostingOffer] = list(skypilot.parse(text, source, skypilot.modified(source)))
        report.skipped += _survey(text, source)
    else:
        cloud, hosting = _parse_user(source, None)
        rows = [*cloud, *hosting]
    for row in rows:
        if row.gpu_id in gpu_ids:
            report.mapped.append(row)
        else:
            report.skipped.append((f"{row.gpu_id} ({row.provider})", 1, "unknown gpu_id (`gpuplan catalog gpus`)"))
    held: list[CloudPrice | HostingOffer] = []
    if into.exists():
        c, h = _parse_user(into, None)
        held = [*c, *h]
    new = {_key(r) for r in report.mapped}
    kept = [r for r in held if _key(r) not in new]
    report.kept, report.replaced = len(kept), len(held) - len(kept)
    if not report.mapped:
        return report
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in [*kept, *report.mapped]:
        writer.writerow(_csv_line(r))
    backup = _backup(into) if into.exists() else None
    report.backup = str(backup) if backup else None
    into.write_text(buf.getvalue(), encoding="utf-8")
    try:
        _parse_user(into, None)
    except CatalogError as exc:
        if backup is not None:
            shutil.copy2(backup, into)
        else:
            into.unlink()
        raise CatalogError(str(into), f"the merged file did not load back ({clip(str(exc))}); it was left as it "
                           "was") from None
    return report


__all__ = ["COLUMNS", "ImportReport", "PriceLine", "import_prices", "in_force"]
