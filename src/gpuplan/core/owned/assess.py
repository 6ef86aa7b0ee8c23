"""Start from the server the team has (issue #13, point 5; `gpuplan plan --have SERVER.yaml` / `--this-machine`):
can it do the job, and how (the project as written, then every layout, offload and training-stack change the
estimator confirms, each re-estimated and timed on its GPUs), then what to add or rent for the rest, compared
with replacing it by the plan's recommendation. Pure: the machine (read or probed by the shell), the project's
resolved model, the bundle and the plan go in; a HaveResult comes out."""

from __future__ import annotations

import datetime
from dataclasses import replace

from gpuplan.core.audit.machine import MachineGpu, MachineSpec, job_gpus, layout_for
from gpuplan.core.owned import options as opt
from gpuplan.core.owned.tries import Try as TryT
from gpuplan.core.owned.tries import memory_tries, more_gpu_tries
from gpuplan.core.owned.ways import Job, as_written, estimate_on, rank_key, way
from gpuplan.schema.bundle import Bundle
from gpuplan.schema.estimate import Note
from gpuplan.schema.model import ModelArch
from gpuplan.schema.owned import HaveOption, HaveResult, HaveWay
from gpuplan.schema.plan import PlanResult, PlanStats
from gpuplan.schema.project import Layout, Project
from gpuplan.units import GIB, HOURS_PER_MONTH, fmt_gib, fmt_hours, fmt_money

#: a way that changes the training's numerics is named beside the chosen one when it is at least this much faster
FASTER_BY = 1.25
#: how far a change moves the training from the recipe as written, least first (the tie-break of `_faster`)
RECIPE_RISK = {"adamw-8bit": 1, "gradient-checkpointing": 0, "micro-batch-1": 0, "pure-bf16": 2,
               "pure-bf16-adamw-8bit": 3, "half-sequence": 4, "all-together": 5}
#: tensor-parallel degrees tried for serving on the machine when the project gives no layout
SERVING_TP = (1, 2, 4, 8)


def assess_owned(project: Project, arch: ModelArch, model_name: str, machine: MachineSpec, bundle: Bundle,
                 plan: PlanResult) -> HaveResult:
    """Whether `machine` can do `project`, how, and what to add, rent or buy for the rest."""
    gpus = tuple(job_gpus(machine))
    row = bundle.catalog.gpus.rows.get(gpus[0].catalog_id or "") if gpus else None
    job = Job(project=project, arch=arch, model_name=model_name, machine=machine, bundle=bundle, gpus=gpus, row=row,
              headroom=plan.headroom)
    if not gpus:
        return _no_gpu(job, plan)
    ways, hardware = _ways(job)
    how = ways[0] if ways and ways[0].runs else None
    options = _options(job, plan, how, ways, hardware)
    can_do = how is not None and how.meets_target is not False
    notes = [f"the job runs on the {job.n} x {job.row.id if job.row else gpus[0].name}; the machine's other "
             f"{len(machine.gpus) - job.n} GPU(s) are not counted"] if job.n < len(machine.gpus) else []
    if row is None:
        notes.append(f"{gpus[0].name} is not in the catalog: memory is checked, speed and time are not estimated")
    return HaveResult(machine=machine.source, gpu=row.id if row else gpus[0].name, gpus=job.n,
                      gpu_memory_bytes=min(g.memory_bytes for g in gpus), ram_bytes=machine.ram_bytes,
                      cpu_cores=machine.cpu_cores, can_do=can_do, verdict=_verdict(job, plan, how, ways, options),
                      how=how, ways=ways, options=options, notes=notes + list(machine.notes))


def plan_without_candidates(project: Project, bundle: Bundle, objective: str | None, reason: str,
                            as_of: datetime.date) -> PlanResult:
    """The plan when nothing to buy or rent qualifies (the binding constraint as a note), so that the owned
    server's answer can still be given: no recommendation, no candidates."""
    return PlanResult(project=project.name, objective=objective or project.goals.objective,
                      recommendation=None, candidates=[], rejected=[], checklist=[],
                      stats=PlanStats(candidates_evaluated=0, search_seconds=0.0, gpu_types=0),
                      notes=[Note(code="no-candidate", severity="warning", message=reason)],
                      headroom=project.constraints.memory_headroom, currency=bundle.currency or "USD", as_of=as_of)


def _base_layout(job: Job) -> Layout:
    lay = layout_for(job.project, job.n)
    if lay is not None:
        return lay
    # serving without a usable layout: the smallest tensor-parallel degree that fits, else the largest that applies
    tps = [k for k in SERVING_TP if k <= job.n and job.n % k == 0]
    for k in tps:
        est = estimate_on(job, job.project, job.n, Layout(tp=k))
        if est is not None and est.memory.device_bytes <= job.usable:
            return Layout(tp=k)
    return Layout(tp=tps[-1]) if tps else Layout()


