"""`gpuplan estimate`: the peak GPU memory per GPU of a project, or of a Hugging Face model alone."""

from contextlib import nullcontext
from typing import Annotated

import typer

from gpuplan.cli.common import (
    AsOf,
    CatalogFiles,
    Example,
    Format,
    ListExamples,
    OutputFormat,
    ProjectFile,
    RatesFiles,
    console,
    day,
    echo_examples,
    fail,
    project_path,
)
from gpuplan.errors import GpuplanError


def estimate(
    project: ProjectFile = None,
    example: Example = None,
    list_examples: ListExamples = False,
    gpu: Annotated[str | None, typer.Option(help="GPU id (see `gpuplan catalog gpus`).")] = None,
    gpus: Annotated[int | None, typer.Option(min=1, max=100_000, help="Number of GPUs.")] = None,
    hf: Annotated[str | None, typer.Option("--hf", help="A Hugging Face model id (org/name): replaces the "
                                                          "project's model; alone, sizes serving it.")] = None,
    format: OutputFormat = Format.text,
    catalog: CatalogFiles = None,
    rates: RatesFiles = None,
    as_of: AsOf = None,
) -> None:
    """Peak GPU memory per GPU: weights, gradients, optimizer, activations, KV cache, at three levels."""
    if list_examples:
        echo_examples()
        return
    from gpuplan import api
    from gpuplan.report.terminal import progress

    files = [*(catalog or []), *(rates or [])]  # a rates file is a catalog file (gpuplan calibrate)
    try:
        source = _source(project, example, hf)
        with progress(f"fetching {hf} from the Hugging Face Hub…") if hf else nullcontext():
            result = api.estimate(source, gpu=gpu, gpus=gpus, catalog_files=files,  # type: ignore[arg-type]
                                  as_of=day(as_of))
    except GpuplanError as exc:
        fail(exc)
    if format is Format.json:
        from gpuplan.report.estimate import render_json

        typer.echo(render_json(result))
    else:
        from gpuplan.report.estimate import render_text

        render_text(result, console())


def _source(project: ProjectFile, example: Example, hf: str | None) -> object:
    """What to estimate: the project (its model replaced by --hf when given), or --hf alone: what serving the
    model one request needs."""
    if hf and project is None and example is None:
        return {"name": hf, "model": {"hf_id": hf}, "workload": {"task": "inference"}}
    source = project_path(project, example, "estimate")
    if not hf:
        return source
    from gpuplan.catalog.loader import load_project

    proj, _ = load_project(source)
    return proj.model_copy(update={"model": proj.model.model_copy(
        update={"hf_id": hf, "preset": None, "hf_config": None})})


def register(app: typer.Typer) -> None:
    """Add `estimate` to a typer app."""
    app.command()(estimate)
