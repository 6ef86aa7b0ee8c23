"""Total cost of ownership of one configuration, three ways: buying it (on-premises), renting it as a managed
dedicated server, and cloud GPUs by the hour. Pure arithmetic over the candidate, the usage and the price
lists; every assumption comes with its value and source in the output.

Usage over the horizon:
- serving (inference) runs around the clock: owned hardware is busy `utilization` of the time, and rented
  capacity is billed every hour;
- training keeps the servers busy `utilization` of the time with runs like this one (experiments are bursty,
  production training steadier); cloud bills only those hours.

On-premises: price x (1 + install) (+ spare servers in production) up front; per month electricity (server
power x draw at that utilisation x PUE x price), colocation per kW, support (fraction of the price per year),
staff; the hardware's residual value at the horizon (straight-line over the depreciation years down to the
residual fraction) comes back at the end. Managed hosting: setup + monthly fee per server (power and hardware
care included), at least the minimum commitment. Cloud: GPU-hours x the median price of the kind (on-demand;
1- or 3-year reserved when the horizon covers the term), plus storage for the dataset and checkpoints.
"""

from __future__ import annotations

import math
import statistics

from pydantic import BaseModel, ConfigDict

from gpuplan.schema.plan import Deployment, DeploymentChoice
from gpuplan.schema.prices import CloudPrice, HostingOffer
from gpuplan.units import fmt_money

HOURS_PER_MONTH = 730.0


class Usage(BaseModel):
    """How the configuration is used over the horizon."""

    model_config = ConfigDict(frozen=True)

    horizon_months: int
    production: bool
    serving: bool
    #: fraction of the time the servers are busy
    utilization: float
    #: training: wall hours of one run on this configuration (None for serving)
    run_hours: float | None = None
    #: serving: tokens generated per second at the planned load
    tokens_per_s: float | None = None
    #: bytes kept on cloud storage (dataset, checkpoints)
    storage_bytes: float = 0.0


class Config(BaseModel):
    """The hardware: what the plan recommends."""

    model_config = ConfigDict(frozen=True)

    gpu_id: str
    gpus_per_server: int
    servers: int
    price: float | None  # purchase of all servers, in the output currency
    power_w: float  # per server, at full load


class Assumptions(BaseModel):
    """Resolved cost-model inputs (project values over the defaults), with where each came from."""

    model_config = ConfigDict(frozen=True)

    values: dict[str, float]
    sources: dict[str, str]

    def get(self, key: str) -> float:
        return self.values[key]

    def cite(self, key: str, fmt: str = "{:g}") -> str:
        return f"{key} {fmt.format(self.values[key])} ({self.sources[key]})"


def _on_prem(cfg: Config, use: Usage, a: Assumptions, currency: str) -> Deployment | None:
    if cfg.price is None:
        return None
    months = use.horizon_months
    spare = a.get("spare_fraction_production") if use.production else 0.0
    capex = cfg.price * (1 + spare)
    upfront = capex * (1 + a.get("install_fraction"))
    draw = a.get("idle_draw_fraction") + (a.get("average_draw_fraction") - a.get("idle_draw_fraction")) * use.utilization
    kw = cfg.power_w * cfg.servers * (1 + spare) / 1000
    power = kw * draw * a.get("pue") * HOURS_PER_MONTH * a.get("electricity_per_kwh")
    colo = kw * a.get("colocation_per_kw_month")
    support = capex * a.get("support_fraction_per_year") / 12
    staff = a.get("staff_fte_per_server") * cfg.servers * a.get("staff_cost_per_fte_year") / 12
    monthly_opex = power + colo + support + staff
    years = a.get("depreciation_years")
    resid_frac = a.get("residual_value_fraction")
    worth = max(resid_frac, 1 - (1 - resid_frac) * months / (12 * years))
    residual = capex * worth
    total = upfront + monthly_opex * months - residual
    ass = [f"price {cfg.price:,.0f} {currency}" + (f" + {spare:.0%} spare servers for production" if spare else ""),
           f"install {a.get('install_fraction'):.0%} of the price ({a.sources['install_fraction']})",
           f"power {kw:,.1f} kW at {draw:.0%} draw ({use.utilization:.0%} busy), " + a.cite("pue") + ", "
           + a.cite("electricity_per_kwh", "{:.3f}"),
           a.cite("colocation_per_kw_month", "{:,.0f}") + f": {colo:,.0f}/month",
           a.cite("support_fraction_per_year", "{:.0%}"),
           f"staff {a.get('staff_fte_per_server'):g} FTE per server x {a.get('staff_cost_per_fte_year'):,.0f}/year "
           f"({a.sources['staff_fte_per_server']})",
           f"worth {worth:.0%} after {months} months: " + a.cite("depreciation_years") + ", "
           + a.cite("residual_value_fraction", "{:.0%}")]
    return Deployment(option="on-prem", provider="purchase", monthly_cost=total / months, total_cost=total,
                      upfront_cost=upfront, running_monthly=monthly_opex, residual_value=residual, currency=currency,
                      assumptions=ass)


