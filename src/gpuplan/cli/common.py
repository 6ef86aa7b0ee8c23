"""What the commands of `gpuplan` share: the error exit, the project argument, the option types.

Each command module imports this one and nothing else of gpuplan.cli. Only light modules are imported here, so
that `gpuplan --help` starts fast: the API, the catalogs, the reports and the pydantic schema are imported inside
the command bodies."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from gpuplan.errors import GpuplanError, InfeasibleError
from gpuplan.schema.defaults import MEMORY_HEADROOM, OBJECTIVES, PLAN_TOP


class State:
    """Set by the app's callback (`gpuplan --debug`); an app of a test's own keeps the defaults."""

    debug = False


state = State()


def fail(exc: GpuplanError) -> NoReturn:
    """One line on stderr and exit 1 (infeasible project) or 2 (bad input); with --debug, the traceback."""
    if state.debug:
        raise exc
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[red]error[/red]: {escape(str(exc))}", markup=True, highlight=False)
    raise typer.Exit(1 if isinstance(exc, InfeasibleError) else 2)


def project_path(project: Path | None, example: str | None, command: str) -> Path:
    """The project file given, or the built-in example named; exactly one of them."""
    if (project is None) == (example is None):
        raise GpuplanError(f"give a project file or --example NAME (`gpuplan {command} --list-examples`)")
    from gpuplan.catalog.loader import example_path

    return project if project is not None else example_path(example or "")


def echo_examples() -> None:
    """`--list-examples`: the built-in example projects, one a line."""
    from gpuplan.catalog.loader import example_names

    typer.echo("\n".join(example_names()))


# `--objective`: the values of the project's goals.objective (gpuplan.schema.project.Objective, a Literal), as the
# str Enum typer shows and parses.
Objective = Enum("Objective", {v: v for v in OBJECTIVES},  # type: ignore[misc]
                 type=str, module=__name__)
Objective.__doc__ = "`--objective` of plan and export (the values of the project's goals.objective)."



class Format(str, Enum):
    text = "text"
    json = "json"


class PlanFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"
    html = "html"


ProjectFile = Annotated[Optional[Path], typer.Argument(help="Project file (YAML or JSON).")]
Example = Annotated[Optional[str], typer.Option(help="A built-in example project instead of a file.")]
ListExamples = Annotated[bool, typer.Option("--list-examples", help="List the built-in examples.")]
OutputFormat = Annotated[Format, typer.Option("--format", help="Output format.")]
Headroom = Annotated[Optional[float], typer.Option(min=0.0, max=0.8, help="Fraction of GPU memory kept free "
                                                                           f"(default {MEMORY_HEADROOM:.2f}).")]
CatalogFiles = Annotated[Optional[list[Path]], typer.Option(
    "--catalog", help="A file of your own rows (TOML or YAML, same schema); a row replaces the built-in one with "
                      "the same id. Repeatable.")]
PriceFiles = Annotated[Optional[list[Path]], typer.Option(
    "--prices", help="A price list of your own (CSV or YAML: cloud GPU-hour prices, hosting offers), added to the "
                     "built-in ones. Repeatable.")]

__all__ = ["CatalogFiles", "Example", "Format", "Headroom", "ListExamples", "Objective", "OutputFormat", "PLAN_TOP",
           "PlanFormat", "PriceFiles", "ProjectFile", "echo_examples", "fail", "project_path", "state"]
