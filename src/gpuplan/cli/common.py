"""What the commands of `gpuplan` share: the error exit, the project argument, the option types.

Each command module imports this one and nothing else of gpuplan.cli. Only light modules are imported here, so
that `gpuplan --help` starts fast: the API, the catalogs, the reports and the pydantic schema are imported inside
the command bodies."""

import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from gpuplan.errors import ECHO_CHARS, GpuplanError, InfeasibleError, InputError, InternalError
from gpuplan.schema.defaults import MEMORY_HEADROOM, OBJECTIVES, PLAN_TOP

if TYPE_CHECKING:
    from rich.console import Console


class State:
    """Set by the app's callback (`gpuplan --debug`); an app of a test's own keeps the defaults."""

    debug = False


state = State()


#: the longest error message printed, characters (messages cut what they echo of the input; this is the backstop)
MAX_MESSAGE_CHARS = 20 * ECHO_CHARS


def console(stderr: bool = False, soft_wrap: bool = False) -> "Console":
    """A rich console for the commands' output. Emoji codes stay text: rich would draw `:fire:` in a project's name
    or a catalog row as an emoji (and import its table of 3,600 codes to look it up). Output to a closed pipe
    stops as everywhere in gpuplan (broken_pipe), where rich's own handling exits 1, the infeasible project's code."""
    from rich.console import Console

    out = Console(stderr=stderr, soft_wrap=soft_wrap, emoji=False)
    out.on_broken_pipe = broken_pipe  # type: ignore[method-assign]
    return out


def exit_code(exc: GpuplanError) -> int:
    """1: infeasible project; 3: a bug (InternalError); 2: every other error."""
    return 1 if isinstance(exc, InfeasibleError) else 3 if isinstance(exc, InternalError) else 2


def fail(exc: GpuplanError) -> NoReturn:
    """One line on stderr and exit 1 (infeasible project), 2 (bad input) or 3 (a bug); with --debug, the
    traceback."""
    if state.debug:
        raise exc
    from rich.markup import escape

    text = str(exc)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... ({len(text):,} characters)"
    console(stderr=True, soft_wrap=True).print(f"[red]error[/red]: {escape(text)}", markup=True, highlight=False)
    raise typer.Exit(exit_code(exc))


def fail_internal(exc: BaseException) -> NoReturn:
    """An exception that is not gpuplan's own: the one-line `internal` error, exit 3; with --debug, re-raised
    with its traceback."""
    if state.debug:
        raise exc
    fail(InternalError.wrap(exc))


def _click_exception() -> type[Exception]:
    """The ClickException of the click typer runs on: the `click` package up to typer 0.2x, typer's own copy
    (typer._click) from 0.29 on. Taken from typer.BadParameter's bases, so that neither is imported by name."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


#: what click itself turns into an exit: a usage error (an unknown option or command, a bad value: its message and
#: exit code 2), an exit, an abort
CLICK_EXITS: tuple[type[BaseException], ...] = (typer.Exit, typer.Abort, _click_exception())


#: the exit code of a command whose output's reader went away: 128 + SIGPIPE, what the shell reports for a program
#: the signal stops (`yes | head`)
BROKEN_PIPE_EXIT = 141


def broken_pipe() -> NoReturn:
    """The reader of the output went away (`gpuplan catalog gpus | head`): stop quietly, with no error line. The
    standard output goes to /dev/null first, else the interpreter's last flush fails on the pipe again."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(BROKEN_PIPE_EXIT)


class Commands(TyperGroup):
    """The app's command group: the boundary below which no exception escapes. gpuplan's own errors become their
    one line (fail); click's usage errors keep their message and exit code 2; output to a closed pipe stops quietly
    (broken_pipe); anything else is the `internal` error, exit code 3 (docs/errors.md)."""

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer's own copy of click since 0.29)
        try:
            return super().invoke(ctx)
        except CLICK_EXITS:
            raise
        except GpuplanError as exc:
            fail(exc)
        except BrokenPipeError:
            broken_pipe()
        except Exception as exc:  # noqa: BLE001 - the boundary: a bug, reported in one line
            fail_internal(exc)


def check_out(out: Path, force: bool) -> None:
    """`--out` can be written: its folder exists, it is not a folder nor a link to nothing, and it exists only
    with --force (gpuplan never overwrites a file without it)."""
    if out.is_symlink() and not out.exists():
        raise InputError(["--out"], f"{out} is a link to a file that does not exist; gpuplan does not write through "
                         "it (remove the link, or give another file)")
    if out.is_dir():
        raise InputError(["--out"], f"{out} is a folder; give the name of a file to write")
    folder = out.parent
    if not folder.is_dir():
        raise InputError(["--out"], f"the folder {folder} does not exist (create it first)")
    if out.exists() and not force:
        raise InputError(["--out"], f"{out} exists; gpuplan never overwrites a file unless --force is given")


def write_out(out: Path, text: str, force: bool) -> None:
    """Write `text` to --out after check_out; a file that appeared meanwhile is not replaced without --force."""
    check_out(out, force)
    try:
        with out.open("w" if force else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise InputError(["--out"], f"{out} exists; gpuplan never overwrites a file unless --force is given") \
            from None
    except OSError as exc:
        raise InputError(["--out"], f"cannot write {out}: {exc.strerror or exc}") from None


def day(as_of: datetime.datetime | None) -> datetime.date | None:
    """`--as-of` as the date the API takes (typer parses it as a datetime)."""
    return None if as_of is None else as_of.date()


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


ProjectFile = Annotated[Path | None, typer.Argument(help="Project file (YAML or JSON).")]
Example = Annotated[str | None, typer.Option(help="A built-in example project instead of a file.")]
ListExamples = Annotated[bool, typer.Option("--list-examples", help="List the built-in examples.")]
OutputFormat = Annotated[Format, typer.Option("--format", help="Output format.")]
Headroom = Annotated[float | None, typer.Option(min=0.0, max=0.8, help="Fraction of GPU memory kept free "
                                                                           f"(default {MEMORY_HEADROOM:.2f}).")]
CatalogFiles = Annotated[list[Path] | None, typer.Option(
    "--catalog", help="A file of your own rows (TOML, YAML or JSON, same schema); a row replaces the built-in one with "
                      "the same id. Repeatable.")]
RatesFiles = Annotated[list[Path] | None, typer.Option(
    "--rates", help="A rates file `gpuplan calibrate` wrote: its GPU is timed as measured on your machine. "
                    "Repeatable.")]
AsOf = Annotated[datetime.datetime | None, typer.Option(
    "--as-of", formats=["%Y-%m-%d"], help="The date the plan is made for (default: $GPUPLAN_AS_OF, else today): "
                                          "quotes older than six months on it are flagged and weigh less, and no "
                                          "row of your --catalog or --prices files may postdate it.")]
PriceFiles = Annotated[list[Path] | None, typer.Option(
    "--prices", help="A price list of your own (CSV or YAML: cloud GPU-hour prices, hosting offers), added to the "
                     "built-in ones. Repeatable.")]

__all__ = ["AsOf", "BROKEN_PIPE_EXIT", "CatalogFiles", "Commands", "Example", "Format", "Headroom", "ListExamples",
           "Objective", "OutputFormat", "PLAN_TOP", "PlanFormat", "PriceFiles", "ProjectFile", "RatesFiles",
           "broken_pipe",
           "check_out", "console", "day", "echo_examples", "exit_code", "fail", "fail_internal", "project_path",
           "state", "write_out"]
