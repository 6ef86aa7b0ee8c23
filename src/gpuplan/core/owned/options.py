"""What to do about a job given the server the team has (`plan --have`), each option priced in the plan's currency:
run it there (electricity only: the server is paid for), run it there and rent the part the deadline leaves over,
add GPUs or RAM to it, rent the whole job, or buy the plan's recommendation instead. Pure: prices come from the
bundle and from the plan's own deployment rows, so the comparison uses the figures the plan shows."""

from __future__ import annotations

from gpuplan.core.cost.deployments import cost_assumptions
from gpuplan.core.owned.ways import Job
from gpuplan.schema.owned import HaveOption, HaveWay
from gpuplan.schema.plan import Candidate, Deployment, PlanResult
from gpuplan.units import HOURS_PER_MONTH, fmt_gib, fmt_hours, fmt_money, fmt_ram_gb


def basis(job: Job) -> str:
    """"per run" for training, "over N months" for serving."""
    return f"over {job.project.growth.horizon_months} months" if job.serving else "per run"


def _hours(job: Job, run_hours: float | None) -> float | None:
    """The hours the machine runs: the run (training) or the horizon around the clock (serving)."""
    return job.project.growth.horizon_months * HOURS_PER_MONTH if job.serving else run_hours


def energy_cost(job: Job, plan: PlanResult, gpus: int, hours: float | None,
                watts: float | None = None) -> tuple[float | None, str]:
    """Electricity for `gpus` of the machine's GPUs (or GPUs drawing `watts`) for `hours`, and how it was counted."""
    if hours is None:
        return None, "no run length (workload.tokens or epochs with data.samples): electricity not counted"
    a = cost_assumptions(job.project, job.bundle.prices, plan.currency)
    per_gpu = watts if watts is not None else max(
        [g.power_limit_w or (job.row.tdp_w if job.row else 0.0) for g in job.gpus] or [0.0])
    kwh = gpus * per_gpu / 1000 * a.get("average_draw_fraction") * a.get("pue") * hours
    cost = kwh * a.get("electricity_per_kwh")
    return cost, (f"electricity only: {gpus} GPU(s) at {per_gpu:,.0f} W x {a.get('average_draw_fraction'):.0%} "
                  f"draw x PUE {a.get('pue'):g} for {fmt_hours(hours)} at {a.get('electricity_per_kwh'):.3f} "
                  f"{plan.currency}/kWh ({_cited(a.sources['electricity_per_kwh'])}); the server is already paid for; "
                  "CPU, RAM and fans not counted")


def _cited(source: str) -> str:
    """A data row's source, short: the project's own value, else the data file and the row's date."""
    return source if source == "project file" else f"data/tco.toml, {source.rsplit(', ', 1)[-1]}"


def keep(job: Job, plan: PlanResult, how: HaveWay) -> HaveOption:
    cost, why = energy_cost(job, plan, how.gpus, _hours(job, how.time_hours))
    return HaveOption(kind="keep", what=f"run it on your {job.n} x {job.row.id if job.row else job.gpus[0].name}: "
                      f"{how.change}", cost=cost, cost_basis=basis(job), time_hours=how.time_hours,
                      meets_target=how.meets_target, reasons=[why, *how.notes])


def _cloud_rows(c: Candidate) -> list[Deployment]:
    return [d for d in c.deployments if d.option == "cloud" and d.provider.endswith("on-demand")]


def _run_cost(job: Job, d: Deployment) -> float:
    return d.cost_per_run if not job.serving and d.cost_per_run is not None else d.total_cost


def cheapest_rent(job: Job, plan: PlanResult) -> tuple[Candidate, Deployment] | None:
    """The plan's candidate cheapest to rent by the hour on demand (meeting the deadline, as every candidate of
    the plan does), among those whose speed and price evidence is adequate when any is."""
    rows = [(c, d) for c in plan.candidates for d in _cloud_rows(c)]
    adequate = [(c, d) for c, d in rows if c.evidence is None or c.evidence.adequate]
    rows = adequate or rows  # a candidate on thin evidence only when nothing better is quoted
    return min(rows, key=lambda cd: _run_cost(job, cd[1])) if rows else None


def rent(job: Job, plan: PlanResult) -> HaveOption:
    found = cheapest_rent(job, plan)
    if found is None:
        return HaveOption(kind="rent", what="rent cloud GPUs for the whole job", cost=None, cost_basis=basis(job),
                          reasons=["no shown candidate has a cloud on-demand price (see the plan's deployment gaps)"])
    c, d = found
    return HaveOption(kind="rent", what=f"rent {_shape(c)} ({d.provider}) for the whole job",
                      cost=_run_cost(job, d), cost_basis=basis(job), time_hours=c.time_hours, meets_target=True,
                      reasons=[f"the plan's candidate cheapest to rent on demand; {d.price_per_gpu_hour or 0:,.2f} "
                               f"{d.currency} per GPU-hour", *d.assumptions[:2]])


def _shape(c: Candidate) -> str:
    return (f"{c.servers} servers of " if c.servers > 1 else "") + f"{c.gpus_per_server} x {c.gpu_id}"


