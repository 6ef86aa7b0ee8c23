"""The `gpuplan` command: parse arguments, call the API, render, exit with a code.

Exit codes: 0 ok; 1 infeasible project; 2 bad input (one line on stderr, no traceback unless --debug)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from gpuplan import api
from gpuplan.catalog.loader import example_names, example_path, load_gpus, load_presets
from gpuplan.errors import GpuplanError, InfeasibleError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="gpuplan: which GPU server to get for an AI project, and why.")
catalog_app = typer.Typer(no_args_is_help=True, help="List the built-in catalogs.")
app.add_typer(catalog_app, name="catalog")

_state = {"debug": False}


class Format(str, Enum):
    text = "text"
    json = "json"


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False) -> None:
    _state["debug"] = debug


def _fail(exc: GpuplanError) -> None:
    if _state["debug"]:
        raise exc
    Console(stderr=True, soft_wrap=True).print(f"[red]error[/red]: {exc}", markup=True, highlight=False)
    raise typer.Exit(1 if isinstance(exc, InfeasibleError) else 2)


@app.command()
def estimate(
    project: Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")] = None,
    example: Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")] = None,
    list_examples: Annotated[bool, typer.Option("--list-examples", help="List the built-in examples.")] = False,
    gpu: Annotated[Optional[str], typer.Option(help="GPU id (see `gpuplan catalog gpus`).")] = None,
    gpus: Annotated[Optional[int], typer.Option(min=1, help="Number of GPUs.")] = None,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Peak GPU memory per GPU: weights, gradients, optimizer, activations, KV cache, at three levels."""
    if list_examples:
        typer.echo("\n".join(example_names()))
        return
    try:
        if (project is None) == (example is None):
            raise GpuplanError("give a project file or --example NAME (`gpuplan estimate --list-examples`)")
        path = project if project is not None else example_path(example or "")
        result = api.estimate(path, gpu=gpu, gpus=gpus)
    except GpuplanError as exc:
        _fail(exc)
        return
    if format is Format.json:
        from gpuplan.report.estimate import render_json

        typer.echo(render_json(result))
    else:
        from gpuplan.report.estimate import render_text

        render_text(result, Console())


@catalog_app.command("models")
def catalog_models(as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False) -> None:
    """Built-in model presets with their sources."""
    try:
        presets = load_presets()
    except GpuplanError as exc:
        _fail(exc)
        return
    if as_json:
        import json

        typer.echo(json.dumps([p.model_dump(mode="json", exclude={"config"}) for p in presets.values()], indent=2))
        return
    from rich.table import Table

    t = Table("id", "name", "parameters", "model_type", "as_of", "source")
    for p in presets.values():
        t.add_row(p.id, p.name, f"{p.parameters / 1e9:,.2f} B", p.config["model_type"], str(p.as_of),
                  p.source[:60])
    Console().print(t)


@catalog_app.command("gpus")
def catalog_gpus(as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False) -> None:
    """Built-in GPUs (memory facts) with their sources."""
    try:
        gpus = load_gpus()
    except GpuplanError as exc:
        _fail(exc)
        return
    if as_json:
        import json

        typer.echo(json.dumps([g.model_dump(mode="json") for g in gpus.values()], indent=2))
        return
    from rich.table import Table

    t = Table("id", "name", "memory", "as_of", "source")
    for g in gpus.values():
        t.add_row(g.id, g.name, f"{g.memory_gib:g} GiB", str(g.as_of), g.source[:60])
    Console().print(t)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
