"""`gpuplan check`: audit a machine the user has (probed) or is offered (a server file) for one project.

Exit codes: 0 the project fits the machine; 1 it does not (no GPU, too little GPU memory, too little disk);
2 bad input. The audit itself is gpuplan.api.check_machine."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuplan.cli.common import (
    CatalogFiles,
    Example,
    Format,
    ListExamples,
    OutputFormat,
    ProjectFile,
    console,
    echo_examples,
    fail,
    project_path,
)
from gpuplan.errors import GpuplanError
from gpuplan.units import GIB

if TYPE_CHECKING:
    from rich.console import Console

    from gpuplan.core.audit.checks import AuditResult, MachineGpu

VERDICT = {"pass": "[green]pass[/green]", "warn": "[yellow]warn[/yellow]", "fail": "[red]fail[/red]",
           "not evaluated": "[dim]not evaluated[/dim]"}


def render_json(result: "AuditResult") -> str:
    from gpuplan.report.strict_json import dumps

    return dumps(result.model_dump(mode="json"), indent=2)


def render_text(result: "AuditResult", console: "Console") -> None:
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.core.audit.checks import layout_text

    m = result.machine
    threads = f" ({m.cpu_threads} threads)" if m.cpu_threads else ""
    lines = [f"[bold]Machine[/bold]: {escape(m.source)}",
             f"CPU {escape(m.cpu_model or 'unknown model')}: {m.cpu_cores} cores{threads}; "
             f"RAM {m.ram_bytes / GIB:,.0f} GB"]
    for d in m.disks:
        free = f", {d.free_bytes / 1e12:,.2f} TB free" if d.free_bytes is not None else ""
        read = f", reads {d.read_gb_s:,.2f} GB/s" if d.read_gb_s is not None else ""
        lines.append(f"disk {escape(d.mount)}: {d.total_bytes / 1e12:,.2f} TB{free}{read}")
    groups: dict[MachineGpu, int] = {}
    for g in m.gpus:
        groups[g] = groups.get(g, 0) + 1
    for g, count in groups.items():
        bits = [f"{g.memory_bytes / GIB:,.1f} GiB"]
        for label, value in (("ECC", {True: "on", False: "off"}.get(g.ecc) if g.ecc is not None else None),
                             ("power limit", f"{g.power_limit_w:,.0f} W" if g.power_limit_w else None),
                             ("PCIe", f"Gen{g.pcie_gen} x{g.pcie_width}" if g.pcie_gen else None),
                             ("NVLink links", g.nvlink_links)):
            if value is not None:
                bits.append(f"{label} {value}")
        cat = f" ({g.catalog_id})" if g.catalog_id else " (not in the catalog)"
        lines.append(f"GPU {count} x {escape(g.name)}{cat}: {', '.join(bits)}")
    if not m.gpus:
        lines.append("GPU: none")
    colour = "green" if result.fits and result.verdict == "fits" else "yellow" if result.fits else "red"
    lines.append("")
    if result.gpus:
        lay_text = layout_text(result.layout, result.estimate.workload.get("task") != "inference")
        lines.append(f"[bold]Job[/bold] {escape(result.project)}: {result.gpus} x {escape(result.gpu or '')}, "
                     f"{lay_text}: {result.device_bytes / GIB:,.1f} GiB per GPU of "
                     f"{(result.usable_bytes or 0) / GIB:,.1f} usable")
    lines.append(f"[bold {colour}]{escape(result.verdict)}[/bold {colour}]")
    console.print("\n".join(lines), highlight=False)
    t = Table(title="Checklist for this machine")
    t.add_column("item")
    t.add_column("verdict")
    t.add_column("why")
    for item in result.checklist:
        t.add_row(item.item, VERDICT[item.verdict], escape("\n".join(f"· {r}" for r in item.reasons)))
    console.print(t)
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)


def check(
    project: ProjectFile = None,
    example: Example = None,
    list_examples: ListExamples = False,
    this_machine: Annotated[bool, typer.Option("--this-machine", help="Probe this machine: CPU, RAM, disks, "
                                                                      "NVIDIA GPUs (NVML).")] = False,
    server: Annotated[Path | None, typer.Option("--server", help="A server file describing an offered "
                                                                    "machine (docs/check.md).")] = None,
    disk_test: Annotated[bool, typer.Option(
        "--disk-test", help="With --this-machine: time reading a 256 MiB temporary file back (writes it in the "
                            "temporary folder, then deletes it).")] = False,
    format: OutputFormat = Format.text,
    catalog: CatalogFiles = None,
) -> None:
    """Audit a machine you have or are offered for a project: does it fit, where is the bottleneck, what to
    change. Exit 1 when the project does not fit the machine (including a machine without a GPU)."""
    if list_examples:
        echo_examples()
        return
    from gpuplan.api import check_machine
    from gpuplan.catalog.hardware import load_catalog
    from gpuplan.catalog.server_file import read_server_file
    from gpuplan.cli.probe import probe_machine
    from gpuplan.clock import plan_date
    from gpuplan.errors import InputError

    try:
        if this_machine == (server is not None):
            raise InputError([], "give exactly one of --this-machine (probe this machine) and --server FILE "
                                 "(an offered machine)")
        if disk_test and server is not None:
            raise InputError(["--disk-test"], "measures this machine; for an offer give disks[].read_gb_s in "
                                              "the server file")
        path = project_path(project, example, "check")
        cat = load_catalog(catalog or [], as_of=plan_date())
        machine = probe_machine(disk_test, catalog=cat) if this_machine else read_server_file(server or Path(), cat)
        result = check_machine(path, machine, cat)
    except GpuplanError as exc:
        fail(exc)
    if format is Format.json:
        typer.echo(render_json(result))
    else:
        render_text(result, console())
    if not result.fits:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `check` to a typer app (gpuplan.cli's, or a test's)."""
    app.command()(check)


__all__ = ["check", "register", "render_json", "render_text"]