def _managed(cfg: Config, use: Usage, offers: list[HostingOffer], fx: dict[str, float],
             currency: str) -> list[Deployment]:
    out = []
    for o in offers:
        if o.gpu_id != cfg.gpu_id or o.gpus < 1:
            continue
        per_server = math.ceil(cfg.gpus_per_server / o.gpus)
        units = per_server * cfg.servers
        rate = fx[currency] / fx[o.currency]
        monthly = o.monthly * rate * units
        setup = o.setup * rate * units
        months = max(use.horizon_months, o.min_months)
        total = setup + monthly * months
        # what the minimum term commits beyond the horizon is owed whatever happens: it counts as upfront, so that
        # upfront + running x horizon is the total
        committed = monthly * (months - use.horizon_months)
        ass = [f"{units} x {o.provider} {o.id} at {o.monthly:,.0f} {o.currency}/month + {o.setup:,.0f} setup "
               f"({o.source}, {o.as_of})", f"includes: {', '.join(o.includes) or 'not stated'}"]
        if o.min_months > use.horizon_months:
            ass.append(f"minimum commitment {o.min_months} months, longer than the horizon: paid in full (the "
                       f"{months - use.horizon_months} months beyond it, {committed:,.0f}, are counted upfront)")
        if units > cfg.servers:
            ass.append(f"{o.gpus} GPU(s) per offer: {per_server} offers per server of {cfg.gpus_per_server} GPUs "
                       "(no NVLink between them)")
        out.append(Deployment(option="managed", provider=f"{o.provider} {o.id}", monthly_cost=total / use.horizon_months,
                              total_cost=total, upfront_cost=setup + committed, running_monthly=monthly,
                              currency=currency, assumptions=ass))
    return out


def _cloud(cfg: Config, use: Usage, prices: list[CloudPrice], fx: dict[str, float], currency: str,
           a: Assumptions) -> list[Deployment]:
    n = cfg.gpus_per_server * cfg.servers
    months = use.horizon_months
    hours = months * HOURS_PER_MONTH * (1.0 if use.serving else use.utilization)
    out = []
    kinds = {"on-demand": 0, "reserved-1y": 12, "reserved-3y": 36}
    on_demand = [p for p in prices if p.gpu_id == cfg.gpu_id and p.kind == "on-demand"]
    for kind, term in kinds.items():
        rows = [p for p in prices if p.gpu_id == cfg.gpu_id and p.kind == kind]
        if not rows or (term and months < term):
            continue
        rate = statistics.median(p.price_per_gpu_hour * fx[currency] / fx[p.currency] for p in rows)
        # reserved capacity is paid every hour of the term, used or not; on demand, a training run is billed as
        # the providers bill it (their increment and minimum, data/prices.toml)
        billed = months * HOURS_PER_MONTH if term else hours
        billing = None
        if not term and not use.serving and use.run_hours:
            per_run, billing = billed_hours(use.run_hours, rows)
            billed = hours / use.run_hours * per_run
        # the dataset and checkpoints sit on cloud storage while the capacity is held: a training run's hours, a
        # service's whole horizon
        stored_months = billed / HOURS_PER_MONTH
        storage = use.storage_bytes / 1e12 * a.get("cloud_storage_usd_per_tb_month") * fx[currency] * stored_months
        total = rate * n * billed + storage
        providers = sorted({p.provider for p in rows})
        ass = [f"{kind}: median {rate:.2f} {currency}/GPU-hour of {len(rows)} price(s) "
               f"({', '.join(providers[:4])})",
               f"{n} GPUs x {billed:,.0f} h" + ("" if term or use.serving else f" ({use.utilization:.0%} of the time)"),
               f"storage {use.storage_bytes / 1e12:,.1f} TB x {a.get('cloud_storage_usd_per_tb_month'):g} USD/TB-month "
               f"x {stored_months:,.2f} months held ({a.sources['cloud_storage_usd_per_tb_month']})",
               "shared, virtualised capacity: performance less predictable than a dedicated server"]
        if billing:
            ass.append(billing)
        if term:
            same = [p for p in on_demand if p.provider in providers]
            ass.append(_same_provider_on_demand(kind, rate, same, fx, currency))
        out.append(Deployment(option="cloud", provider=f"cloud {kind}", monthly_cost=total / months, total_cost=total,
                              upfront_cost=0.0, running_monthly=total / months, currency=currency, assumptions=ass,
                              price_per_gpu_hour=rate))
    return out


