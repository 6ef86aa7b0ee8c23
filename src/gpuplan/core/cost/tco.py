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

from gpuplan.core.cost.breakeven import breakeven_within, owning_breakeven_utilization, worth
from gpuplan.core.cost.groups import TIER_NAMES, classes_of, price_group, same_class_on_demand, same_provider_on_demand
from gpuplan.core.cost.growth import when_added
from gpuplan.core.cost.inputs import Assumptions, Config, Usage
from gpuplan.schema.plan import Deployment, DeploymentChoice, GrowthStep
from gpuplan.schema.prices import CloudPrice, HostingOffer
from gpuplan.units import HOURS_PER_MONTH, fmt_money


def _on_prem(cfg: Config, use: Usage, a: Assumptions, currency: str) -> Deployment | None:
    if cfg.price is None:
        return None
    months = use.horizon_months
    spare = a.get("spare_fraction_production") if use.production else 0.0
    capex = cfg.price * (1 + spare)
    upfront = capex * (1 + a.get("install_fraction"))
    draw = (a.get("idle_draw_fraction")
            + (a.get("average_draw_fraction") - a.get("idle_draw_fraction")) * use.utilization)
    kw = cfg.power_w * cfg.servers * (1 + spare) / 1000
    power = kw * draw * a.get("pue") * HOURS_PER_MONTH * a.get("electricity_per_kwh")
    colo = kw * a.get("colocation_per_kw_month")
    support = capex * a.get("support_fraction_per_year") / 12
    staff = a.get("staff_fte_per_server") * cfg.servers * a.get("staff_cost_per_fte_year") / 12
    monthly_opex = power + colo + support + staff
    kept = worth(months, a)
    residual = capex * kept
    total = upfront + monthly_opex * months - residual
    ass = [f"price {cfg.price:,.0f} {currency}" + (f" + {spare:.0%} spare servers for production" if spare else ""),
           f"install {a.get('install_fraction'):.0%} of the price ({a.sources['install_fraction']})",
           f"power {kw:,.1f} kW at {draw:.0%} draw ({use.utilization:.0%} busy), " + a.cite("pue") + ", "
           + a.cite("electricity_per_kwh", "{:.3f}"),
           a.cite("colocation_per_kw_month", "{:,.0f}") + f": {colo:,.0f}/month",
           a.cite("support_fraction_per_year", "{:.0%}"),
           f"staff {a.get('staff_fte_per_server'):g} FTE per server x {a.get('staff_cost_per_fte_year'):,.0f}/year "
           f"({a.sources['staff_fte_per_server']})",
           f"worth {kept:.0%} after {months} months: " + a.cite("depreciation_years") + ", "
           + a.cite("residual_value_fraction", "{:.0%}")]
    return Deployment(option="on-prem", provider="purchase", monthly_cost=total / months, total_cost=total,
                      upfront_cost=upfront, running_monthly=monthly_opex, residual_value=residual, currency=currency,
                      assumptions=ass)


def _managed(cfg: Config, use: Usage, offers: list[HostingOffer], currency: str) -> list[Deployment]:
    out = []
    for o in offers:
        if o.gpu_id != cfg.gpu_id or o.gpus < 1:
            continue
        _same_currency(o.currency, currency)
        per_server = math.ceil(cfg.gpus_per_server / o.gpus)
        units = per_server * cfg.servers
        monthly = o.monthly * units
        setup = o.setup * units
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
        out.append(Deployment(option="managed", provider=f"{o.provider} {o.id}",
                              monthly_cost=total / use.horizon_months,
                              total_cost=total, upfront_cost=setup + committed, running_monthly=monthly,
                              currency=currency, assumptions=ass, rented=f"{units} x {o.provider} {o.id}",
                              providers=[o.provider]))
    return out


#: a cloud commitment's term in months (0: none), by price kind
CLOUD_TERMS = {"on-demand": 0, "reserved-1y": 12, "reserved-3y": 36}


