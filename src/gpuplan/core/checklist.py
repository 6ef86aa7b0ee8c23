"""The decision checklist and the common questions, answered for one project and its recommended server.

Pure: the plan's candidates and rejections in, verdicts with their numbers and reasons out."""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.core.cost.growth import grown_servers, planned_work, serving_additions, when_added
from gpuplan.core.search.ranking import Listed
from gpuplan.core.verdict import chosen_deployment
from gpuplan.schema.catalog import Catalog
from gpuplan.schema.plan import Candidate, ChecklistItem, FaqAnswer, Rejected
from gpuplan.schema.project import Project
from gpuplan.units import GIB, HOURS_PER_MONTH, fmt_money, fmt_ram_gb

CHECKLIST = ("VRAM validated", "System synergy", "Growth plan", "Deployment decision", "Total cost")
#: the most consumer cards a workstation holds (four double-width cards on a workstation board): beyond, "a consumer
#: card" becomes a cluster of them
CONSUMER_BOX_GPUS = 4


def _gib(n: float) -> str:
    return f"{n / GIB:,.1f} GiB"


def _money(x: float | None, currency: str) -> str:
    return "unknown (no dated price in the catalog)" if x is None else fmt_money(x, currency)


def _duration(hours: float) -> str:
    return f"{hours:,.1f} h" if hours < 48 else f"{hours / 24:,.1f} days"


def vram_item(rec: Candidate | None, project: Project, catalog: Catalog) -> ChecklistItem:
    if rec is None:
        return ChecklistItem(item="VRAM validated", verdict="fail", reasons=["no candidate fits (see rejected)"])
    gpu = catalog.gpus.rows[rec.gpu_id]
    cap = gpu.memory_gib * GIB
    dev = rec.memory.device_bytes
    headroom = 1 - dev / cap
    want = project.constraints.memory_headroom
    reasons = [f"{_gib(dev)} per GPU at the peak ({rec.memory.peak_phase}; largest part {rec.memory.dominant}) of "
               f"{_gib(cap)} on {gpu.name}: {headroom:.0%} free, {want:.0%} required",
               f"after the planned growth: {_gib(rec.grown_device_bytes)} per GPU "
               f"({1 - rec.grown_device_bytes / cap:.0%} free)"]
    verdict = "pass" if rec.fits and rec.fits_with_growth else "fail"
    if verdict == "pass" and headroom < want + 0.05:
        verdict = "warn"
        reasons.append("little margin beyond the required headroom: a longer sequence or a library update can "
                       "run out of memory")
    return ChecklistItem(item="VRAM validated", verdict=verdict, reasons=reasons)


def synergy_item(rec: Candidate | None) -> ChecklistItem:
    if rec is None:
        return ChecklistItem(item="System synergy", verdict="fail", reasons=["no server to balance"])
    s = rec.server
    reasons = [f"{s.cpu_sockets} x {s.cpu_model}: {s.cpu_cores} cores for {s.gpus} GPUs "
               f"({s.cpu_cores / s.gpus:,.1f} per GPU)",
               f"RAM {fmt_ram_gb(s.ram_bytes)}", f"NVMe {s.storage_bytes / 1e12:,.1f} TB at "
               f"{s.storage_read_gb_s:,.1f} GB/s read", f"network {s.network_gbit_s:,.0f} Gb/s",
               f"PCIe lanes {s.pcie_lanes_needed} needed, {s.pcie_lanes_available} from the CPUs",
               f"power {s.power_w / 1000:,.1f} kW, cooling {s.cooling_btu_h:,.0f} BTU/h ({s.cooling})"]
    verdict = "warn" if s.warnings else "pass"
    reasons += [f"warning: {w}" for w in s.warnings]
    return ChecklistItem(item="System synergy", verdict=verdict, reasons=reasons)


