"""`gpuplan fit`: on given hardware, the largest micro-batch, sequence and model scale that fit."""

from typing import Annotated

import typer

from gpuplan.cli.common import (
    AsOf,
    CatalogFiles,
    Example,
    Format,
    Headroom,
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
from gpuplan.errors import GpuplanError, InputError


def fit(
    project: ProjectFile = None,
    gpu: Annotated[str | None, typer.Option(help="GPU id (see `gpuplan catalog gpus`; required).")] = None,
    gpus: Annotated[int | None, typer.Option(min=1, max=100_000, help="Number of GPUs (default: the "
                                                                       "project's).")] = None,
    example: Example = None,
    list_examples: ListExamples = False,
    headroom: Headroom = None,
    format: OutputFormat = Format.text,
    catalog: CatalogFiles = None,
    rates: RatesFiles = None,
    as_of: AsOf = None,
) -> None:
    """On this hardware: the largest micro-batch, sequence (context) and model scale that fit, with and without
    gradient checkpointing."""
    if list_examples:
        echo_examples()
        return
    from gpuplan import api

    files = [*(catalog or []), *(rates or [])]  # a rates file is a catalog file (gpuplan calibrate)
    try:
        if gpu is None:
            raise InputError(["--gpu"], "give the GPU to fit on with --gpu (`gpuplan catalog gpus` lists them)")
        path = project_path(project, example, "fit")
        result = api.fit(path, gpu=gpu, gpus=gpus, headroom=headroom, catalog_files=files, as_of=day(as_of))
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
