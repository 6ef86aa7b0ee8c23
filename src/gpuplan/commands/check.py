"""`gpuplan check`: audit a machine the user has (probed) or is offered (a server file) for one project.

Exit codes: 0 the project fits the machine; 1 it does not (no GPU, too little GPU memory, too little disk);
2 bad input."""

# No `from __future__ import annotations` here: typer reads the annotations of the command that register()
# defines, and they name classes imported inside register() (from gpuplan.cli, which imports this module).

import json
import math
from pathlib import Path
from typing import Annotated, Optional, Union

import typer
from rich.console import Console
from rich.table import Table

from gpuplan import api
from gpuplan.catalog.hardware import Catalog
from gpuplan.catalog.loader import load_project, resolve_model
from gpuplan.catalog.server_rules import load_server_rules
from gpuplan.core.audit.checks import (Alternative, AuditResult, MachineGpu, MachineSpec, audit, job_gpus, layout_for,
                                 layout_text, on_machine)
from gpuplan.core.sizing.speed import tokens_per_sample
from gpuplan.errors import GpuplanError
from gpuplan.schema.project import Layout, Project
from gpuplan.schema.result import EstimateResult
from gpuplan.units import GIB


def check_machine(project_path: Union[str, Path], machine: MachineSpec, catalog: Catalog) -> AuditResult:
    """The project's estimate on the machine's GPUs (the layout it would run with), the changes that would
    make it fit when it does not, and the audit of the whole machine."""
    project, base = load_project(project_path)
    arch = resolve_model(project.model, base).arch
    rules = load_server_rules()
    tok = tokens_per_sample(arch, project.workload)
    job = job_gpus(machine)
    if not job:  # what a GPU would need: the project on its own hardware section (one GPU without one)
        est = api.estimate(project, base_dir=base, catalog=catalog)
        return audit(project, machine, est, rules, catalog, tokens_per_sample=tok)
    gpu_id, n = job[0].catalog_id, len(job)
    usable = min(g.memory_bytes for g in job) * (1 - project.constraints.memory_headroom)
    layout = layout_for(project, n)
    if layout is None:  # inference without a layout: the smallest tensor-parallel degree that fits
        est, layout = _smallest_tp(project, base, catalog, gpu_id, n, usable)
    else:
        est = api.estimate(on_machine(project, gpu_id, n, layout), base_dir=base, catalog=catalog)
    alts = [] if est.memory.device_bytes <= usable else \
        _alternatives(project, base, catalog, gpu_id, n, layout, arch.kind)
    return audit(project, machine, est, rules, catalog, job=job, tokens_per_sample=tok, alternatives=alts)