def _cloud(cfg: Config, use: Usage, prices: list[CloudPrice], currency: str, a: Assumptions) -> list[Deployment]:
    n = cfg.gpus_per_server * cfg.servers
    months = use.horizon_months
    hours = months * HOURS_PER_MONTH * (1.0 if use.serving else use.utilization)
    out = []
    kinds = CLOUD_TERMS
    on_demand = [p for p in prices if p.gpu_id == cfg.gpu_id and p.kind == "on-demand"]
    need = cfg.together or cfg.gpus_per_server
    for kind, term in kinds.items():
        quoted = [p for p in prices if p.gpu_id == cfg.gpu_id and p.kind == kind]
        # a quote for an instance smaller than the GPUs that must share a machine does not price this configuration
        rows: list[CloudPrice] = []
        small: list[CloudPrice] = []
        for p in quoted:
            (rows if p.instance_gpus is None or p.instance_gpus >= need else small).append(p)
        if not rows or (term and months < term) or (use.cloud_kinds and kind not in use.cloud_kinds):
            continue
        for p in rows:
            _same_currency(p.currency, currency)
        rate = statistics.median(p.price_per_gpu_hour for p in rows)
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
        storage = use.storage_bytes / 1e12 * a.get("cloud_storage_per_tb_month") * stored_months
        total = rate * n * billed + storage
        providers = sorted({p.provider for p in rows})
        ass = [f"{kind}: median {rate:.2f} {currency}/GPU-hour of {len(rows)} price(s) "
               f"({', '.join(providers[:4])})",
               f"{n} GPUs x {billed:,.{1 if billed < 100 else 0}f} h"
               + ("" if term or use.serving else f" ({use.utilization:.0%} of the time)"),
               f"storage {use.storage_bytes / 1e12:,.1f} TB x {a.get('cloud_storage_per_tb_month'):g} "
               f"{currency}/TB-month x {stored_months:,.2f} months held ({a.sources['cloud_storage_per_tb_month']})",
               "shared, virtualised capacity: performance less predictable than a dedicated server"]
        if billing:
            ass.append(billing)
        shape = instance_shape(need, cfg.servers, small, rows)
        if shape:
            ass.append(shape)
        group = price_group(kind, rows)
        ass.insert(1, f"price group: {group}")
        if term:
            same = [p for p in on_demand if p.provider in providers]
            ass.append(same_provider_on_demand(kind, rate, same, currency))
            # like for like (issue 28): the commitment against on demand of the same provider classes, for instances
            # that hold the same GPUs, not against a median that mixes in GPU clouds and marketplaces
            classes: set[str] = {p.tier for p in rows}
            ass.append(same_class_on_demand(kind, rate, [p for p in on_demand if p.tier in classes and (
                p.instance_gpus is None or p.instance_gpus >= need)], classes, currency))
            if on_demand and rate > statistics.median(p.price_per_gpu_hour for p in on_demand):
                ass.append(f"the {kind} median is above the on-demand median of all providers "
                           f"({price_group('on-demand', on_demand)}): the groups are not alike; compare the same "
                           "providers on demand, above")
        out.append(Deployment(option="cloud", provider=f"cloud {kind}", monthly_cost=total / months, total_cost=total,
                              upfront_cost=0.0, running_monthly=total / months, currency=currency, assumptions=ass,
                              price_per_gpu_hour=rate, rented=f"{n} GPUs", providers=providers, price_group=group))
    return out


def instance_shape(need: int, servers: int, small: list[CloudPrice], used: list[CloudPrice]) -> str | None:
    """What the instance sizes of the quotes did to a cloud median (issue 28): the quotes for instances smaller than
    the `need` GPUs that must share a machine (`small`), left out, and how many of those `used` state no size; None
    when every quote used states a size that holds them and none was left out."""
    unknown = [p for p in used if p.instance_gpus is None]
    if need <= 1 or (not small and not unknown):  # any instance holds one GPU
        return None
    text = f"instance shape: {servers} x {need} GPU(s) on one machine each"
    if small:
        text += (f"; left out {len(small)} quote(s) for smaller instances ("
                 + ", ".join(f"{p.provider}: {p.instance_gpus} GPU(s)" for p in small[:4])
                 + (", ..." if len(small) > 4 else "") + ")")
    if unknown:
        text += f"; {len(unknown)} of {len(used)} quote(s) used state no instance size (assumed to offer it)"
    return text


