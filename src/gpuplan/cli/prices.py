"""`gpuplan prices`: the price rows in force with their age and source, and `--import` of a SkyPilot vms.csv (or a
price file in gpuplan's format) into the user's CSV price file (issue 28)."""

from pathlib import Path
from typing import Annotated

import typer

from gpuplan.cli.common import AsOf, Format, OutputFormat, PriceFiles, console, day, fail
from gpuplan.errors import GpuplanError, InputError


def prices(
    gpu: Annotated[list[str] | None, typer.Option("--gpu", help="Only the rows of this GPU (repeatable).")] = None,
    prices: PriceFiles = None,
    as_of: AsOf = None,
    format: OutputFormat = Format.text,
    import_file: Annotated[Path | None, typer.Option(
        "--import", help="A SkyPilot catalog vms.csv, or a price file in gpuplan's format, to add to --into.")] = None,
    into: Annotated[Path | None, typer.Option(
        help="Your CSV price file the --import rows are added to (kept, with a .bak copy of what it held).")] = None,
) -> None:
    """The price rows in force (built-in and your --prices files), each with its age on the plan's date and its
    source; rows older than six months are marked, as a plan flags them. With --import FILE --into MINE.csv,
    adds FILE's rows to MINE.csv and says which were mapped, which skipped and why."""
    from gpuplan.api import load_bundle
    from gpuplan.clock import plan_date

    when = plan_date(day(as_of))
    try:
        if import_file is not None or into is not None:
            if import_file is None or into is None:
                raise InputError(["--import" if import_file is None else "--into"],
                                 "an import needs both the file to read (--import) and your price file (--into)",
                                 "--import vms.csv --into my-prices.csv")
            _import(import_file, into, format)
            return
        bundle = load_bundle(price_files=prices or [], as_of=when)
        known = set(bundle.catalog.gpus.rows)
        wanted = None
        if gpu:
            wanted = {bundle.catalog.gpus.find(g, ["--gpu"]).id for g in gpu}
        from gpuplan.catalog.price_import import in_force

        lines = in_force(bundle.prices, when, wanted if wanted is not None else known)
    except GpuplanError as exc:
        fail(exc)
    if format is Format.json:
        from gpuplan.report.strict_json import dumps

        typer.echo(dumps({"as_of": when.isoformat(), "rows": [
            {"table": p.table, "gpu_id": p.gpu_id, "provider": p.provider, "kind": p.kind, "price": p.price,
             "unit": p.unit, "currency": p.currency, "tier": p.tier, "as_of": p.as_of.isoformat(),
             "age_days": p.age_days, "stale": p.stale, "origin": p.origin, "source": p.source} for p in lines]},
            indent=2))
        return
    out = console()
    out.print(f"Prices in force on {when.isoformat()}: {len(lines)} row(s); '!' marks a price older than six months, "
              "which a plan flags")
    tiers = {"hyperscaler": "hyperscaler", "specialist": "GPU cloud", "marketplace": "marketplace"}
    for p in lines:
        age = f"{p.age_days / 30.44:.0f} months old" + (" !" if p.stale else "")
        group = f", {tiers.get(p.tier, p.tier)}" if p.tier else ""
        out.print(f"{p.gpu_id} {p.kind}: {p.price:,.2f} {p.currency}/{p.unit}, {p.provider}{group}; "
                  f"{p.as_of.isoformat()} ({age}), {p.origin}; {p.source[:120]}{'…' if len(p.source) > 120 else ''}",
                  markup=False, highlight=False)


def _import(source: Path, into: Path, format: Format) -> None:
    from gpuplan.api import load_bundle
    from gpuplan.catalog.price_import import import_prices

    gpu_ids = set(load_bundle().catalog.gpus.rows)
    report = import_prices(source, into, gpu_ids)
    if format is Format.json:
        from gpuplan.report.strict_json import dumps

        typer.echo(dumps({"source": report.source, "into": report.into, "mapped": len(report.mapped),
                          "rows": [{"gpu_id": r.gpu_id, "provider": r.provider,
                                    "kind": getattr(r, "kind", "monthly")} for r in report.mapped],
                          "skipped": [{"name": n, "rows": k, "why": w} for n, k, w in report.skipped],
                          "kept": report.kept, "replaced": report.replaced, "backup": report.backup}, indent=2))
        return
    out = console()
    if not report.mapped:
        out.print(f"Nothing to import from {report.source}: no row maps to a catalog GPU; {report.into} is "
                  "unchanged.")
    else:
        out.print(f"Imported {len(report.mapped)} price row(s) from {report.source} into {report.into} "
                  f"(kept {report.kept} of its rows, replaced {report.replaced}"
                  + (f"; what it held is in {report.backup}" if report.backup else "") + ").")
        for r in report.mapped:
            out.print(f"  mapped: {r.gpu_id} {r.provider} {getattr(r, 'kind', 'monthly')}")
    for name, k, why in report.skipped:
        out.print(f"  skipped: {name} ({k} row(s)): {why}")


def register(app: typer.Typer) -> None:
    """Add `prices` to a typer app."""
    app.command()(prices)
