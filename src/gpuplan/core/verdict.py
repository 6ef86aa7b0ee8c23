"""What a plan says to do, in one line (issue #27): buy the server or rent the GPUs, from whom, at what cost, and the
runner-up way of getting them with why it lost. Read from the candidate's chosen deployment, so that the first line
a buyer reads is the action the cost comparison supports: a plan whose cheapest way is the cloud says "Rent", and
names the GPUs and the providers, not a chassis to buy. Pure."""

from __future__ import annotations

from typing import Literal

from gpuplan.core.cost.growth import when_added
from gpuplan.schema.plan import Action, Candidate, Deployment
from gpuplan.units import fmt_hours, fmt_money

Basis = Literal["upfront", "per run", "per month"]


def is_chosen(c: Candidate, d: Deployment) -> bool:
    """Whether `d` is the way of getting `c` its deployment choice names."""
    return c.deployment is not None and d.option == c.deployment.option and d.provider == c.deployment.provider


def chosen_deployment(c: Candidate) -> Deployment | None:
    """The deployment `c`'s choice names, with its costs and growth steps (None before `deploy`, or unpriced)."""
    return next((d for d in c.deployments if is_chosen(c, d)), None)


def action_of(c: Candidate, horizon_months: int) -> Action | None:
    """The action of candidate `c` (None when no price list covers it)."""
    chosen = chosen_deployment(c)
    if chosen is None:
        return None
    first = [st for st in chosen.growth if st.month <= 0]  # needed in the first month: got with the rest
    now = c.servers + sum(st.servers for st in first)
    gpus = c.gpus_per_server * now
    why = f" ({c.servers} for today's load, {now - c.servers} more for the first month's)" if first else ""
    money = chosen.currency
    verb: Literal["buy", "rent"]
    basis: Basis
    if chosen.option == "on-prem":
        verb, provider = "buy", "purchase"
        item = f"{now} x {c.server.platform_name} with {c.gpus_per_server} x {c.gpu_name}"
        cost, basis = (c.price or chosen.upfront_cost) * now / c.servers, "upfront"  # the same server, `now` of it
        head = f"Buy {item} for {fmt_money(cost, money)}{why}"
    else:
        verb = "rent"
        if chosen.option == "cloud":
            item = f"{gpus} x {c.gpu_name}"
            provider = ", ".join(chosen.providers[:2]) + (
                f" and {len(chosen.providers) - 2} more" if len(chosen.providers) > 2 else "")
            head = f"Rent {item} in the cloud {_rate(chosen)} {provider}){why}"
        else:
            item = chosen.rented or f"{gpus} x {c.gpu_name}"
            provider = chosen.provider
            head = f"Rent {item} (managed dedicated servers, {gpus} x {c.gpu_name}){why}"
        if c.time_hours is not None and chosen.cost_per_run:
            cost, basis = chosen.cost_per_run, "per run"
        else:
            cost, basis = chosen.running_monthly + sum(st.running_monthly for st in first), "per month"
    text = f"{head}{_growth(chosen)}: {_costs(c, chosen, cost, basis, horizon_months)}"
    runner = _runner_up(c, chosen, horizon_months)
    if runner is not None:
        text += f"; {runner}"
    return Action(verb=verb, option=chosen.option, item=item, provider=provider, gpus=gpus, cost=cost,
                  cost_basis=basis, total_cost=chosen.total_cost, horizon_months=horizon_months,
                  currency=money, runner_up=runner, text=text + ".")


#: how each kind of cloud price is rented
KINDS = {"on-demand": "on demand", "spot": "on spot capacity", "reserved-1y": "reserved for 1 year",
         "reserved-3y": "reserved for 3 years"}


def _rate(d: Deployment) -> str:
    """ "on demand at 2.95 EUR/GPU-hour (the median of" """
    kind = d.provider.removeprefix("cloud ")
    rate = f" at {d.price_per_gpu_hour:,.2f} {d.currency}/GPU-hour" if d.price_per_gpu_hour else ""
    return f"{KINDS.get(kind, kind)}{rate} (the median of"


def _growth(d: Deployment) -> str:
    """ ", and 1 more after 15 months as the load grows" (the growth steps after the first month in its total), or
    nothing."""
    later = [st for st in d.growth if st.month > 0]  # the first month's are in the head's count
    if not later:
        return ""
    steps = ", ".join(f"{st.servers} more {when_added(st.month)}" for st in later[:3])
    more = f" and {len(later) - 3} later steps" if len(later) > 3 else ""
    return f", and {steps}{more} as the load grows"


def _costs(c: Candidate, d: Deployment, cost: float, basis: Basis, horizon: int) -> str:
    """The headline cost and what it comes to over the horizon."""
    money = d.currency
    total = f"{fmt_money(d.total_cost, money)} over {horizon} months"
    if basis == "per run":
        runs = d.total_cost / cost if cost > 0 else 0.0
        took = f" of {fmt_hours(c.time_hours)}" if c.time_hours is not None else ""
        if c.stack is not None and c.stack.framework is not None:  # the software the time is for (issue #30)
            took += f" on {c.stack.text}"
        return f"{fmt_money(cost, money)} per run{took}" + (f", {total} ({runs:,.0f} runs)" if runs > 1.05 else "")
    if basis == "per month":
        return f"{fmt_money(cost, money)} a month, {total}"
    return f"{total} with power, hosting, support and staff, less its resale"


def runner_up(c: Candidate, chosen: Deployment) -> Deployment | None:
    """The cheapest way of getting `c` of another kind than `chosen` (deployments are cheapest first)."""
    return next((d for d in c.deployments if d.option != chosen.option), None)


def _runner_up(c: Candidate, chosen: Deployment, horizon: int) -> str | None:
    """The cheapest way of another kind, and when (if ever) the chosen way stops being the cheaper."""
    other = runner_up(c, chosen)
    if other is None:
        return None
    what = {"on-prem": "buying it", "managed": f"managed hosting ({other.provider})",
            "cloud": f"the cloud ({other.provider.removeprefix('cloud ')})"}[other.option]
    line = f"{what} instead: {fmt_money(other.total_cost, other.currency)} over {horizon} months"
    month = chosen.breakeven_months_vs.get(other.option)
    if month == 0.0:
        return line + ", dearer from the start"
    if month is not None:
        return line + f", cheaper only until month {month:,.1f}"
    return line


__all__ = ["KINDS", "action_of", "chosen_deployment", "is_chosen", "runner_up"]