def growth_item(rec: Candidate | None, project: Project, catalog: Catalog, work: float | None = None) -> ChecklistItem:
    """Whether the candidate holds the planned growth, and what growing takes: a service's grown load, the servers it
    adds and when (priced in the deployments); a training run's grown model on the grown data, its time on the same
    servers against the deadline (`work`: its compute against one planned run, core/cost/growth.training_work)."""
    g = project.growth
    if rec is None:
        return ChecklistItem(item="Growth plan", verdict="fail", reasons=["nothing fits today"])
    reasons = []
    verdict = "pass" if rec.fits_with_growth else "fail"
    if g is None or (g.model_scale == 1 and g.data_scale == 1 and g.context_scale == 1 and g.users_scale == 1):
        reasons.append("the project plans no growth (growth.*): nothing is reserved for it")
    else:
        reasons.append(f"planned: model x{g.model_scale:g}, data x{g.data_scale:g}, context x{g.context_scale:g}, "
                       f"users x{g.users_scale:g} over {g.horizon_months} months")
        reasons.append(f"memory after growth {_gib(rec.grown_device_bytes)} per GPU: "
                       + ("still fits" if rec.fits_with_growth else "does not fit"))
        if rec.inference is not None and g.users_scale > 1 and project.workload.task == "inference":
            reasons.append(_serving_growth(rec, g.users_scale, g.horizon_months))
        if rec.time_hours is not None and (g.data_scale > 1 or g.model_scale > 1):
            factor = work if work is not None else planned_work(g.model_scale, g.data_scale)
            line, late = _training_growth(rec.time_hours * factor, factor, g.model_scale, g.data_scale,
                                          project.goals.deadline_days)
            reasons.append(line)
            if late and verdict == "pass":
                verdict = "warn"
    platform = catalog.platforms.rows.get(rec.server.platform_id)
    if platform is not None:
        free = platform.gpu_slots - rec.gpus_per_server
        how = "(more replicas behind the load balancer)" if rec.inference is not None else \
            "(data parallel over the network)"
        reasons.append(f"{free} free GPU slot(s) in the {platform.name}" if free > 0 else
                       f"{platform.name} full: grow by adding servers {how}")
    return ChecklistItem(item="Growth plan", verdict=verdict, reasons=reasons)


def _serving_growth(rec: Candidate, users_scale: float, horizon: int) -> str:
    """What a service's grown load needs: its requests/s, the servers, and when they are added (in the costs)."""
    inf = rec.inference
    assert inf is not None
    rps = inf.requests_per_s * users_scale
    need = grown_servers(inf, rec.layout, rec.gpus_per_server, rec.servers, users_scale)
    adds = serving_additions(inf, rec.layout, rec.gpus_per_server, rec.servers, users_scale, horizon)
    cap = inf.capacity_requests_per_s
    head = (f"load after growth {rps:,.2f} requests/s (users x{users_scale:g}, reached at month {horizon}, linearly)"
            + (f" against {cap:,.2f} within the objectives on the servers planned" if cap is not None else ""))
    if not adds:
        return head + ": the servers planned serve it"
    when = ", ".join(f"+{k} {when_added(m)}" for m, k in adds)
    return head + f": {need} server(s) by then ({when}), priced in every deployment's total"


def _training_growth(hours: float, factor: float, model_scale: float, data_scale: float,
                     deadline_days: float | None) -> tuple[str, bool]:
    """The grown run's line (its compute and time on the same servers, against the deadline) and whether it is late."""
    what = " on ".join(x for x in (f"the model x{model_scale:g}" if model_scale > 1 else "",
                                   f"x{data_scale:g} data" if data_scale > 1 else "") if x)
    line = (f"the grown run ({what}): about {factor:,.1f}x one run's compute, {_duration(hours)} on the same servers; "
            "its compute is in the costs")
    late = deadline_days is not None and hours > deadline_days * 24
    if late:
        line += (f"; past the {deadline_days:g}-day deadline (goals.deadline_days): these servers stop sufficing at "
                 "this growth; add servers (data parallel) before it, or plan for them now")
    return line, late