def _ways(job: Job) -> tuple[list[HaveWay], list[HaveWay]]:
    """Every way on the machine's GPUs (ranked), and the same job on more GPUs of its kind."""
    layout = _base_layout(job)
    tries = [as_written(job, layout), *(t for t in memory_tries(job.project, job.n, layout, job.arch.kind)
                                       if not t.needs_hardware)]
    ways = _least_change_first(sorted((w for w in (way(job, t) for t in tries) if w is not None), key=rank_key))
    more = more_gpu_tries(job.project, job.n)
    best = next((t for t in tries if ways and ways[0].runs and t.code == ways[0].code), None)
    if best is not None and best.code != "as-written" and not job.serving:
        # the way that runs here, on more GPUs too: with more GPUs it may meet the deadline
        more += [TryT(code=f"{t.code}-{best.code}", change=f"{t.change}: {best.change}", project=best.project,
                      gpus=t.gpus, layout=best.layout if best.layout.zero == 3 else t.layout, needs_hardware=True,
                      changes_recipe=best.changes_recipe, workload_changes=best.workload_changes)
                 for t in more_gpu_tries(job.project, job.n)]
    hardware = [w for w in (way(job, t) for t in more) if w is not None]
    return ways, hardware


def _least_change_first(ways: list[HaveWay]) -> list[HaveWay]:
    """When the recipe must change, the least risky change first among those within 10% of the fastest (8-bit
    AdamW alone before all the savers together, when both run in time): the estimates are not finer than that."""
    if not ways or not ways[0].runs or not ways[0].changes_recipe or ways[0].time_hours is None:
        return ways
    head, fastest = ways[0], ways[0].time_hours
    peers = [w for w in ways if w.runs and w.changes_recipe and w.meets_target == head.meets_target
             and ("task" in w.workload_changes) == ("task" in head.workload_changes) and w.time_hours is not None
             and w.time_hours <= 1.1 * fastest]
    pick = min(peers, key=lambda w: (RECIPE_RISK.get(w.code, 9), w.time_hours or 0.0))
    return [pick, *(w for w in ways if w is not pick)]


def _options(job: Job, plan: PlanResult, how: HaveWay | None, ways: list[HaveWay],
             hardware: list[HaveWay]) -> list[HaveOption]:
    out: list[HaveOption | None] = []
    if how is not None:
        kept = opt.keep(job, plan, how)
        out += [kept, opt.rent_rest(job, plan, how, kept)]
    if how is None or how.meets_target is False:
        out += [opt.add_gpus(job, plan, hardware), opt.add_ram(job, ways)]
    out += [opt.rent(job, plan), opt.replace(job, plan)]
    return opt.order([o for o in out if o is not None])


def _no_gpu(job: Job, plan: PlanResult) -> HaveResult:
    """A machine without a GPU (this machine, often): it cannot run the job; what a GPU for it would need, the
    cheapest card that holds it, renting, buying."""
    one = estimate_on(job, job.project, 1, layout_for(job.project, 1) or Layout())
    need = one.memory.device_bytes if one is not None else 0
    out = [_add_card(job, plan, need), opt.rent(job, plan), opt.replace(job, plan)]
    options = opt.order([o for o in out if o is not None])
    m = job.machine
    verdict = (f"no: the machine has no GPU to run it on; the job needs {fmt_gib(need)} on one GPU "
               f"({fmt_gib(need / (1 - job.headroom))} with the headroom)")
    verdict += _cheapest(options, plan.currency)
    return HaveResult(machine=m.source, gpu=None, gpus=0, ram_bytes=m.ram_bytes, cpu_cores=m.cpu_cores,
                      can_do=False, verdict=verdict, options=options,
                      notes=["no GPU found (NVIDIA GPUs are probed through NVML; others are not seen)", *m.notes])


