"""The Python API: glue between files and the pure core. The only place the API touches files. Every plan is made
for a date the caller can choose (`as_of`; gpuplan.clock.plan_date gives the default)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpuplan.catalog.currency import in_currency, usd_figures
from gpuplan.catalog.hardware import Catalog, builtin_catalog, load_catalog
from gpuplan.catalog.loader import (
    load_activation_table,
    load_fx,
    load_fx_dates,
    load_host_support,
    load_overheads,
    load_project,
    load_speed_model,
    parse_project,
    resolve_model,
)
from gpuplan.catalog.prices import load_prices
from gpuplan.catalog.server_rules import load_server_rules
from gpuplan.clock import plan_date
from gpuplan.collector import collector_paused
from gpuplan.core import advise
from gpuplan.core import estimate as core_estimate
from gpuplan.core.cost.deployments import median_rent
from gpuplan.core.sizing.lora import check_targets
from gpuplan.errors import GpuplanError, InfeasibleError, InputError
from gpuplan.schema.bundle import Bundle
from gpuplan.schema.defaults import OBJECTIVES, PLAN_TOP, Objective  # noqa: F401 (gpuplan.api.PLAN_TOP, as before)
from gpuplan.schema.estimate import Note
from gpuplan.schema.plan import Evidence, FitResult, PlanResult
from gpuplan.schema.prices import PriceBook
from gpuplan.schema.project import Hardware, Layout, Project
from gpuplan.schema.result import EstimateResult, HardwareInfo, ModelInfo
from gpuplan.schema.speed import ComputeOut
from gpuplan.units import GIB, fmt_ram_gb

if TYPE_CHECKING:  # imported when a plan has a machine (the audit's modules are not needed otherwise)
    from gpuplan.core.audit.checks import Alternative, AuditResult
    from gpuplan.core.audit.machine import MachineSpec


def estimate(project: Project | dict[str, Any] | str | Path, *, gpu: str | None = None, gpus: int | None = None,
             base_dir: Path | None = None, catalog: Catalog | None = None,
             catalog_files: Sequence[str | Path] = (), as_of: datetime.date | None = None) -> EstimateResult:
    """Peak memory per GPU, FLOPs, and with a GPU the training or inference speed, for a project (a Project,
    a dict, or a project file path).

    `gpu`/`gpus` override the project's `hardware` section. Without hardware: one GPU, no parallelism.
    `catalog_files` add or replace hardware rows (`--catalog`); `catalog` passes a loaded one. `as_of`: the date the
    estimate is made for (`plan_date`), which no row of `catalog_files` may postdate."""
    project, base_dir, framework_notes = _load_noted(project, base_dir)
    hw = project.hardware or Hardware()
    if gpus is not None:
        try:
            hw = Hardware(gpu=hw.gpu, gpus=gpus, layout=hw.layout if gpus % (hw.layout.tp * hw.layout.pp) == 0
                          else Layout())
        except ValueError as exc:
            raise InputError(["--gpus"], str(exc)) from None
    gpu_id = gpu or hw.gpu
    if catalog is None:
        catalog = load_catalog(catalog_files, as_of=plan_date(as_of)) if catalog_files else builtin_catalog()
    gpu_row = catalog.gpus.find(gpu_id, ["--gpu"] if gpu else ["hardware", "gpu"]) if gpu_id else None
    catalog_notes: list[Note] = list(framework_notes)
    if gpu_row is not None and not catalog.gpus.origins[gpu_row.id].file.startswith("gpuplan/"):
        origin = catalog.gpus.origins[gpu_row.id]
        catalog_notes.append(Note(code="catalog-user-row", message=f"GPU {gpu_row.id} comes from your catalog "
                                  f"{origin.file}" + (", replacing the built-in row" if origin.overrides_builtin
                                                      else "")))

    if project.model.trace:
        return _estimate_traced(project, base_dir, gpu_row, hw.gpus, catalog_notes)
    model = _resolve(project, base_dir)
    return core_estimate.estimate(project, model.arch, hw, gpu_row, model_name=model.name, origin=model.origin,
                                  source=model.source, as_of=model.as_of, speed=load_speed_model(),
                                  table=load_activation_table(), overheads=load_overheads(), notes=catalog_notes,
                                  serving=_serving_data() if project.workload.task == "inference"
                                  or project.workload.grpo is not None else None)  # GRPO: its rollout engine


def _serving_data(w: Any = None) -> Any:
    """The serving engine's facts (data/serving.toml), for serving estimates; with a workload, its engine's."""
    from gpuplan.catalog.serving import load_serving, load_serving_for

    return load_serving() if w is None else load_serving_for(w)


def _resolve(project: Project, base_dir: Path | None) -> Any:
    """The project's model, resolved, with its LoRA targets checked against the model's own linear layers (a target
    it lacks would adapt nothing, silently)."""
    model = resolve_model(project.model, base_dir)
    w = project.workload
    if w.task in ("lora", "qlora") and w.lora is not None:
        check_targets(model.arch, w.lora.targets)
    return model


def _trace_project(proj: Project, base_dir: Path | None) -> Any:
    """Run the project's `model.trace` factory (the user's code) and trace one step: CustomTraceResult."""
    import sys

    try:
        from gpuplan.trace.custom import trace_factory
    except ImportError:  # pragma: no cover - torch missing
        raise InputError(["model", "trace"], "tracing needs torch: pip install 'gpuplan[trace]'") from None
    w = proj.workload
    precision = {"fp8-mixed": "bf16-mixed"}.get(w.precision, w.precision)
    if base_dir is not None and str(base_dir) not in sys.path:  # the factory may sit beside the project file
        sys.path.insert(0, str(base_dir))
    return trace_factory(proj.model.trace or "", training=w.task != "inference", precision=precision)  # type: ignore[arg-type]


def _estimate_traced(project: Project, base_dir: Path | None, gpu_row: Any, gpus: int,
                     catalog_notes: list[Note]) -> EstimateResult:
    from gpuplan.core.sizing.traced import (
        traced_device_bytes,
        traced_memory_out,
        traced_step_seconds,
    )

    tr = _trace_project(project, base_dir)
    reserved, device = traced_device_bytes(tr, gpus, load_overheads())
    gpu_bytes = int(gpu_row.memory_gib * GIB) if gpu_row else None
    memory = traced_memory_out(tr, reserved, device, gpu_bytes)
    notes = [*catalog_notes, Note(code="traced-model", message=f"measured by tracing {tr.factory} (your code) under "
                                  "FakeTensorMode; FLOPs are per step of the factory's batch; with several GPUs, "
                                  "data parallel only")]
    if gpu_row is not None:
        step, _ = traced_step_seconds(tr, gpu_row, gpus, load_speed_model())
        notes.append(Note(code="traced-step-time", message=f"about {step * 1e3:,.1f} ms per step on {gpus} x "
                          f"{gpu_row.id} ({gpus / step:,.2f} batches per second in all)"))
    return EstimateResult(
        project=project.name,
        model=ModelInfo(name=tr.factory, origin=f"trace:{tr.factory}", model_type=tr.model_class,
                        parameters=tr.parameters, trainable_parameters=tr.trainable_parameters,
                        active_parameters=tr.parameters),
        workload={"task": project.workload.task, "precision": tr.precision},
        hardware=HardwareInfo(gpu=gpu_row.id if gpu_row else None, gpus=gpus, layout={"dp": gpus},
                              gpu_memory_bytes=gpu_bytes),
        memory=memory,
        compute=ComputeOut(flops_per_token=float(tr.flops_per_step), hardware_flops_per_token=float(tr.flops_per_step),
                           flops_total=None),
        notes=notes,
    )


def _load(project: Project | dict[str, Any] | str | Path, base_dir: Path | None) -> tuple[Project, Path | None]:
    proj, base, _ = _load_noted(project, base_dir)
    return proj, base


def _load_noted(project: Project | dict[str, Any] | str | Path, base_dir: Path | None,
                plan: bool = False) -> tuple[Project, Path | None, list[Note]]:
    """The project as every step reads it: its `workload.framework`'s defaults filled in where the file leaves a
    key unset, with the note saying what the framework implied; `plan`: a training project that names no framework
    takes the plan's default for its task and model kind (catalog/frameworks.py `with_framework`)."""
    if isinstance(project, (str, Path)):
        project, base_dir = load_project(project)
    elif isinstance(project, dict):
        project = parse_project(project)
    from gpuplan.catalog.frameworks import with_framework
    from gpuplan.core.sizing.preference import as_training

    # a DPO project is planned as its policy's training (core/sizing/preference.py), on the framework's defaults
    policy, base, dpo = core_estimate.policy_noted(project, base_dir, [])
    proj, notes = as_training(policy, lambda p: with_framework(p, (lambda: _resolve(p, base).arch.kind) if plan
                                                               else None))
    return proj, base, [*notes, *dpo]