def rent_rest(job: Job, plan: PlanResult, how: HaveWay, kept: HaveOption) -> HaveOption | None:
    """Training that runs on the machine but misses the deadline: train on it for t1 hours, then resume from the
    checkpoint on the cheapest rented candidate, so that t1 + (1 - t1/T_own) x T_rent = deadline."""
    deadline, own = job.target_hours, how.time_hours
    found = cheapest_rent(job, plan)
    if job.serving or deadline is None or own is None or how.meets_target is not False or found is None:
        return None
    c, d = found
    t_rent = c.time_hours or 0.0
    if t_rent >= deadline or own <= t_rent:
        return None
    t1 = (deadline - t_rent) / (1 - t_rent / own)
    share = t1 / own
    cost = (kept.cost or 0.0) * share + _run_cost(job, d) * (1 - share)
    return HaveOption(kind="rent-rest", what=f"train on your server for {fmt_hours(t1)} ({share:.0%} of the tokens), "
                      f"then resume from the checkpoint on a rented {_shape(c)} for the rest",
                      cost=cost, cost_basis=basis(job), time_hours=deadline, meets_target=True,
                      reasons=[f"your server alone takes {fmt_hours(own)}, the deadline is {fmt_hours(deadline)}",
                               f"rented part: {1 - share:.0%} of {fmt_money(_run_cost(job, d), plan.currency)} "
                               f"({d.provider}); moving the checkpoint (weights and optimizer states) is not timed"])


def add_gpus(job: Job, plan: PlanResult, hardware: list[HaveWay]) -> HaveOption | None:
    """The fewest more GPUs of the machine's kind that run the job and meet the target, priced from the
    catalog's reference price."""
    ok = sorted((w for w in hardware if w.runs and w.meets_target is not False),
                key=lambda w: (w.gpus, w.changes_recipe, w.time_hours or 0.0))
    if not ok:
        return None
    w = ok[0]
    extra = w.gpus - job.n
    price = job.row.price if job.row else None
    energy, why = energy_cost(job, plan, w.gpus, _hours(job, w.time_hours))
    cost = None if price is None else extra * price.value + (energy or 0.0)
    gpu = job.row.id if job.row else job.gpus[0].name
    reasons = [f"{fmt_gib(w.device_bytes)} per GPU on {w.gpus} x {gpu} ({w.change})",
               f"only if the chassis, the PSU and the PCIe lanes take {w.gpus} GPUs (workstations rarely take more "
               "than 4 double-width cards; 8 need a server chassis)"]
    reasons.append(f"{extra} x {fmt_money(price.value, plan.currency)} ({price.kind}, {price.as_of}) "
                   f"+ {why}" if price else f"no purchase price for {gpu} in the catalog")
    return HaveOption(kind="add", what=f"add {extra} {gpu} ({w.gpus} in all)", cost=cost, cost_basis=basis(job),
                      time_hours=w.time_hours, meets_target=w.meets_target, reasons=reasons)


def add_ram(job: Job, ways: list[HaveWay]) -> HaveOption | None:
    """A way that fits the GPUs but not the machine's RAM (CPU offload): the RAM it needs."""
    short = [w for w in ways if w.fits and not w.ram_ok]
    if not short or any(w.runs for w in ways):
        return None
    w = min(short, key=lambda x: x.host_ram_bytes)
    return HaveOption(kind="add", what=f"add RAM for {w.change}: {fmt_ram_gb(w.host_ram_bytes)} of offload, the "
                      f"machine has {fmt_ram_gb(job.machine.ram_bytes)}", cost=None, cost_basis=basis(job),
                      time_hours=w.time_hours, meets_target=w.meets_target,
                      reasons=["no DIMM prices in the price lists; the board's free slots and maximum RAM decide",
                               *w.notes])


def replace(job: Job, plan: PlanResult) -> HaveOption | None:
    """Buying the plan's recommendation instead (its on-prem row; the owned server's resale is not counted)."""
    rec = plan.recommendation
    if rec is None:
        return None
    buy = next((d for d in rec.deployments if d.option == "on-prem"), None)
    what = f"replace it with the plan's recommendation, {_shape(rec)}, bought"
    if buy is None:
        return HaveOption(kind="replace", what=what, cost=None, cost_basis=basis(job), time_hours=rec.time_hours,
                          meets_target=True, reasons=[f"no purchase price for {rec.gpu_id} in the price lists"])
    return HaveOption(kind="replace", what=what, cost=_run_cost(job, buy), cost_basis=basis(job),
                      time_hours=rec.time_hours, meets_target=True,
                      reasons=[f"upfront {fmt_money(buy.upfront_cost, plan.currency)} + running "
                               f"{fmt_money(buy.running_monthly, plan.currency)}/month - resale "
                               f"{fmt_money(buy.residual_value, plan.currency)} after "
                               f"{job.project.growth.horizon_months} months (the plan's on-prem row)",
                               "what your own server would resell for is not counted"])


def order(options: list[HaveOption]) -> list[HaveOption]:
    """Cheapest first, those without a price last; the cheapest that meets the target is marked best."""
    ranked = sorted(options, key=lambda o: (o.cost is None, o.cost or 0.0))
    best = next((o for o in ranked if o.cost is not None and o.meets_target is not False), None)
    return [o.model_copy(update={"best": True}) if o is best else o for o in ranked]


__all__ = ["add_gpus", "add_ram", "basis", "cheapest_rent", "energy_cost", "keep", "order", "rent", "rent_rest",
           "replace"]
