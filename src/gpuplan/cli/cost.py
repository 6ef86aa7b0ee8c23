"""`gpuplan cost`: where the recommended server lives and what it costs (buying, hosting, cloud)."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuplan.cli.common import (
    AsOf,
    CatalogFiles,
    Example,
    Format,
    ListExamples,
    OutputFormat,
    PriceFiles,
    ProjectFile,
    RatesFiles,
    console,
    day,
    echo_examples,
    fail,
    project_path,
)
from gpuplan.errors import GpuplanError

if TYPE_CHECKING:
    from gpuplan.schema.plan import PlanResult


def cost(
    project: ProjectFile = None,
    example: Example = None,
    list_examples: ListExamples = False,
    top: Annotated[int, typer.Option(min=1, max=100_000, help="Compare the deployments of this many candidates.")] = 1,
    format: OutputFormat = Format.text,
    catalog: CatalogFiles = None,
    rates: RatesFiles = None,
    prices: PriceFiles = None,
    as_of: AsOf = None,
) -> None:
    """Where the recommended server lives and what it costs: buying it, managed hosting, cloud GPUs; total
    over the horizon, per month, per run or per million tokens, and the break-even between them."""
    if list_examples:
        echo_examples()
        return
    from gpuplan import api
    from gpuplan.report.terminal import progress

    files = [*(catalog or []), *(rates or [])]  # a rates file is a catalog file (gpuplan calibrate)
    try:
        path = project_path(project, example, "cost")
        with progress("searching GPU servers and pricing them…"):
            result = api.plan(path, top=top, catalog_files=files, price_files=prices or [], as_of=day(as_of))
    except GpuplanError as exc:
        fail(exc)
    if format is Format.json:
        from gpuplan.report.strict_json import dumps

        typer.echo(dumps(_costs_json(result, top), indent=2))
    else:
        from gpuplan.report.plan import render_costs_text

        render_costs_text(result, console(), top=top)


def _costs_json(result: "PlanResult", top: int) -> dict[str, Any]:
    rec = result.recommendation
    return {"project": result.project,
            "currency": rec.deployment.currency if rec and rec.deployment else None,
            "candidates": [{"gpu_id": c.gpu_id, "gpus_per_server": c.gpus_per_server, "servers": c.servers,
                            "deployment": c.deployment and c.deployment.model_dump(mode="json"),
                            "deployments": [d.model_dump(mode="json") for d in c.deployments]}
                           for c in result.candidates[:top]]}


def register(app: typer.Typer) -> None:
    """Add `cost` to a typer app."""
    app.command()(cost)