def load_bundle(*, catalog: Catalog | None = None, catalog_files: Sequence[str | Path] = (),
                price_files: Sequence[str | Path] = (), as_of: datetime.date | None = None) -> Bundle:
    """The catalogs, prices and assumptions a plan is computed from: the built-in files plus the user's
    (`--catalog`, `--prices`), loaded once; `catalog` passes an already loaded hardware catalog. `as_of`: the date
    the plan is made for, which no row of the user's files may postdate (`plan_date`)."""
    if catalog is None and not catalog_files and not price_files:
        return _builtin_bundle()
    when = plan_date(as_of)
    if catalog is None:
        catalog = load_catalog(catalog_files, as_of=when) if catalog_files else builtin_catalog()
    return _bundle(catalog, load_prices(price_files, gpu_ids=list(catalog.gpus.rows), as_of=when))


@lru_cache(maxsize=1)
def _builtin_bundle() -> Bundle:
    catalog = builtin_catalog()
    return _bundle(catalog, load_prices(gpu_ids=list(catalog.gpus.rows)))


def _bundle(catalog: Catalog, prices: PriceBook) -> Bundle:
    host, needs = load_host_support()
    return Bundle(catalog=catalog, prices=prices, speed=load_speed_model(), table=load_activation_table(),
                  overheads=load_overheads(), rules=load_server_rules(), fx=load_fx(), host_support=host,
                  platform_needs=needs, serving=_serving_data(), fx_as_of=load_fx_dates())