def _smallest_tp(project: Project, base: Optional[Path], catalog: Catalog, gpu_id: Optional[str], n: int,
                 usable: float) -> tuple[EstimateResult, Layout]:
    found: Optional[tuple[EstimateResult, Layout]] = None
    for tp in (1, 2, 4, 8):
        if n % tp:
            continue
        try:
            est = api.estimate(on_machine(project, gpu_id, n, Layout(tp=tp)), base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # tp does not divide the model's heads
        found = (est, Layout(tp=tp))
        if est.memory.device_bytes <= usable:
            break
    if found is None:
        return api.estimate(on_machine(project, gpu_id, n, Layout()), base_dir=base, catalog=catalog), Layout()
    return found


def _alternatives(project: Project, base: Optional[Path], catalog: Catalog, gpu_id: Optional[str], n: int,
                  layout: Layout, kind: str) -> list[Alternative]:
    """Single changes that lower the memory per GPU, each estimated on this machine's GPU: the workload's
    settings first, then more GPUs of the same kind."""
    w = project.workload

    def with_w(**update: object) -> Project:
        return project.model_copy(update={"workload": w.model_copy(update=update)})

    tries: list[tuple[str, Project, int, Layout, bool]] = []
    if w.task != "inference":
        if not w.gradient_checkpointing and kind != "cnn":
            tries.append(("turn on gradient checkpointing", with_w(gradient_checkpointing=True), n, layout, False))
        if w.micro_batch_size > 1:
            tries.append(("micro-batch 1 (gradient accumulation keeps the global batch)",
                          with_w(micro_batch_size=1, global_batch_size=w.global_batch_size or w.micro_batch_size * n),
                          n, layout, False))
        if n > 1 and layout.zero < 3 and layout.tp * layout.pp == 1:
            tries.append((f"ZeRO-3 (FSDP) over the {n} GPUs", project, n, Layout(zero=3), False))
        if w.task in ("lora", "full-finetune") and kind not in ("cnn", "vit"):
            tries.append(("QLoRA: a 4-bit frozen base with adapters", with_w(task="qlora"), n, layout, False))
        if len(tries) > 1:  # every setting change at once, on this machine
            merged: dict[str, object] = {}
            for _, proj, _, _, _ in tries:
                merged.update({k: v for k, v in proj.workload.model_dump().items() if v != getattr(w, k)})
            lay = Layout(zero=3) if n > 1 and layout.tp * layout.pp == 1 else layout
            tries.append(("all of these together", with_w(**merged), n, lay, False))
        tries += [(f"{k} GPUs like these with ZeRO-3", project, k, Layout(zero=3), True) for k in (2, 4, 8) if k > n]
    else:
        if w.kv_cache_dtype != "fp8":
            tries.append(("an fp8 KV cache", with_w(kv_cache_dtype="fp8"), n, layout, False))
        if w.weights_dtype in (None, "fp32", "bf16", "fp16"):
            tries.append(("fp8 weights", with_w(weights_dtype="fp8"), n, layout, False))
            tries.append(("int4 weights (AWQ/GPTQ)", with_w(weights_dtype="int4"), n, layout, False))
        if w.batch_size > 1:
            tries.append((f"{math.ceil(w.batch_size / 2)} concurrent requests instead of {w.batch_size}",
                          with_w(batch_size=math.ceil(w.batch_size / 2)), n, layout, False))
        tries += [(f"{k} GPUs like these, tensor parallel {k}", project, k, Layout(tp=k), True)
                  for k in (2, 4, 8) if k > n]
    out = []
    for change, proj, k, lay, hardware in tries:
        try:
            est = api.estimate(on_machine(proj, gpu_id, k, lay), base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # the change does not apply to this model (a layout its heads do not divide)
        out.append(Alternative(change=change, needs_hardware=hardware, gpus=k, device_bytes=est.memory.device_bytes))
    return out


# ------------------------------------------------------------------------------------------------ rendering

VERDICT = {"pass": "[green]pass[/green]", "warn": "[yellow]warn[/yellow]", "fail": "[red]fail[/red]",
           "not evaluated": "[dim]not evaluated[/dim]"}


def render_json(result: AuditResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2)


def render_text(result: AuditResult, console: Console) -> None:
    from rich.markup import escape

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


# ------------------------------------------------------------------------------------------------- command

def register(app: typer.Typer) -> None:
    """Add `check` to a typer app (gpuplan.cli's, or a test's)."""
    from gpuplan.catalog.loader import example_names
    from gpuplan.cli import CatalogFiles, Format, _fail, _project_path

    @app.command()
    def check(
        project: Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")] = None,
        example: Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")] = None,
        list_examples: Annotated[bool, typer.Option("--list-examples", help="List the built-in examples.")] = False,
        this_machine: Annotated[bool, typer.Option("--this-machine", help="Probe this machine: CPU, RAM, disks, "
                                                                          "NVIDIA GPUs (NVML).")] = False,
        server: Annotated[Optional[Path], typer.Option("--server", help="A server file describing an offered "
                                                                        "machine (docs/check.md).")] = None,
        disk_test: Annotated[bool, typer.Option(
            "--disk-test", help="With --this-machine: time reading a 256 MiB temporary file back (writes it in the "
                                "temporary folder, then deletes it).")] = False,
        format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
        catalog: CatalogFiles = None,
    ) -> None:
        """Audit a machine you have or are offered for a project: does it fit, where is the bottleneck, what to
        change. Exit 1 when the project does not fit the machine (including a machine without a GPU)."""
        if list_examples:
            typer.echo("\n".join(example_names()))
            return
        from gpuplan.catalog.hardware import load_catalog
        from gpuplan.errors import InputError
        from gpuplan.probe import probe_machine, read_server_file

        try:
            if this_machine == (server is not None):
                raise InputError([], "give exactly one of --this-machine (probe this machine) and --server FILE "
                                     "(an offered machine)")
            if disk_test and server is not None:
                raise InputError(["--disk-test"], "measures this machine; for an offer give disks[].read_gb_s in "
                                                  "the server file")
            path = _project_path(project, example, "check")
            cat = load_catalog(catalog or [])
            machine = probe_machine(disk_test, catalog=cat) if this_machine else read_server_file(server or Path(), cat)
            result = check_machine(path, machine, cat)
        except GpuplanError as exc:
            _fail(exc)
            return
        if format is Format.json:
            typer.echo(render_json(result))
        else:
            render_text(result, Console())
        if not result.fits:
            raise typer.Exit(1)


__all__ = ["check_machine", "register", "render_json", "render_text"]
