"""`gpuplan catalog gpus|cpus|platforms|drives|nics|models`: list, filter and show the catalogs, with sources."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.cli.common import CatalogFiles, console, fail
from gpuplan.errors import GpuplanError

AsJson = Annotated[bool, typer.Option("--json", help="JSON output.")]
Where = Annotated[list[str] | None, typer.Option(
    "--where", help="Filter rows: FIELD=VALUE, FIELD>=NUMBER or FIELD<=NUMBER; dotted fields reach inside "
                    "(tflops.bf16>=300, interconnect.kind=nvlink-switch, market_class=datacenter). Repeatable.")]
RowId = Annotated[str | None, typer.Argument(help="Show one row in full (id or alias).")]

Columns = list[tuple[str, Callable[[Any], str]]]


def _num(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def _list_rows(kind: str, row_id: str | None, files: list[Path] | None, where: list[str] | None, as_json: bool,
               columns: Columns) -> None:
    from gpuplan.catalog.hardware import KINDS, load_catalog
    from gpuplan.catalog.listing import catalog_json, catalog_rows
    from gpuplan.clock import plan_date

    try:
        cat = load_catalog(files or [], as_of=plan_date())
        if as_json:
            from gpuplan.report.strict_json import dumps

            typer.echo(dumps(catalog_json(cat, kind, row_id, where or []), indent=2))
            return
        table = cat.table(kind)
        rows = catalog_rows(cat, kind, row_id, where or [])
    except GpuplanError as exc:
        fail(exc)
    from rich.table import Table

    out = console()
    if row_id:
        _show_row(out, rows[0], table.origins[rows[0].id])
        return
    t = Table(*(c for c, _ in columns), "as_of", "source", title=f"{len(rows)} {KINDS[kind][2]}")
    for r in rows:
        origin = table.origins[r.id]
        rid = r.id + (" [yellow](yours, replaces built-in)[/yellow]" if origin.overrides_builtin
                      else " [cyan](yours)[/cyan]" if not origin.file.startswith("gpuplan/") else "")
        t.add_row(rid, *(fn(r) for _, fn in columns[1:]), str(r.as_of), r.source[:50])
    out.print(t)
    overridden = table.overridden()
    if overridden:
        out.print(f"Your rows replace built-in {', '.join(overridden)}.")


def _show_row(console: Any, row: Any, origin: Any) -> None:
    from rich.table import Table

    t = Table("field", "value", title=f"{row.id}: {row.name}", show_header=False)
    for k, v in row.model_dump(mode="json").items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in v.items() if b is not None)
        elif isinstance(v, list):
            v = ", ".join(map(str, v))
        t.add_row(k, "" if v is None else str(v))
    t.add_row("from", origin.file + (" (replaces the built-in row)" if origin.overrides_builtin else ""))
    console.print(t)


def catalog_gpus(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                 catalog: CatalogFiles = None) -> None:
    """GPUs and accelerators: memory, bandwidth, dense TFLOPS, power, links, market class, price; with sources."""
    _list_rows("gpu", row_id, catalog, where, as_json, [
        ("id", str), ("memory", lambda g: f"{g.memory_gib:g} GiB {g.memory_type}"),
        ("GB/s", lambda g: _num(g.memory_bandwidth_gbs)),
        ("bf16/fp16 TFLOPS", lambda g: _num(g.tflops.bf16 or g.tflops.fp16)),
        ("fp8", lambda g: _num(g.tflops.fp8)), ("W", lambda g: _num(g.tdp_w)),
        ("link", lambda g: g.interconnect.kind if g.interconnect.kind == "none"
         else f"{g.interconnect.kind} {g.interconnect.bandwidth_gbs:g} GB/s x{g.interconnect.domain_gpus}"),
        ("class", lambda g: g.market_class),
        ("price", lambda g: f"${g.price.usd:,.0f} ({g.price.as_of.year})" if g.price else "-"),
    ])


def catalog_cpus(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                 catalog: CatalogFiles = None) -> None:
    """Server CPUs: cores, PCIe lanes, memory channels, TDP, price; with sources."""
    _list_rows("cpu", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda c: c.name), ("cores", lambda c: str(c.cores)),
        ("PCIe lanes", lambda c: str(getattr(c, "pcie_lanes", "-"))),
        ("mem channels", lambda c: str(getattr(c, "memory_channels", "-"))),
        ("W", lambda c: _num(getattr(c, "tdp_w", None))),
    ])


def catalog_platforms(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                      catalog: CatalogFiles = None) -> None:
    """Server platforms (chassis): GPU slots and form factors, PSU, rack units; with sources."""
    _list_rows("platform", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda p: p.name), ("GPUs", lambda p: str(p.gpu_slots)),
        ("form factors", lambda p: ", ".join(getattr(p, "gpu_form_factors", []) or [])),
        ("PSU W", lambda p: _num(getattr(p, "psu_total_w", None))),
        ("U", lambda p: _num(getattr(p, "rack_units", None), "{:g}")),
    ])


def catalog_drives(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                   catalog: CatalogFiles = None) -> None:
    """NVMe drives: capacity and throughput; with sources."""
    _list_rows("drive", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda d: d.name), ("TB", lambda d: f"{d.capacity_tb:g}"),
        ("read GB/s", lambda d: _num(getattr(d, "seq_read_gbs", None), "{:g}")),
        ("write GB/s", lambda d: _num(getattr(d, "seq_write_gbs", None), "{:g}")),
    ])


def catalog_nics(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                 catalog: CatalogFiles = None) -> None:
    """Network cards: ports and speed, InfiniBand or Ethernet, RDMA; with sources."""
    _list_rows("nic", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda n: n.name), ("ports", lambda n: str(n.ports)),
        ("Gb/s per port", lambda n: _num(getattr(n, "gbps_per_port", None))),
        ("kind", lambda n: str(getattr(n, "kind", "-"))),
    ])


def catalog_models(row_id: RowId = None, as_json: AsJson = False) -> None:
    """Built-in model presets with their sources."""
    try:
        if as_json:
            from gpuplan.catalog.listing import models_json
            from gpuplan.report.strict_json import dumps

            typer.echo(dumps(models_json(row_id), indent=2))
            return
        from gpuplan.catalog.listing import model_rows

        presets = model_rows(row_id)
    except GpuplanError as exc:
        fail(exc)
    from rich.table import Table

    t = Table("id", "name", "parameters", "model_type", "as_of", "source")
    for p in presets:
        t.add_row(p.id, p.name, f"{p.parameters / 1e9:,.2f} B", p.config["model_type"], str(p.as_of),
                  p.source[:60])
    console().print(t)


def register(app: typer.Typer) -> None:
    """Add the `catalog` group of subcommands to a typer app."""
    catalog_app = typer.Typer(no_args_is_help=True, help="List, filter and show the catalogs, with sources.")
    for name, command in (("gpus", catalog_gpus), ("cpus", catalog_cpus), ("platforms", catalog_platforms),
                          ("drives", catalog_drives), ("nics", catalog_nics), ("models", catalog_models)):
        catalog_app.command(name)(command)
    app.add_typer(catalog_app, name="catalog")