def _objective(objective: str | None) -> Objective | None:
    """`objective` as the plan takes it (the shells check it against OBJECTIVES)."""
    if objective is not None and objective not in OBJECTIVES:
        raise InputError(["objective"], f"unknown objective {objective!r}", ", ".join(OBJECTIVES))
    return cast(Objective | None, objective)  # one of OBJECTIVES: a member of the Literal


@lru_cache(maxsize=8)
def _in_currency(bundle: Bundle, currency: str) -> Bundle:
    """`bundle` converted into `currency`, once per bundle (a Bundle hashes by identity)."""
    return in_currency(bundle, currency)


@lru_cache(maxsize=8)
def _evidence(bundle: Bundle, as_of: datetime.date) -> dict[str, Evidence]:
    """Each GPU's evidence for plans of one bundle and date, computed once (a Bundle hashes by identity: the
    built-in one lives as long as the process)."""
    return advise.plan_evidence(bundle, as_of)


def plan(project: Project | dict[str, Any] | str | Path, *, objective: str | None = None, top: int | None = None,
         headroom: float | None = None, base_dir: Path | None = None, catalog: Catalog | None = None,
         catalog_files: Sequence[str | Path] = (), price_files: Sequence[str | Path] = (),
         have: MachineSpec | str | Path | None = None, as_of: datetime.date | None = None) -> PlanResult:
    """The servers to get for a project: candidates that fit (with headroom and planned growth) and meet the
    deadline and budget, ranked by the objective, with the decision checklist answered (core/advise.py). Raises
    InfeasibleError naming the binding constraint and the gap when nothing qualifies.

    `have`: the server the team already has (a MachineSpec, or the path of a `check --server` file): the plan then
    answers first whether it can do the job and how, and what to add, rent or buy for the rest (`PlanResult.have`,
    core/owned/assess.py).

    `as_of`: the date the plan is made for (default: $GPUPLAN_AS_OF, else today; `plan_date`): quotes older than six
    months on it are flagged and weigh less as evidence, and no row of the user's files may postdate it."""
    when = plan_date(as_of)
    proj, base, framework_notes = _load_noted(project, base_dir, plan=True)
    if headroom is not None:
        proj = proj.model_copy(
            update={"constraints": proj.constraints.model_copy(update={"memory_headroom": headroom})})
    bundle = load_bundle(catalog=catalog, catalog_files=catalog_files, price_files=price_files, as_of=when)
    if have is not None and proj.model.trace:
        raise InputError(["--have"], "needs a model the estimator sizes: a traced model (model.trace) is not "
                         "re-estimated on the owned server", "model.preset, model.hf or model.hf_config")
    if have is not None:
        from gpuplan.core.audit.machine import MachineSpec

        if not isinstance(have, MachineSpec):
            from gpuplan.catalog.server_file import read_server_file

            have = read_server_file(have, bundle.catalog)
    traced = _trace_project(proj, base) if proj.model.trace else None
    model = _resolve(proj, base) if traced is None else None
    currency = advise.plan_currency(proj)
    money = _in_currency(bundle, currency)  # one currency inside the core: the plan's
    try:
        with collector_paused():
            result = advise.plan(proj, money, as_of=when, arch=model.arch if model else None, traced=traced,
                                 objective=_objective(objective), top=top, evidence=_evidence(bundle, when),
                                 clock=time.perf_counter)
        infeasible: InfeasibleError | None = None
    except InfeasibleError as exc:
        if have is None or model is None:
            raise
        # nothing to buy or rent qualifies: the owned server may still do the job (else the error stands)
        from gpuplan.core.owned.assess import plan_without_candidates

        result, infeasible = plan_without_candidates(proj, money, objective, str(exc), when), exc
    result = core_estimate.in_pairs(usd_figures(result, bundle.fx[currency]), proj.workload)  # DPO: in pairs
    if framework_notes:
        result = result.model_copy(update={"notes": [*framework_notes, *result.notes]})
    if have is None or model is None:
        return result
    from gpuplan.core.owned.assess import assess_owned

    owned = assess_owned(proj, model.arch, model.name, have, money, result)
    if infeasible is not None and not owned.can_do:
        raise infeasible
    return result.model_copy(update={"have": owned})


