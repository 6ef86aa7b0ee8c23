"""The `gpuplan` command: parse arguments, call the API, render, exit with a code.

Exit codes: 0 ok; 1 infeasible project; 2 bad input (one line on stderr, no traceback unless --debug)."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from enum import Enum
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from gpuplan import api
from gpuplan.commands import Objective
from gpuplan.catalog.hardware import KINDS
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.errors import GpuplanError, InfeasibleError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="gpuplan: which GPU server to get for an AI project, and why.")
catalog_app = typer.Typer(no_args_is_help=True, help="List, filter and show the catalogs, with sources.")
app.add_typer(catalog_app, name="catalog")

_state = {"debug": False}


class Format(str, Enum):
    text = "text"
    json = "json"


class PlanFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"
    html = "html"


def _project_path(project: Path | None, example: str | None, command: str) -> Path:
    if (project is None) == (example is None):
        raise GpuplanError(f"give a project file or --example NAME (`gpuplan {command} --list-examples`)")
    return project if project is not None else example_path(example or "")


CatalogFiles = Annotated[Optional[list[Path]], typer.Option(
    "--catalog", help="A file of your own rows (TOML or YAML, same schema); a row replaces the built-in one with "
                      "the same id. Repeatable.")]
PriceFiles = Annotated[Optional[list[Path]], typer.Option(
    "--prices", help="A price list of your own (CSV or YAML: cloud GPU-hour prices, hosting offers), added to the "
                     "built-in ones. Repeatable.")]
AsJson = Annotated[bool, typer.Option("--json", help="JSON output.")]
Where = Annotated[Optional[list[str]], typer.Option(
    "--where", help="Filter rows: FIELD=VALUE, FIELD>=NUMBER or FIELD<=NUMBER; dotted fields reach inside "
                    "(tflops.bf16>=300, interconnect.kind=nvlink-switch, market_class=datacenter). Repeatable.")]
RowId = Annotated[Optional[str], typer.Argument(help="Show one row in full (id or alias).")]


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False) -> None:
    _state["debug"] = debug


def _fail(exc: GpuplanError) -> None:
    if _state["debug"]:
        raise exc
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[red]error[/red]: {escape(str(exc))}", markup=True, highlight=False)
    raise typer.Exit(1 if isinstance(exc, InfeasibleError) else 2)


@app.command()
def estimate(
    project: Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")] = None,
    example: Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")] = None,
    list_examples: Annotated[bool, typer.Option("--list-examples", help="List the built-in examples.")] = False,
    gpu: Annotated[Optional[str], typer.Option(help="GPU id (see `gpuplan catalog gpus`).")] = None,
    gpus: Annotated[Optional[int], typer.Option(min=1, help="Number of GPUs.")] = None,
    hf: Annotated[Optional[str], typer.Option("--hf", help="A Hugging Face model id (org/name): replaces the "
                                                          "project's model; alone, sizes serving it.")] = None,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
    catalog: CatalogFiles = None,
) -> None:
    """Peak GPU memory per GPU: weights, gradients, optimizer, activations, KV cache, at three levels."""
    if list_examples:
        typer.echo("\n".join(example_names()))
        return
    try:
        if hf and project is None and example is None:  # the model alone: what serving it one request needs
            source: object = {"name": hf, "model": {"hf_id": hf}, "workload": {"task": "inference"}}
        else:
            source = _project_path(project, example, "estimate")
            if hf:
                from gpuplan.catalog.loader import load_project

                proj, base = load_project(source)  # type: ignore[arg-type]
                source = proj.model_copy(update={"model": proj.model.model_copy(
                    update={"hf_id": hf, "preset": None, "hf_config": None})})
        from gpuplan.report.terminal import progress

        with progress(f"fetching {hf} from the Hugging Face Hub…") if hf else nullcontext():
            result = api.estimate(source, gpu=gpu, gpus=gpus, catalog_files=catalog or [])  # type: ignore[arg-type]
    except GpuplanError as exc:
        _fail(exc)
        return
    if format is Format.json:
        from gpuplan.report.estimate import render_json

        typer.echo(render_json(result))
    else:
        from gpuplan.report.estimate import render_text

        render_text(result, Console())


def _list_rows(kind: str, row_id: str | None, files: list[Path] | None, where: list[str] | None, as_json: bool,
               columns: list[tuple[str, Callable[[Any], str]]]) -> None:
    from gpuplan.catalog.hardware import load_catalog
    from gpuplan.catalog.listing import catalog_json, catalog_rows

    try:
        cat = load_catalog(files or [])
        if as_json:
            import json

            typer.echo(json.dumps(catalog_json(cat, kind, row_id, where or []), indent=2))
            return
        table = cat.table(kind)
        rows = catalog_rows(cat, kind, row_id, where or [])
    except GpuplanError as exc:
        _fail(exc)
        return
    console = Console()
    if row_id:
        _show_row(console, rows[0], table.origins[rows[0].id])
        return
    from rich.table import Table

    t = Table(*(c for c, _ in columns), "as_of", "source", title=f"{len(rows)} {KINDS[kind][2]}")
    for r in rows:
        origin = table.origins[r.id]
        rid = r.id + (" [yellow](yours, replaces built-in)[/yellow]" if origin.overrides_builtin
                      else " [cyan](yours)[/cyan]" if not origin.file.startswith("gpuplan/") else "")
        t.add_row(rid, *(fn(r) for _, fn in columns[1:]), str(r.as_of), r.source[:50])
    console.print(t)
    overridden = table.overridden()
    if overridden:
        console.print(f"Your rows replace built-in {', '.join(overridden)}.")


def _show_row(console: Console, row: Any, origin: Any) -> None:
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


def _num(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


@app.command()
def plan(
    project: Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")] = None,
    example: Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")] = None,
    list_examples: Annotated[bool, typer.Option("--list-examples", help="List the built-in examples.")] = False,
    objective: Annotated[Optional[Objective], typer.Option(help="Rank by cost, time or both (default: the "
                                                                 "project's goals.objective).")] = None,
    top: Annotated[int, typer.Option(min=1, help="How many candidates to show.")] = api.PLAN_TOP,
    headroom: Annotated[Optional[float], typer.Option(min=0.0, max=0.8, help="Fraction of GPU memory kept free "
                                                                              "(default 0.10).")] = None,
    format: Annotated[PlanFormat, typer.Option("--format", help="Output format: the terminal, JSON, or a "
                                                                 "Markdown / self-contained HTML report.")] = PlanFormat.text,
    out: Annotated[Optional[Path], typer.Option("--out", help="Write the report to this file (never overwrites "
                                                             "one without --force).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    lang: Annotated[str, typer.Option("--lang", help="Report language: en or fr.")] = "en",
    details: Annotated[bool, typer.Option("--details", help="Text output: after the one-screen summary, every "
                                                            "reason, the server's rules and the GPUs not chosen.")] = False,
    catalog: CatalogFiles = None,
    prices: PriceFiles = None,
) -> None:
    """Which server to get: balanced candidates that fit, ranked, with the decision checklist answered.
    Exit 1 when nothing satisfies the project (the message names the binding constraint)."""
    if list_examples:
        typer.echo("\n".join(example_names()))
        return
    try:
        path = _project_path(project, example, "plan")
        from gpuplan.report.terminal import progress

        with progress("searching GPU servers…"):
            result = api.plan(path, objective=objective.value if objective else None, headroom=headroom, top=top,
                              catalog_files=catalog or [], price_files=prices or [])
    except GpuplanError as exc:
        _fail(exc)
        return
    from gpuplan.report.plan import render_json, render_text

    try:
        if out is not None and out.exists() and not force:
            raise GpuplanError(f"--out: {out} exists; gpuplan never overwrites a file unless --force is given")
        if format is PlanFormat.json:
            text = render_json(result)
        elif format is PlanFormat.md:
            from gpuplan.report.document import render_markdown

            text = render_markdown(result, lang=lang)
        elif format is PlanFormat.html:
            from gpuplan.report.document import render_html

            text = render_html(result, lang=lang)
        else:
            if out is not None:
                raise GpuplanError("--out writes a report: use --format md, html or json with it")
            render_text(result, Console(), top=top, details=details)
            return
    except GpuplanError as exc:
        _fail(exc)
        return
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text, encoding="utf-8")
        Console(stderr=True).print(f"wrote {out}")


@app.command()
def cost(
    project: Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")] = None,
    example: Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")] = None,
    top: Annotated[int, typer.Option(min=1, help="Compare the deployments of this many candidates.")] = 1,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
    catalog: CatalogFiles = None,
    prices: PriceFiles = None,
) -> None:
    """Where the recommended server lives and what it costs: buying it, managed hosting, cloud GPUs; total
    over the horizon, per month, per run or per million tokens, and the break-even between them."""
    try:
        path = _project_path(project, example, "plan")
        from gpuplan.report.terminal import progress

        with progress("searching GPU servers and pricing them…"):
            result = api.plan(path, top=top, catalog_files=catalog or [], price_files=prices or [])
    except GpuplanError as exc:
        _fail(exc)
        return
    from gpuplan.report.plan import render_costs_text

    if format is Format.json:
        import json

        typer.echo(json.dumps({"project": result.project, "currency": (result.recommendation.deployment.currency
                                                                        if result.recommendation and
                                                                        result.recommendation.deployment else None),
                               "candidates": [{"gpu_id": c.gpu_id, "gpus_per_server": c.gpus_per_server,
                                               "servers": c.servers, "deployment": c.deployment and
                                               c.deployment.model_dump(mode="json"),
                                               "deployments": [d.model_dump(mode="json") for d in c.deployments]}
                                              for c in result.candidates[:top]]}, indent=2))
    else:
        render_costs_text(result, Console(), top=top)


class TracePrecision(str, Enum):
    fp32 = "fp32"
    bf16_mixed = "bf16-mixed"
    fp16_mixed = "fp16-mixed"
    bf16 = "bf16"


@app.command()
def trace(
    factory: Annotated[str, typer.Argument(help="MODULE:FUNCTION returning (model, example_inputs); it is YOUR code "
                                                "and gpuplan runs it.")],
    inference: Annotated[bool, typer.Option("--inference", help="One forward under no_grad instead of a training "
                                                                "step.")] = False,
    precision: Annotated[TracePrecision, typer.Option(help="Training precision.")] = TracePrecision.fp32,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Exact peak memory and FLOPs of any PyTorch model's training step (or forward), without a GPU: imports and
    runs your factory under FakeTensorMode (needs the `trace` extra)."""
    try:
        try:
            from gpuplan.trace.custom import trace_factory
        except ImportError:
            raise GpuplanError("gpuplan trace needs torch: pip install 'gpuplan[trace]'") from None
        from gpuplan.report.terminal import progress

        with progress(f"tracing {factory}…"):
            result = trace_factory(factory, training=not inference, precision=precision.value)
    except GpuplanError as exc:
        _fail(exc)
        return
    if format is Format.json:
        typer.echo(result.model_dump_json(indent=2))
        return
    from rich.table import Table

    from gpuplan.units import GIB

    t = Table(title=f"{factory}: {result.model_class}, {result.parameters / 1e6:,.1f} M parameters "
                    f"({result.trainable_parameters / 1e6:,.1f} M trainable), "
                    + ("inference" if inference else f"training step, {precision.value}"))
    t.add_column("part")
    t.add_column("at the peak", justify="right")
    for label, v in (("parameters", result.parameters_bytes), ("gradients", result.gradients_bytes),
                     ("optimizer states", result.optimizer_bytes),
                     ("activations and temporaries", result.other_bytes)):
        t.add_row(label, f"{v / GIB:,.3f} GiB")
    t.add_section()
    t.add_row("[bold]tensor peak[/bold] (torch max_memory_allocated)", f"{result.peak_bytes / GIB:,.3f} GiB")
    Console().print(t)
    Console().print(f"FLOPs per {'forward' if inference else 'step'}: {result.flops_per_step:.4g}; phase peaks: "
                    + ", ".join(f"{k} {v / GIB:,.3f} GiB" for k, v in result.phase_peaks.items())
                    + f"; traced in {result.seconds:.1f} s. Add the CUDA context (~0.5-1.3 GiB) and the "
                    "allocator's reserve for what nvidia-smi shows.")