def billed_hours(run_hours: float, rows: list[CloudPrice]) -> tuple[float, str | None]:
    """The hours one run is billed for, as the providers quoted bill: rounded up to the coarsest billing increment
    among them and at least the largest minimum (data/prices.toml `billing_increment_s`, `minimum_billed_hours`);
    providers whose billing is not in the data are taken as billing the exact time. With the rule applied, a
    sentence saying so."""
    increments = [p.billing_increment_s for p in rows if p.billing_increment_s]
    minimums = [p.minimum_billed_hours for p in rows if p.minimum_billed_hours]
    if not increments and not minimums:
        return run_hours, None
    step = max(increments, default=1) / 3600
    billed = max(math.ceil(run_hours / step - 1e-9) * step, max(minimums, default=0.0))
    if billed <= run_hours * (1 + 1e-9):
        return run_hours, None
    return billed, (f"billed {billed:,.2f} h per run for {run_hours:,.2f} h of work: the coarsest billing of the "
                    f"providers quoted ({max(increments, default=1):,} s increments, minimum "
                    f"{max(minimums, default=0.0):g} h)")


def _same_provider_on_demand(kind: str, rate: float, same: list[CloudPrice], fx: dict[str, float],
                             currency: str) -> str:
    """A reserved price against the on-demand price of the same provider(s): the discount the commitment buys."""
    if not same:
        return f"{kind}: no on-demand price of the same provider to compare with"
    od = statistics.median(p.price_per_gpu_hour * fx[currency] / fx[p.currency] for p in same)
    return (f"the same provider(s) on demand: {od:.2f} {currency}/GPU-hour; the {kind} commitment saves "
            f"{1 - rate / od:.0%}" if od > 0 else f"{kind}: no on-demand price of the same provider")


def compare(cfg: Config, use: Usage, cloud: list[CloudPrice], hosting: list[HostingOffer], a: Assumptions,
            fx: dict[str, float], currency: str, options: list[str]) -> list[Deployment]:
    """Every way to get `cfg` the price lists allow, cheapest total first, each with its break-even months
    against the cheapest of each other option."""
    deps: list[Deployment] = []
    if "on-prem" in options:
        d = _on_prem(cfg, use, a, currency)
        if d is not None:
            deps.append(d)
    if "managed" in options:
        deps += _managed(cfg, use, hosting, fx, currency)
    if "cloud" in options:
        deps += _cloud(cfg, use, cloud, fx, currency, a)
    deps = [_per_unit(d, use) for d in deps]
    on_demand = next((d for d in deps if d.provider == "cloud on-demand"), None)
    if on_demand is not None and on_demand.price_per_gpu_hour:
        n = cfg.gpus_per_server * cfg.servers
        deps = [d.model_copy(update={"breakeven_utilization": owning_breakeven_utilization(
            d, on_demand.price_per_gpu_hour, n, use.horizon_months)}) if d.option == "on-prem" else d for d in deps]
    best: dict[str, Deployment] = {}
    for d in sorted(deps, key=lambda d: d.total_cost):
        best.setdefault(d.option, d)
    out = []
    for d in sorted(deps, key=lambda d: d.total_cost):
        vs = {}
        for opt, other in best.items():
            if opt != d.option:
                vs[opt] = breakeven_within(d, other, use.horizon_months, a)
        out.append(d.model_copy(update={"breakeven_months_vs": vs}))
    return out