def _median_rent(price_files: Sequence[str | Path] = ()) -> dict[str, float]:
    """Median on-demand cloud price per GPU-hour (USD) by GPU: what renting the GPUs for a run costs."""
    return median_rent(_in_currency(load_bundle(price_files=price_files), "USD").prices)


def fit(project: Project | dict[str, Any] | str | Path, *, gpu: str, gpus: int | None = None,
        headroom: float | None = None, base_dir: Path | None = None, catalog: Catalog | None = None,
        catalog_files: Sequence[str | Path] = (), as_of: datetime.date | None = None) -> FitResult:
    """The largest micro-batch, sequence (context) and model scale that fit `gpus` x `gpu` with the project's
    layout, with and without gradient checkpointing. `as_of`: the date it is made for (`plan_date`), which no row
    of `catalog_files` may postdate."""
    from gpuplan.core.sizing.fit import fit_limits

    proj, base = _load(project, base_dir)
    if catalog is None:
        catalog = load_catalog(catalog_files, as_of=plan_date(as_of)) if catalog_files else builtin_catalog()
    row = catalog.gpus.find(gpu, ["--gpu"])
    hw = proj.hardware or Hardware()
    n = gpus or hw.gpus
    lay = hw.layout if n % (hw.layout.tp * hw.layout.pp) == 0 else Layout()
    if n > 1 and lay == Layout() and proj.workload.task != "inference":
        lay = Layout(zero=3)  # more than one GPU and no layout given: shard everything (FSDP)
    head = headroom if headroom is not None else proj.constraints.memory_headroom
    usable = int(row.memory_gib * GIB * (1 - head))
    arch = _resolve(proj, base).arch
    engine = _serving_data(proj.workload).engine if proj.workload.task == "inference" else None
    if engine is not None:  # the engine's share of each GPU; no layout given: the one plan would pick
        from gpuplan.core.sizing.engine_memory import serving_layout, serving_usable
        from gpuplan.core.sizing.params import count_params

        usable = serving_usable(int(row.memory_gib * GIB), proj.workload, engine, head)
        if n > 1 and lay == Layout():
            lay = serving_layout(arch, count_params(arch), proj.workload, n, usable, load_overheads(), engine)
    limits = fit_limits(arch, proj.workload, lay, n, usable, load_activation_table(), load_overheads(),
                        engine=engine)
    return FitResult(project=proj.name, gpu_id=row.id, gpus=n,
                     layout={"zero": lay.zero, "tp": lay.tp, "pp": lay.pp, "offload": lay.offload},
                     usable_bytes=usable, limits=limits)