def shape_gap(gpu_id: str, need: int, quoted: list[CloudPrice]) -> str | None:
    """Why no cloud price covers a configuration when every quote for its GPU is for a smaller instance (issue 28);
    None when some quote could hold the `need` GPUs that must share a machine."""
    if not quoted or any(p.instance_gpus is None or p.instance_gpus >= need for p in quoted):
        return None
    largest = max(p.instance_gpus or 0 for p in quoted)
    return (f"cloud: the cloud quotes for {gpu_id} are for instances of at most {largest} GPU(s), fewer than the "
            f"{need} this configuration needs on one machine: not priced (add a quote for a larger instance with "
            "--prices)")


#: how a provider class reads in a plan (data/prices.toml `tier`)



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


def _same_currency(row: str, currency: str) -> None:
    if row != currency:
        raise ValueError(f"a {row} quote in a {currency} comparison: convert the price book into the plan's currency "
                         "first (gpuplan.catalog.currency.in_currency)")


def compare(cfg: Config, use: Usage, cloud: list[CloudPrice], hosting: list[HostingOffer], a: Assumptions,
            currency: str, options: list[str], *, stale: str | None = None,
            note: str | None = None) -> list[Deployment]:
    """Every way to get `cfg` the price lists allow, cheapest total first, each with its cost per run or per
    million tokens and its break-even months against the cheapest of each other option. Every amount is in
    `currency`: the price, the quotes (a quote in another is a ValueError) and the assumptions. `stale`: a warning
    the rented options carry (their quotes' age); `note`: an assumption every option cites (the currency's
    conversion)."""
    deps: list[Deployment] = []
    if "on-prem" in options:
        d = _on_prem(cfg, use, a, currency)
        if d is not None:
            deps.append(d)
    if "managed" in options:
        deps += _managed(cfg, use, hosting, currency)
    if "cloud" in options:
        deps += _cloud(cfg, use, cloud, currency, a)
    if use.additions:
        deps = [_grown(d, cfg, use, cloud, hosting, a, currency) for d in deps]
    deps.sort(key=lambda d: d.total_cost)
    best: dict[str, Deployment] = {}
    for d in deps:
        best.setdefault(d.option, d)
    on_demand = next((d for d in deps if d.provider == "cloud on-demand"), None)
    rate = on_demand.price_per_gpu_hour if on_demand is not None else None
    out = []
    for d in deps:  # what each option adds to its own figures, in one copy
        upd: dict[str, object] = _per_unit(d, use)
        upd["breakeven_months_vs"] = {opt: breakeven_within(d, other, use.horizon_months, a)
                                      for opt, other in best.items() if opt != d.option}
        if d.option == "on-prem" and rate:
            upd["breakeven_utilization"] = owning_breakeven_utilization(
                d, rate, cfg.gpus_per_server * cfg.servers, use.horizon_months)
        if stale is not None and d.option in ("cloud", "managed"):
            upd["warnings"] = [*d.warnings, stale]
        if note is not None:
            upd["assumptions"] = [*d.assumptions, note]
        out.append(d.model_copy(update=upd))
    return out


def _grown(d: Deployment, cfg: Config, use: Usage, cloud: list[CloudPrice], hosting: list[HostingOffer],
           a: Assumptions, currency: str) -> Deployment:
    """`d` with the servers the planned growth adds (`use.additions`), each got the same way as `d` from its month
    to the horizon, in its total. A cloud reservation added with fewer months left than its term is paid for its whole
    term; an addition to reserved capacity is rented on demand instead where that costs less, so that a load growing
    sooner never costs less."""
    per_server = cfg.price / cfg.servers if cfg.price is not None else None
    steps: list[GrowthStep] = []
    fallbacks = past = 0
    for month, k in use.additions:
        sub_cfg = cfg.model_copy(update={"servers": k, "price": None if per_server is None else per_server * k})
        left = use.horizon_months - month
        sub_use = use.model_copy(update={"horizon_months": left, "additions": (), "storage_bytes": 0.0})
        way: Deployment | None
        if d.option == "on-prem":
            way = _on_prem(sub_cfg, sub_use, a, currency)
        elif d.option == "managed":
            way = next((x for x in _managed(sub_cfg, sub_use, hosting, currency) if x.provider == d.provider), None)
        else:
            way, rented_on_demand = _cloud_addition(d.provider, sub_cfg, sub_use, cloud, currency, a)
            fallbacks += rented_on_demand
            term = CLOUD_TERMS.get(d.provider.removeprefix("cloud "), 0)
            past += way is not None and not rented_on_demand and term > left
        if way is None:
            return d.model_copy(update={"warnings": [*d.warnings, "the servers the planned growth adds are not "
                                                     "priced this way (no quote for them): not in the total"]})
        steps.append(GrowthStep(month=month, servers=k, upfront_cost=way.upfront_cost,
                                running_monthly=way.running_monthly, residual_value=way.residual_value,
                                total_cost=way.total_cost))
    added = sum(st.total_cost for st in steps)
    total = d.total_cost + added
    note = (f"growth ({use.growth_note}): " if use.growth_note else "growth: ") + ", ".join(
        f"+{st.servers} server(s) {when_added(st.month)}" for st in steps) + f", {added:,.0f} {currency} in the total"
    if fallbacks:
        note += " (rented on demand where that costs less than a reservation, whose whole term is paid)"
    if past:
        note += " (a reservation made with fewer months left than its term is paid for the whole term)"
    return d.model_copy(update={"growth": steps, "total_cost": total, "monthly_cost": total / use.horizon_months,
                                "assumptions": [*d.assumptions, note]})