def cost_by_month(d: Deployment, month: float, horizon: int, a: Assumptions) -> float:
    """What `d` has cost by `month` if it stopped there: upfront + running x month, less what owned hardware would
    fetch then (straight-line depreciation to the residual fraction); at the horizon this is d.total_cost."""
    cost = d.upfront_cost + d.running_monthly * month
    if d.residual_value:
        years, floor = a.get("depreciation_years"), a.get("residual_value_fraction")

        def worth(m: float) -> float:
            return max(floor, 1 - (1 - floor) * m / (12 * years))

        cost -= d.residual_value * worth(month) / worth(horizon)
    return cost


def breakeven_within(a_dep: Deployment, b_dep: Deployment, horizon: int, a: Assumptions) -> float | None:
    """The month (tenths) from which `a_dep` has cost less than `b_dep` for good, up to the horizon, on curves that
    count the resale value of owned hardware (so a break-even agrees with the totals); None: `a_dep` is not the
    cheaper at the horizon. Without resale on either side this is `breakeven` where the curves cross in time."""
    if not a_dep.residual_value and not b_dep.residual_value:
        m = breakeven(a_dep, b_dep)
        return m if m is not None and m <= horizon else None
    if cost_by_month(a_dep, horizon, horizon, a) > cost_by_month(b_dep, horizon, horizon, a):
        return None
    # the last tenth at which a_dep costs more, scanning back from the horizon: cost_by_month of both, written
    # out with the curves' constants read once (the same operations in the same order: the same floats)
    years, floor = a.get("depreciation_years"), a.get("residual_value_fraction")
    lost, span = 1 - floor, 12 * years
    w_h = max(floor, 1 - lost * horizon / span)
    ua, ra, za = a_dep.upfront_cost, a_dep.running_monthly, a_dep.residual_value
    ub, rb, zb = b_dep.upfront_cost, b_dep.running_monthly, b_dep.residual_value
    for k in range(int(horizon * 10), -1, -1):
        m = k / 10
        w = 1 - lost * m / span
        if w < floor:  # noqa: PLR1730 - max(floor, w), without a call on every tenth
            w = floor
        ca, cb = ua + ra * m, ub + rb * m
        if za:
            ca -= za * w / w_h
        if zb:
            cb -= zb * w / w_h
        if ca > cb:
            return (k + 1) / 10
    return 0.0


def _per_unit(d: Deployment, use: Usage) -> Deployment:
    upd: dict[str, float | None] = {}
    months = use.horizon_months
    if use.run_hours:
        runs = max(months * HOURS_PER_MONTH * use.utilization / use.run_hours, 1.0)
        upd["cost_per_run"] = d.total_cost / runs
    if use.tokens_per_s:
        tokens = use.tokens_per_s * 3600 * HOURS_PER_MONTH * months * use.utilization
        upd["cost_per_million_tokens"] = d.total_cost / (tokens / 1e6) if tokens > 0 else None
    return d.model_copy(update=upd)


def breakeven(a: Deployment, b: Deployment) -> float | None:
    """The month from which `a` has cost less in total than `b` for good, on their cost curves upfront + running
    x month (0: from the start; None: never, as `a` runs at least as dear)."""
    if a.upfront_cost <= b.upfront_cost and a.running_monthly <= b.running_monthly:
        return 0.0
    if a.running_monthly >= b.running_monthly:
        return None
    return (a.upfront_cost - b.upfront_cost) / (b.running_monthly - a.running_monthly)


def owning_breakeven_utilization(on_prem: Deployment, cloud_rate_per_gpu_hour: float, gpus: int,
                                 horizon_months: int) -> float:
    """The utilisation above which owning costs less than paying per GPU-hour (the owned cost barely moves
    with utilisation; the cloud bill scales with it)."""
    cloud_full = cloud_rate_per_gpu_hour * gpus * HOURS_PER_MONTH * horizon_months
    return on_prem.total_cost / cloud_full if cloud_full > 0 else math.inf