# --------------------------------------------------------------------------- the audit of a machine (`check`)

def check_machine(project_path: str | Path, machine: MachineSpec, catalog: Catalog) -> AuditResult:
    """`gpuplan check`: the project's estimate on the machine's GPUs (the layout it would run with), the changes
    that would make it fit when it does not, and the audit of the whole machine (a MachineSpec: probed by
    gpuplan.cli.probe, or read from a server file by gpuplan.catalog.server_file)."""
    from gpuplan.core.audit.checks import audit, job_gpus, layout_for, on_machine
    from gpuplan.core.sizing.speed import tokens_per_sample

    project, base = load_project(project_path)
    arch = resolve_model(project.model, base).arch
    rules = load_server_rules()
    tok = tokens_per_sample(arch, project.workload)
    job = job_gpus(machine)
    if not job:  # what a GPU would need: the project on its own hardware section (one GPU without one)
        est = estimate(project, base_dir=base, catalog=catalog)
        return audit(project, machine, est, rules, catalog, tokens_per_sample=tok)
    gpu_id, n = job[0].catalog_id, len(job)
    usable = min(g.memory_bytes for g in job) * (1 - project.constraints.memory_headroom)
    layout = layout_for(project, n)
    if layout is None:  # inference without a layout: the smallest tensor-parallel degree that fits
        est, layout = _smallest_tp(project, base, catalog, gpu_id, n, usable)
    else:
        est = estimate(on_machine(project, gpu_id, n, layout), base_dir=base, catalog=catalog)
    alts = [] if est.memory.device_bytes <= usable else \
        _alternatives(project, base, catalog, gpu_id, n, layout, arch.kind, machine.ram_bytes)
    return audit(project, machine, est, rules, catalog, job=job, tokens_per_sample=tok, alternatives=alts)


def _smallest_tp(project: Project, base: Path | None, catalog: Catalog, gpu_id: str | None, n: int,
                 usable: float) -> tuple[EstimateResult, Layout]:
    from gpuplan.core.audit.checks import on_machine

    found: tuple[EstimateResult, Layout] | None = None
    for tp in (1, 2, 4, 8):
        if n % tp:
            continue
        try:
            est = estimate(on_machine(project, gpu_id, n, Layout(tp=tp)), base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # tp does not divide the model's heads
        found = (est, Layout(tp=tp))
        if est.memory.device_bytes <= usable:
            break
    if found is None:
        return estimate(on_machine(project, gpu_id, n, Layout()), base_dir=base, catalog=catalog), Layout()
    return found


def _alternatives(project: Project, base: Path | None, catalog: Catalog, gpu_id: str | None, n: int,
                  layout: Layout, kind: str, ram_bytes: int) -> list[Alternative]:
    """Every change core/owned/tries.py knows that lowers the memory per GPU (the workload's settings, the
    training stack's savers, layouts and CPU offload, then more GPUs of the same kind), each estimated on this
    machine's GPU (issue #13: every fix the estimator confirms, not a fixed list). A CPU offload the machine's RAM
    cannot hold is marked as needing hardware (more RAM), with what it needs."""
    from gpuplan.core.audit.checks import Alternative, on_machine
    from gpuplan.core.owned.tries import memory_tries
    from gpuplan.core.owned.ways import RAM_USABLE_FRACTION, mixed_full, offload_host_bytes

    out = []
    for t in memory_tries(project, n, layout, kind):
        try:
            est = estimate(on_machine(t.project, gpu_id, t.gpus, t.layout), base_dir=base, catalog=catalog)
            ref = est if t.layout.offload == "none" else estimate(
                on_machine(t.project, gpu_id, t.gpus, t.layout.model_copy(update={"offload": "none"})),
                base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # the change does not apply to this model (a layout its heads do not divide)
        change, hardware = t.change, t.needs_hardware
        host = 0 if t.layout.offload == "none" else offload_host_bytes(ref, t.layout.offload, mixed_full(t.project))
        if host > ram_bytes * RAM_USABLE_FRACTION:
            change += f" (needs {fmt_ram_gb(host)} of host RAM; this machine has {fmt_ram_gb(ram_bytes)})"
            hardware = True
        out.append(Alternative(change=change, needs_hardware=hardware, gpus=t.gpus, other_task="task" in
                               t.workload_changes, device_bytes=est.memory.device_bytes))
    return out