@app.command()
def fit(
    project: Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")] = None,
    gpu: Annotated[str, typer.Option(help="GPU id (see `gpuplan catalog gpus`).")] = ...,  # type: ignore[assignment]
    gpus: Annotated[Optional[int], typer.Option(min=1, help="Number of GPUs (default: the project's).")] = None,
    example: Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")] = None,
    headroom: Annotated[Optional[float], typer.Option(min=0.0, max=0.8, help="Fraction of GPU memory kept free "
                                                                              "(default 0.10).")] = None,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
    catalog: CatalogFiles = None,
) -> None:
    """On this hardware: the largest micro-batch, sequence (context) and model scale that fit, with and without
    gradient checkpointing."""
    try:
        path = _project_path(project, example, "fit")
        result = api.fit(path, gpu=gpu, gpus=gpus, headroom=headroom, catalog_files=catalog or [])
    except GpuplanError as exc:
        _fail(exc)
        return
    from gpuplan.report.plan import render_fit_text, render_json

    if format is Format.json:
        typer.echo(render_json(result))
    else:
        render_fit_text(result, Console())


@catalog_app.command("gpus")
def catalog_gpus(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                 catalog: CatalogFiles = None) -> None:
    """GPUs and accelerators: memory, bandwidth, dense TFLOPS, power, links, market class, price; with sources."""
    _list_rows("gpu", row_id, catalog, where, as_json, [
        ("id", str), ("memory", lambda g: f"{g.memory_gib:g} GiB {g.memory_type}"),
        ("GB/s", lambda g: _num(g.memory_bandwidth_gbs)), ("bf16/fp16 TFLOPS", lambda g: _num(g.tflops.bf16 or g.tflops.fp16)),
        ("fp8", lambda g: _num(g.tflops.fp8)), ("W", lambda g: _num(g.tdp_w)),
        ("link", lambda g: g.interconnect.kind if g.interconnect.kind == "none"
         else f"{g.interconnect.kind} {g.interconnect.bandwidth_gbs:g} GB/s x{g.interconnect.domain_gpus}"),
        ("class", lambda g: g.market_class), ("price", lambda g: f"${g.price.usd:,.0f} ({g.price.as_of.year})" if g.price else "-"),
    ])