def _add_card(job: Job, plan: PlanResult, need: int) -> HaveOption | None:
    """The cheapest PCIe card (by catalog price; no GeForce card for production) on which this host runs the job
    and meets the deadline, as written or with the change the estimator confirms (the host's own RAM bounds any
    CPU offload): what to put in this machine."""
    production = job.project.goals.purpose == "production"
    cards = sorted((g for g in job.bundle.catalog.gpus.rows.values() if g.form_factor == "pcie" and g.price
                    is not None and not (production and g.market_class == "consumer")),
                   key=lambda g: (g.price.value if g.price else 0.0, g.memory_gib))
    for g in cards:
        card = MachineGpu(name=g.name, catalog_id=g.id, memory_bytes=int(g.memory_gib * GIB), ecc=g.ecc,
                          power_limit_w=g.tdp_w)
        with_card = replace(job, gpus=(card,), row=g)
        ways, _ = _ways(with_card)
        how = ways[0] if ways and ways[0].runs and ways[0].meets_target is not False else None
        if how is None:
            continue
        energy, why = opt.energy_cost(with_card, plan, 1, how.time_hours if not job.serving else
                                      job.project.growth.horizon_months * HOURS_PER_MONTH)
        price = g.price
        assert price is not None
        took = f", {fmt_hours(how.time_hours)} for the run" if how.time_hours is not None else ""
        return HaveOption(kind="add", what=f"add a {g.name} ({g.id}) to this machine: {how.change}",
                          meets_target=how.meets_target, cost=price.value + (energy or 0.0),
                          cost_basis=opt.basis(job), time_hours=how.time_hours,
                          reasons=[f"{fmt_gib(how.device_bytes)} on one {g.id} of {fmt_gib(g.memory_gib * GIB)}{took}"
                                   f" (as written it needs {fmt_gib(need)})",
                                   f"only if the host has a free x16 slot, {g.tdp_w:,.0f} W of PSU and the cooling "
                                   "for it", f"{fmt_money(price.value, plan.currency)} ({price.kind}, "
                                   f"{price.as_of}) + {why}", *how.notes])
    return None


def _cheapest(options: list[HaveOption], currency: str) -> str:
    """"; cheapest: ..." for the verdict line: the best option, in a few words."""
    best = next((o for o in options if o.best), None)
    if best is None:
        return ""
    what = "running it there (electricity)" if best.kind == "keep" else best.what
    return f"; cheapest: {what}, {fmt_money(best.cost or 0.0, currency)} {best.cost_basis}"


def _verdict(job: Job, plan: PlanResult, how: HaveWay | None, ways: list[HaveWay],
             options: list[HaveOption]) -> str:
    gpu = f"{job.n} x {job.row.id if job.row else job.gpus[0].name}"
    tail = _cheapest(options, plan.currency)
    if how is None:
        closest = min(ways, key=lambda w: w.device_bytes) if ways else None
        near = (f" (closest: {closest.change}, {fmt_gib(closest.device_bytes)} per GPU of "
                f"{fmt_gib(job.usable)} usable)") if closest else ""
        return f"no: nothing tried runs the job on your {gpu}{near}{tail}"
    took = f", {fmt_hours(how.time_hours)} for the run" if how.time_hours is not None else ""
    lat = f", {how.request_latency_s:,.1f} s per request" if how.request_latency_s is not None else ""
    if how.meets_target is False:
        limit = f"the deadline is {fmt_hours(job.target_hours)}" if job.target_hours else "the latency target is missed"
        return f"not in time: your {gpu} runs it ({how.change}{took}{lat}) but {limit}{tail}"
    return (f"yes: your {gpu} can do it: {how.change}, {fmt_gib(how.device_bytes)} per GPU of "
            f"{fmt_gib(job.usable)} usable{took}{lat}{tail}{_faster(how, ways)}")


def _faster(how: HaveWay, ways: list[HaveWay]) -> str:
    """When the chosen way keeps the recipe and a change of the training's numerics (same task) would be much
    faster, say so: the team may prefer it (8-bit AdamW over an offload that doubles the step, say)."""
    if how.changes_recipe or how.time_hours is None:
        return ""
    quick = [w for w in ways if w.runs and w.meets_target is not False and w.changes_recipe
             and "task" not in w.workload_changes and w.time_hours is not None
             and w.time_hours * FASTER_BY <= how.time_hours]
    if not quick:
        return ""
    fastest = min(w.time_hours or 0.0 for w in quick)
    # within 10% of the fastest, the least risky change: 8-bit AdamW (close to AdamW in published fine-tunes)
    # before pure bf16 (bf16 weight updates lose small steps without stochastic rounding), before both
    w = min(quick, key=lambda x: ((x.time_hours or 0.0) > 1.1 * fastest, RECIPE_RISK.get(x.code, 9), x.time_hours))
    return (f"; faster if the training may change: {w.change}, {fmt_hours(w.time_hours or 0.0)} "
            f"({how.time_hours / (w.time_hours or 1.0):.1f}x)")


__all__ = ["FASTER_BY", "RECIPE_RISK", "SERVING_TP", "assess_owned", "plan_without_candidates"]