def cost_item(rec: Candidate | None, project: Project) -> ChecklistItem:
    if rec is None:
        return ChecklistItem(item="Total cost", verdict="fail", reasons=["no candidate"])
    b = project.goals.budget
    horizon = project.growth.horizon_months
    d = rec.deployment
    if d is None:
        reasons = [f"buying {rec.servers} server(s): {_money(rec.price, rec.currency)}; renting the GPUs: "
                   f"{_money(rec.rent, rec.currency)}"]
        return ChecklistItem(item="Total cost", verdict="warn", reasons=reasons)
    dep = next(x for x in rec.deployments if x.provider == d.provider)
    if dep.cost_per_run is not None and rec.time_hours is not None:
        reasons = [f"{d.option} ({d.provider}): {fmt_money(dep.cost_per_run, d.currency)} per training run, "
                   f"{fmt_money(d.total_cost, d.currency)} over {horizon} months"]
    else:
        reasons = [f"{d.option} ({d.provider}): {fmt_money(d.total_cost, d.currency)} over {horizon} months, "
                   f"{dep.running_monthly:,.0f}/month running"]
    if dep.cost_per_million_tokens is not None:
        reasons.append(f"{dep.cost_per_million_tokens:,.2f} {d.currency} per million tokens generated")
    reasons += dep.assumptions
    if b is None:
        reasons.append("no budget given (goals.budget)")
        return ChecklistItem(item="Total cost", verdict="warn", reasons=reasons)
    if b.period == "total":
        ok = d.total_cost <= b.amount
        reasons.append(f"budget {b.amount:,.0f} {b.currency} in total")
    else:
        ok = d.monthly_cost <= b.amount
        reasons.append(f"budget {b.amount:,.0f} {b.currency} per month")
    return ChecklistItem(item="Total cost", verdict="pass" if ok else "fail", reasons=reasons)


def deployment_item(rec: Candidate | None) -> ChecklistItem:
    if rec is None or rec.deployment is None:
        return ChecklistItem(item="Deployment decision", verdict="not evaluated",
                             reasons=["no price list covers this configuration (add quotes with --prices)"])
    d = rec.deployment
    verdict = "warn" if any("production" in r for r in d.reasons) else "pass"
    warnings = [w for dep in rec.deployments if dep.provider == d.provider for w in dep.warnings]
    if warnings:
        verdict = "warn"
    return ChecklistItem(item="Deployment decision", verdict=verdict,
                         reasons=[f"{d.option} ({d.provider})", *d.reasons, *warnings])


def build_checklist(project: Project, rec: Candidate | None, catalog: Catalog,
                    work: float | None = None) -> list[ChecklistItem]:
    """The decision checklist for `rec`; `work`: a training run's compute over the horizon against one planned run
    (core/cost/growth.training_work)."""
    return [
        vram_item(rec, project, catalog),
        synergy_item(rec),
        growth_item(rec, project, catalog, work),
        deployment_item(rec),
        cost_item(rec, project),
    ]


def build_faq(project: Project, rec: Candidate | None, candidates: Sequence[Listed], rejected: list[Rejected],
              catalog: Catalog, host_support: dict[str, str], platform_needs: dict[str, str],
              work: float | None = None) -> list[FaqAnswer]:
    """The usual questions (dedicated or cloud, multi-GPU, consumer card, host support), answered for the plan.
    `work`: a training run's compute over the horizon against one planned run (core/cost/growth.training_work)."""
    out = [a for a in (_dedicated_or_cloud(project, rec, work), _multi_gpu(rec, candidates, rejected, catalog))
           if a is not None]
    out.append(_consumer_card(project, candidates, rejected, catalog))
    host = _host_support(project, rec, catalog, host_support, platform_needs)
    return out + ([host] if host is not None else [])