def _cloud_addition(provider: str, cfg: Config, use: Usage, cloud: list[CloudPrice], currency: str,
                    a: Assumptions) -> tuple[Deployment | None, bool]:
    """Cloud capacity added for the `use.horizon_months` left, the way `provider` ("cloud reserved-1y") rents, and
    whether it is rented on demand instead: a reservation is paid for its whole term even where fewer months are
    left (its cost spread over the months left), and on demand is taken where it costs less."""
    left = use.horizon_months
    term = CLOUD_TERMS.get(provider.removeprefix("cloud "), 0)
    ways = {x.provider: x for x in _cloud(cfg, use, cloud, currency, a)}
    way = ways.get(provider)
    if way is None and term > left:
        full = next((x for x in _cloud(cfg, use.model_copy(update={"horizon_months": term}), cloud, currency, a)
                     if x.provider == provider), None)
        if full is not None:
            way = full.model_copy(update={"running_monthly": full.total_cost / left,
                                          "monthly_cost": full.total_cost / left})
    od = ways.get("cloud on-demand")
    if term and od is not None and (way is None or od.total_cost < way.total_cost):
        return od, True
    return way, False


def _per_unit(d: Deployment, use: Usage) -> dict[str, object]:
    """What `d` costs per training run, or per million tokens served at the planned load."""
    upd: dict[str, object] = {}
    months = use.horizon_months
    if use.run_hours:
        runs = max(months * HOURS_PER_MONTH * use.utilization / use.run_hours, 1.0)
        upd["cost_per_run"] = d.total_cost / runs
    if use.tokens_per_s:
        tokens = use.tokens_per_s * 3600 * HOURS_PER_MONTH * months * use.utilization * use.load_mean
        upd["cost_per_million_tokens"] = d.total_cost / (tokens / 1e6) if tokens > 0 else None
    return upd


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
    clouds = [d for d in deps if d.option == "cloud" and d.price_group]
    if len(clouds) > 1 and len({classes_of(d.price_group) for d in clouds}) > 1:
        cheapest = clouds[0]
        reasons.append("the cloud options are priced from different provider classes ("
                       + "; ".join(d.price_group or "" for d in clouds) + f"): {cheapest.provider} is the cheapest "
                       "way to rent, and each reserved option is compared like for like with on demand of its own "
                       "class in its assumptions")
    if best.option == "cloud" and use.production:
        reasons.append("cloud in production: shared, virtualised capacity gives less predictable latency; reserve "
                       "capacity or compare with dedicated hosting")
    if best.breakeven_utilization is not None:
        reasons.append(f"owning beats cloud GPUs on demand above {best.breakeven_utilization:.0%} utilisation"
                       + (f" (planned: {use.utilization:.0%})" if not use.serving else ""))
    if best.option == "on-prem" and use.utilization < 0.3:
        reasons.append(f"owning pays at {use.utilization:.0%} busy only because the alternatives are dearer over "
                       "this horizon; idle hardware still depreciates")
    return DeploymentChoice(option=best.option, provider=best.provider, total_cost=best.total_cost,
                            monthly_cost=best.monthly_cost, currency=best.currency, reasons=reasons)


__all__ = ["TIER_NAMES", "Assumptions", "Config", "Usage", "billed_hours", "choose", "compare", "instance_shape",
           "price_group", "shape_gap"]