#: the cost model's inputs: (project key in `deployment`, data/tco.toml id, converted from USD, default when the
#: data has no row: value and why)
INPUTS: list[tuple[str, str | None, bool, float]] = [
    ("pue", "pue", False, 1.0),
    ("electricity_per_kwh", "electricity_usd_per_kwh", True, 0.0),
    ("average_draw_fraction", "average_draw_fraction", False, 1.0),
    ("idle_draw_fraction", "idle_draw_fraction", False, 0.0),
    ("depreciation_years", "depreciation_years", False, 5.0),
    ("residual_value_fraction", "residual_value_fraction", False, 0.0),
    ("install_fraction", "install_fraction", False, 0.0),
    ("support_fraction_per_year", "support_fraction_per_year", False, 0.0),
    ("colocation_per_kw_month", "colocation_usd_per_kw_month", True, 0.0),
    ("staff_fte_per_server", "staff_fte_per_server", False, 0.0),
    ("staff_cost_per_fte_year", "staff_usd_per_fte_year", True, 0.0),
    ("spare_fraction_production", "spare_fraction_production", False, 0.0),
    ("cloud_storage_usd_per_tb_month", "cloud_storage_usd_per_tb_month", False, 0.0),
]


def resolve_assumptions(overrides: dict[str, float | None], data: dict[str, tuple[float, str]],
                        usd_to: float, production: bool) -> Assumptions:
    """Project values (already in the output currency) over the data's defaults (USD converted); a value the
    data lacks counts as its neutral default and says so. `data`: id -> (value, source)."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for key, data_id, money, neutral in INPUTS:
        if overrides.get(key) is not None:
            values[key], sources[key] = float(overrides[key]), "project file"  # type: ignore[arg-type]
        elif data_id in data:
            v, src = data[data_id]
            values[key], sources[key] = (v * usd_to if money else v), src
        else:
            values[key], sources[key] = neutral, "no default in data/tco.toml: not counted"
    util_id = "utilization_production" if production else "utilization_experiment"
    if overrides.get("utilization") is not None:
        values["utilization"], sources["utilization"] = float(overrides["utilization"]), "project file"  # type: ignore[arg-type]
    elif util_id in data:
        values["utilization"], sources["utilization"] = data[util_id]
    else:
        values["utilization"], sources["utilization"] = (0.7 if production else 0.15), "no default in data/tco.toml"
    return Assumptions(values=values, sources=sources)


def choose(deps: list[Deployment], use: Usage) -> DeploymentChoice | None:
    """The cheapest option over the horizon, with the reasons a reader needs to trust it."""
    if not deps:
        return None
    best = deps[0]
    if use.run_hours and best.cost_per_run:
        reasons = [f"cheapest per run: {fmt_money(best.cost_per_run, best.currency)}"]
    else:
        reasons = [f"cheapest over {use.horizon_months} months: {fmt_money(best.total_cost, best.currency)}"]
    if best.cost_per_million_tokens is not None:  # every cost over the horizon, per token served at the load
        reasons[0] += f" ({best.cost_per_million_tokens:,.2f} {best.currency} per million output tokens)"
    seen = {best.option}
    for d in deps[1:]:
        if d.option in seen:
            continue
        seen.add(d.option)
        be = best.breakeven_months_vs.get(d.option)
        when = ("" if be is None else f"; {best.option} is cheaper from month {be:,.1f}" if be > 0 else
                f"; {best.option} is cheaper from the start")
        reasons.append(f"{d.option} ({d.provider}): {d.total_cost:,.0f} {d.currency}{when}")
    if best.option == "cloud" and use.production:
        reasons.append("cloud in production: shared, virtualised capacity gives less predictable latency; reserve "
                       "capacity or compare with dedicated hosting")
    if best.breakeven_utilization is not None:
        reasons.append(f"owning beats cloud GPUs on demand above {best.breakeven_utilization:.0%} utilisation"
                       + (f" (planned: {use.utilization:.0%})" if not use.serving else ""))
    if best.option == "on-prem" and use.utilization < 0.3:
        reasons.append(f"owning pays at {use.utilization:.0%} busy only because the alternatives are dearer over "
                       "this horizon; idle hardware still depreciates")
    return DeploymentChoice(option=best.option, provider=best.provider, total_cost=best.total_cost,  # type: ignore[arg-type]
                            monthly_cost=best.monthly_cost, currency=best.currency, reasons=reasons)


__all__ = ["INPUTS", "Assumptions", "Config", "Usage", "billed_hours", "breakeven", "breakeven_within", "choose",
           "compare", "cost_by_month", "owning_breakeven_utilization", "resolve_assumptions"]