def _dedicated_or_cloud(project: Project, rec: Candidate | None, work: float | None = None) -> FaqAnswer | None:
    """Dedicated server or cloud: the way the plan chose (the cheapest over the horizon, as the first line says),
    with the rule of thumb beside it (a run busy under a third of the time rents; a service around the clock owns or
    reserves) and, where the prices overrule it, that they do."""
    if rec is None:
        return None
    training = project.workload.task != "inference"
    horizon_h = project.growth.horizon_months * HOURS_PER_MONTH
    chosen = chosen_deployment(rec)
    other = next((d for d in rec.deployments if chosen is not None and d.option != chosen.option), None)
    priced = ([f"{chosen.option} ({chosen.provider}) is the cheapest way over {project.growth.horizon_months} months: "
               f"{chosen.total_cost:,.0f} {chosen.currency}"
               + (f" against {other.total_cost:,.0f} for {other.option} ({other.provider})" if other else "")]
              if chosen is not None else [])
    renting = chosen is not None and chosen.option != "on-prem"
    if rec.time_hours is not None and training:
        g = project.growth  # the grown model on the grown data, as the costs count it
        busy = rec.time_hours * (work if work is not None else planned_work(g.model_scale, g.data_scale))
        share = busy / horizon_h
        thumb = share < 0.3
        answer = ("cloud or rented GPUs for this run" if (renting if chosen is not None else thumb)
                  else "a dedicated server")
        reasons = [f"the run keeps the recommended servers busy {_duration(busy)} of a "
                   f"{horizon_h / HOURS_PER_MONTH:.0f}-month horizon ({share:.0%})",
                   "below about a third of the time, renting is usually cheaper than owning; the deployment "
                   "comparison (`gpuplan cost`) prices both"]
        if chosen is not None and renting != thumb:
            reasons.append("the prices overrule the rule of thumb here")
        return FaqAnswer(question="Dedicated server or cloud?", answer=answer, reasons=priced + reasons)
    if not training:
        thumb_reason = ("production inference keeps GPUs busy continuously, where owning or reserving beats "
                        "on-demand prices; `gpuplan cost` compares them")
        if chosen is None or chosen.option == "on-prem":
            answer = "a dedicated (or reserved) server: serving runs around the clock"
        elif chosen.option == "managed":
            answer = "a dedicated server, rented from a host: serving runs around the clock"
        else:
            answer = f"the cloud ({chosen.provider.removeprefix('cloud ')}): the cheapest way at this load"
        reasons = priced + [thumb_reason]
        if chosen is not None and chosen.option == "cloud":
            reasons.append("the prices overrule the rule of thumb here")
        return FaqAnswer(question="Dedicated server or cloud?", answer=answer, reasons=reasons)
    return None


def _multi_gpu(rec: Candidate | None, candidates: Sequence[Listed], rejected: list[Rejected],
               catalog: Catalog) -> FaqAnswer | None:
    if rec is None:
        return None
    singles = [c for c in candidates if c.gpus_per_server * c.servers == 1]
    n = rec.gpus_per_server * rec.servers
    reasons = []
    if n == 1:
        return FaqAnswer(question="Is multi-GPU worth it here?", answer="no: one GPU does it",
                         reasons=["the recommendation uses a single GPU"])
    lay = rec.layout
    kind = ("model parallel (tensor/pipeline: the model does not fit one GPU)" if lay.tp * lay.pp > 1
            else f"data parallel (ZeRO-{lay.zero})")
    reasons.append(f"the recommendation spreads the work over {n} GPUs, {kind}")
    same = [c for c in singles if c.gpu_id == rec.gpu_id]
    if same and rec.time_hours and same[0].time_hours:
        speedup = same[0].time_hours / rec.time_hours
        reasons.append(f"{speedup:,.1f}x faster than one {rec.gpu_id} ({_duration(same[0].time_hours)} "
                       f"-> {_duration(rec.time_hours)}), {speedup / n:.0%} scaling efficiency")
        answer = "yes" if speedup / n > 0.7 else "only partly: communication eats much of the gain"
    elif not singles:
        # why no single GPU qualifies: what the one-GPU shapes were rejected for
        single = {r.code for r in rejected if r.gpus_per_server * r.servers == 1}
        answer = ("yes: one GPU misses the deadline" if "deadline" in single else
                  "yes: one GPU misses the latency target" if "latency" in single else
                  "yes: one GPU is over budget" if "over-budget" in single else
                  "yes, necessarily: no single GPU holds the job after the planned growth"
                  if "no-fit-after-growth" in single else "yes, necessarily: no single GPU holds the job")
    else:
        answer = "yes"
    gpu = catalog.gpus.rows[rec.gpu_id]
    reasons.append(f"interconnect: {gpu.interconnect.kind} {gpu.interconnect.bandwidth_gbs:g} GB/s between "
                   f"up to {gpu.interconnect.domain_gpus} GPUs" if gpu.interconnect.kind != "none" else
                   "interconnect: PCIe only, no NVLink: keep tensor parallelism off this card")
    return FaqAnswer(question="Is multi-GPU worth it here?", answer=answer, reasons=reasons)


