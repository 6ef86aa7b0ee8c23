"""`gpuplan plan`: which server to get, ranked candidates, in the terminal, as JSON or as a report document."""

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuplan.cli.common import (
    PLAN_TOP,
    AsOf,
    CatalogFiles,
    Example,
    Headroom,
    ListExamples,
    Objective,
    PlanFormat,
    PriceFiles,
    ProjectFile,
    RatesFiles,
    check_out,
    console,
    day,
    echo_examples,
    fail,
    project_path,
    write_out,
)
from gpuplan.errors import GpuplanError

if TYPE_CHECKING:
    from gpuplan.core.audit.machine import MachineSpec
    from gpuplan.schema.plan import PlanResult


def plan(
    project: ProjectFile = None,
    example: Example = None,
    list_examples: ListExamples = False,
    objective: Annotated[Objective | None, typer.Option(help="Rank by cost, time or both (default: the "
                                                                 "project's goals.objective).")] = None,
    top: Annotated[int, typer.Option(min=1, max=100_000, help="How many candidates to show.")] = PLAN_TOP,
    headroom: Headroom = None,
    format: Annotated[PlanFormat, typer.Option("--format", help="Output format: the terminal, JSON, or a Markdown "
                                                                 "/ self-contained HTML report.")] = PlanFormat.text,
    out: Annotated[Path | None, typer.Option("--out", help="Write the report to this file (never overwrites "
                                                             "one without --force).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    lang: Annotated[str, typer.Option("--lang", help="Report language: en or fr.")] = "en",
    details: Annotated[bool, typer.Option("--details", help="Text output: after the one-screen summary, every reason, "
                                                            "the server's rules and the GPUs not chosen.")] = False,
    catalog: CatalogFiles = None,
    rates: RatesFiles = None,
    prices: PriceFiles = None,
    have: Annotated[Path | None, typer.Option("--have", help="The server you already have, as a server file "
                                                               "(the `check --server` format, docs/check.md): the "
                                                               "plan answers first whether it can do the job and "
                                                               "how, then what to add, rent or buy.")] = None,
    this_machine: Annotated[bool, typer.Option("--this-machine", help="Like --have, for this machine (probed: CPU, "
                                                                      "RAM, disks, NVIDIA GPUs).")] = False,
    as_of: AsOf = None,
) -> None:
    """Which server to get: balanced candidates that fit, ranked, with the decision checklist answered.
    Exit 1 when nothing satisfies the project (the message names the binding constraint)."""
    if list_examples:
        echo_examples()
        return
    from gpuplan import api
    from gpuplan.report.i18n import check_lang
    from gpuplan.report.terminal import progress

    files = [*(catalog or []), *(rates or [])]  # a rates file is a catalog file (gpuplan calibrate)
    try:
        check_lang(lang)  # every format takes the same languages, the terminal's text too
        path = project_path(project, example, "plan")
        owned = _owned(have, this_machine, files, day(as_of))
        with progress("searching GPU servers…"):
            result = api.plan(path, objective=objective.value if objective else None, headroom=headroom, top=top,
                              catalog_files=files, price_files=prices or [], have=owned, as_of=day(as_of))
    except GpuplanError as exc:
        fail(exc)
    try:
        text = _document(result, format, out, force, lang, top, details)
    except GpuplanError as exc:
        fail(exc)
    if text is None:
        return
    if out is None:
        typer.echo(text)
    else:
        try:
            write_out(out, text, force)
        except GpuplanError as exc:
            fail(exc)
        console(stderr=True).print(f"wrote {out}")


def _owned(have: Path | None, this_machine: bool, catalog: list[Path],
           as_of: "datetime.date | None") -> "MachineSpec | None":
    """The server the team has: read from --have, probed with --this-machine, or None."""
    if have is None and not this_machine:
        return None
    from gpuplan.errors import InputError

    if have is not None and this_machine:
        raise InputError(["--have"], "give one of --have FILE (a server file) and --this-machine (probe this "
                                     "machine), not both")
    from gpuplan.catalog.hardware import load_catalog
    from gpuplan.catalog.server_file import read_server_file
    from gpuplan.cli.probe import probe_machine
    from gpuplan.clock import plan_date

    cat = load_catalog(catalog, as_of=plan_date(as_of))
    return probe_machine(catalog=cat) if this_machine else read_server_file(have or Path(), cat)


def _document(result: "PlanResult", format: PlanFormat, out: Path | None, force: bool, lang: str, top: int,
              details: bool) -> str | None:
    """The plan as JSON, Markdown or HTML; None when the text output was printed to the terminal instead."""
    from gpuplan.report.plan import render_json, render_text

    if out is not None:
        check_out(out, force)
    if format is PlanFormat.json:
        return render_json(result)
    if format is PlanFormat.md:
        from gpuplan.report.document import render_markdown

        return render_markdown(result, lang=lang)
    if format is PlanFormat.html:
        from gpuplan.report.document import render_html

        return render_html(result, lang=lang)
    if out is not None:
        raise GpuplanError("--out writes a report: use --format md, html or json with it")
    render_text(result, console(), top=top, details=details, lang=lang)
    return None


def register(app: typer.Typer) -> None:
    """Add `plan` to a typer app."""
    app.command()(plan)