@catalog_app.command("cpus")
def catalog_cpus(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                 catalog: CatalogFiles = None) -> None:
    """Server CPUs: cores, PCIe lanes, memory channels, TDP, price; with sources."""
    _list_rows("cpu", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda c: c.name), ("cores", lambda c: str(c.cores)),
        ("PCIe lanes", lambda c: str(getattr(c, "pcie_lanes", "-"))),
        ("mem channels", lambda c: str(getattr(c, "memory_channels", "-"))),
        ("W", lambda c: _num(getattr(c, "tdp_w", None))),
    ])


@catalog_app.command("platforms")
def catalog_platforms(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                      catalog: CatalogFiles = None) -> None:
    """Server platforms (chassis): GPU slots and form factors, PSU, rack units; with sources."""
    _list_rows("platform", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda p: p.name), ("GPUs", lambda p: str(p.gpu_slots)),
        ("form factors", lambda p: ", ".join(getattr(p, "gpu_form_factors", []) or [])),
        ("PSU W", lambda p: _num(getattr(p, "psu_total_w", None))),
        ("U", lambda p: _num(getattr(p, "rack_units", None), "{:g}")),
    ])


@catalog_app.command("drives")
def catalog_drives(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                   catalog: CatalogFiles = None) -> None:
    """NVMe drives: capacity and throughput; with sources."""
    _list_rows("drive", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda d: d.name), ("TB", lambda d: f"{d.capacity_tb:g}"),
        ("read GB/s", lambda d: _num(getattr(d, "seq_read_gbs", None), "{:g}")),
        ("write GB/s", lambda d: _num(getattr(d, "seq_write_gbs", None), "{:g}")),
    ])