def _consumer_card(project: Project, candidates: Sequence[Listed], rejected: list[Rejected],
                   catalog: Catalog) -> FaqAnswer:
    consumer = [c for c in candidates if catalog.gpus.rows[c.gpu_id].market_class == "consumer"]
    consumer_rej = [r for r in rejected if r.gpu_id in catalog.gpus.rows and
                    catalog.gpus.rows[r.gpu_id].market_class == "consumer"]
    production = project.goals.purpose == "production"
    reasons = ["consumer cards: 24-32 GB, no ECC, no NVLink (except RTX 3090), half-rate tensor maths with FP32 "
               "accumulate, open-air coolers that throttle in dense builds, and a driver licence that excludes "
               "datacenter deployment"]
    if consumer:
        best = min(consumer, key=lambda c: (c.servers, c.gpus_per_server))  # the smallest consumer build that works
        n = best.gpus_per_server * best.servers
        took = f" in {_duration(best.time_hours)}" if best.time_hours else ""
        if best.servers > 1 or best.gpus_per_server > CONSUMER_BOX_GPUS:
            # more cards than a workstation holds: sharded over PCIe and a network, not what "a consumer card" means
            answer = (f"not sensibly: it takes {n} x {best.gpu_id} ({best.servers} server(s) of "
                      f"{best.gpus_per_server}{took}), sharded over PCIe and the network without NVLink")
            if project.workload.task in ("full-finetune", "lora"):
                reasons.append("QLoRA (workload.task: qlora) needs far less memory per GPU: plan it to see whether a "
                               "workstation of consumer cards holds it")
        else:
            answer = f"for experiments, yes: {n} x {best.gpu_id}{took}"
        if production:
            answer += "; not for production"
    else:
        answer = "no"
        if consumer_rej:  # the closest a consumer build came: one that holds the job but costs too much or has no
            # price (a rental across servers needs a cluster offer), before a deadline or a build that fails
            near = min(consumer_rej, key=lambda r: (NEAR_MISS.get(r.code, len(NEAR_MISS)),
                                                   r.gpus_per_server * r.servers))
            shape = f", {near.gpus_per_server} per server x {near.servers}" if near.servers else ""
            reasons.append(f"{near.gpu_id}{shape}: {near.reason}")
            if near.code in ("over-budget", "no-price") and project.workload.task in ("full-finetune", "lora"):
                reasons.append("QLoRA (workload.task: qlora) needs far less memory per GPU: plan it to see whether a "
                               "workstation of consumer cards holds it")
    return FaqAnswer(question="Can a consumer card do it?", answer=answer, reasons=reasons)


#: a consumer card's rejections, the nearest miss first: it holds the job and only its cost (or a missing price)
#: stops it, then it is too slow, then it does not fit
NEAR_MISS = {"over-budget": 0, "no-price": 1, "deadline": 2, "latency": 3, "no-fit-after-growth": 4}


def _host_support(project: Project, rec: Candidate | None, catalog: Catalog, host_support: dict[str, str],
                  platform_needs: dict[str, str]) -> FaqAnswer | None:
    if rec is None:
        return None
    gpu = catalog.gpus.rows[rec.gpu_id]
    needs = [host_support.get(gpu.generation, "a current driver and toolkit for the GPU")]
    if gpu.interconnect.kind == "nvlink-switch" and rec.gpus_per_server > 2:
        needs.append(platform_needs["nvswitch"])
    if rec.servers > 1:
        needs.append(platform_needs["multi_node"])
    if project.goals.purpose == "production":
        needs.append(platform_needs["production"])
    return FaqAnswer(question="What support must the host give?",
                     answer="; ".join(needs[:1]) + ("; and more below" if len(needs) > 1 else ""), reasons=needs)


__all__ = ["CHECKLIST", "build_checklist", "build_faq"]
