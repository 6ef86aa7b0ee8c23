"""`gpuplan fit`: on given hardware, the largest micro-batch, sequence and model scale that fit."""

from typing import Annotated

import typer

from gpuplan.cli.common import (
    AsOf,
    CatalogFiles,
    Example,
    Format,
    Headroom,
    OutputFormat,
    ProjectFile,
    console,
    day,
    fail,
    project_path,
)
from gpuplan.errors import GpuplanError


def fit(
    project: ProjectFile = None,
    gpu: Annotated[str, typer.Option(help="GPU id (see `gpuplan catalog gpus`).")] = ...,  # type: ignore[assignment]
    gpus: Annotated[int | None, typer.Option(min=1, max=100_000, help="Number of GPUs (default: the "
                                                                       "project's).")] = None,
    example: Example = None,
    headroom: Headroom = None,
    format: OutputFormat = Format.text,
    catalog: CatalogFiles = None,
    as_of: AsOf = None,
) -> None:
    """On this hardware: the largest micro-batch, sequence (context) and model scale that fit, with and without
    gradient checkpointing."""
    from gpuplan import api

    try:
        path = project_path(project, example, "fit")
        result = api.fit(path, gpu=gpu, gpus=gpus, headroom=headroom, catalog_files=catalog or [], as_of=day(as_of))
    except GpuplanError as exc:
        fail(exc)
    from gpuplan.report.plan import render_fit_text, render_json

    if format is Format.json:
        typer.echo(render_json(result))
    else:
        render_fit_text(result, console())


def register(app: typer.Typer) -> None:
    """Add `fit` to a typer app."""
    app.command()(fit)