@catalog_app.command("nics")
def catalog_nics(row_id: RowId = None, as_json: AsJson = False, where: Where = None,
                 catalog: CatalogFiles = None) -> None:
    """Network cards: ports and speed, InfiniBand or Ethernet, RDMA; with sources."""
    _list_rows("nic", row_id, catalog, where, as_json, [
        ("id", str), ("name", lambda n: n.name), ("ports", lambda n: str(n.ports)),
        ("Gb/s per port", lambda n: _num(getattr(n, "gbps_per_port", None))),
        ("kind", lambda n: str(getattr(n, "kind", "-"))),
    ])


@catalog_app.command("models")
def catalog_models(row_id: RowId = None, as_json: AsJson = False) -> None:
    """Built-in model presets with their sources."""
    try:
        if as_json:
            import json

            from gpuplan.catalog.listing import models_json

            typer.echo(json.dumps(models_json(row_id), indent=2))
            return
        from gpuplan.catalog.listing import model_rows

        presets = model_rows(row_id)
    except GpuplanError as exc:
        _fail(exc)
        return
    from rich.table import Table

    t = Table("id", "name", "parameters", "model_type", "as_of", "source")
    for p in presets:
        t.add_row(p.id, p.name, f"{p.parameters / 1e9:,.2f} B", p.config["model_type"], str(p.as_of),
                  p.source[:60])
    Console().print(t)


def _register_commands() -> None:
    """Commands kept in their own modules (gpuplan.commands)."""
    from gpuplan.commands import check as check_command
    from gpuplan.commands import export as export_command
    from gpuplan.commands import serve as serve_command

    export_command.register(app)
    check_command.register(app)
    serve_command.register(app)


_register_commands()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
