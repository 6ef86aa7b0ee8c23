"""`gpuplan export`: the launcher configuration (Accelerate, DeepSpeed, torchrun, SkyPilot; torchtune, Axolotl,
torchtitan for candidates planned on them) that realises a candidate of the plan. Prints it, or writes it to --out
without ever replacing an existing file unless --force."""

import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from gpuplan.schema.plan import Candidate
    from gpuplan.schema.project import Project

from gpuplan.cli.common import (
    AsOf,
    Example,
    ListExamples,
    Objective,
    ProjectFile,
    day,
    echo_examples,
    fail,
    project_path,
    write_out,
)
from gpuplan.errors import GpuplanError, InputError


class To(str, Enum):
    accelerate = "accelerate"
    deepspeed = "deepspeed"
    torchrun = "torchrun"
    skypilot = "skypilot"
    kserve = "kserve"
    lws = "lws"
    vllm_helm = "vllm-helm"
    trl = "trl"
    verl = "verl"
    torchtune = "torchtune"
    axolotl = "axolotl"
    torchtitan = "torchtitan"


def export_command(
    project: ProjectFile = None,
    to: Annotated[To | None, typer.Option("--to", help="Launcher to write (required): an Accelerate config, a "
                                                       "DeepSpeed config, a torchrun command line or a SkyPilot "
                                                       "task; for serving, a SkyServe service, a KServe "
                                                       "InferenceService, a LeaderWorkerSet or Helm values for "
                                                       "vLLM's production stack; for post-training, a TRL "
                                                       "GRPO/DPO config or verl's GRPO overrides.")] = None,
    example: Example = None,
    list_examples: ListExamples = False,
    candidate: Annotated[int, typer.Option(min=0, help="Which candidate of the plan: 0 is the recommendation, "
                                                        "1 the next row of `gpuplan plan`, ...")] = 0,
    out: Annotated[Path | None, typer.Option(help="Write to this file (a folder: under the suggested name) "
                                                     "instead of printing.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out when it exists.")] = False,
    objective: Annotated[Objective | None, typer.Option(help="Rank as `gpuplan plan --objective` does.")] = None,
    catalog: Annotated[list[Path] | None, typer.Option(
        "--catalog", help="A file of your own catalog rows, as for `gpuplan plan`. Repeatable.")] = None,
    prices: Annotated[list[Path] | None, typer.Option(
        "--prices", help="A price list of your own, as for `gpuplan plan`. Repeatable.")] = None,
    as_of: AsOf = None,
) -> None:
    """The launcher configuration that realises a candidate of the plan: Accelerate config YAML, DeepSpeed
    config JSON, torchrun command line or SkyPilot task YAML, with what to edit in its first lines."""
    if list_examples:
        echo_examples()
        return
    try:
        if to is None:
            raise InputError(["--to"], "give the launcher to write with --to", ", ".join(t.value for t in To))
        path = project_path(project, example, "export")
        name, text = _export(path, to.value, candidate, objective.value if objective else None,
                             catalog or [], prices or [], day(as_of))
        if out is None:
            typer.echo(text, nl=False)
            return
        written = _write(out / name if out.is_dir() else out, text, force, executable=to is To.torchrun)
    except GpuplanError as exc:
        fail(exc)
    typer.echo(f"wrote {written}", err=True)


def _export(path: Path, target: str, index: int, objective: str | None, catalog: list[Path],
            prices: list[Path], as_of: datetime.date | None) -> tuple[str, str]:
    from gpuplan import api
    from gpuplan.catalog.loader import find_preset, load_project
    from gpuplan.core.export.common import STACK_TARGETS
    from gpuplan.core.export.targets import export
    from gpuplan.report.terminal import progress

    proj, base = load_project(path)
    with progress("searching GPU servers…"):
        result = api.plan(proj, objective=objective, base_dir=base, catalog_files=catalog, price_files=prices,
                          as_of=as_of)
    cands = result.candidates
    if index >= len(cands):
        raise InputError(["--candidate"], f"the plan has {len(cands)} candidate(s)", f"0-{len(cands) - 1}")
    ref = proj.model
    model_id = ref.hf_id or (find_preset(ref.preset).hf_id if ref.preset else None)
    if target in STACK_TARGETS:  # the framework's config carries what the plan timed: its defaults filled in
        proj = _as_timed(proj, cands[index])
    try:
        return export(proj, cands[index], target, index=index, model_id=model_id)
    except InputError as exc:
        if exc.loc != ("--candidate",):
            raise
        ok = []
        for i, c in enumerate(cands):
            try:
                export(proj, c, target, index=i, model_id=model_id)
                ok.append(str(i))
            except GpuplanError:
                continue
        hint = f"; candidates that export to {target}: {', '.join(ok[:10])}" if ok else \
            f"; no candidate of this plan exports to {target}"
        raise InputError([], str(exc) + hint) from None


def _as_timed(proj: "Project", cand: "Candidate") -> "Project":
    """The project with the defaults of the framework its candidate was timed on filled in where it leaves a key
    unset (catalog/frameworks.with_framework, as the plan applied them)."""
    from gpuplan.catalog.frameworks import with_framework
    from gpuplan.schema.project import Workload

    framework = cand.stack.framework if cand.stack is not None else None
    if framework is None or proj.workload.framework is not None:
        return with_framework(proj)[0]
    named = Workload.model_validate({**proj.workload.model_dump(exclude_unset=True), "framework": framework})
    return with_framework(proj.model_copy(update={"workload": named}))[0]


def _write(path: Path, text: str, force: bool, *, executable: bool) -> Path:
    """Write a new file (common.write_out: an existing one is replaced only with --force), executable if asked."""
    write_out(path, text, force)
    if executable:
        path.chmod(path.stat().st_mode | 0o111)
    return path


def register(app: typer.Typer) -> None:
    """Add `export` to a typer app."""
    app.command("export")(export_command)
