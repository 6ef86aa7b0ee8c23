"""When one way of getting a configuration becomes cheaper than another (core/cost/tco.py): the months at which
their cost curves cross, with and without the resale value of owned hardware, and the utilisation above which owning
beats renting by the hour. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable

from gpuplan.core.cost.inputs import Assumptions
from gpuplan.schema.plan import Deployment
from gpuplan.units import HOURS_PER_MONTH


def cost_by_month(d: Deployment, month: float, horizon: int, a: Assumptions) -> float:
    """What `d` has cost by `month` if it stopped there: upfront + running x month, less what owned hardware would
    fetch then (straight-line depreciation to the residual fraction), and the same for each growth step from its
    month on (servers added inside the horizon); at the horizon this is d.total_cost."""
    cost = d.upfront_cost + d.running_monthly * month
    if d.residual_value:
        cost -= d.residual_value * worth(month, a) / worth(horizon, a)
    for st in d.growth:
        if month >= st.month:
            cost += st.upfront_cost + st.running_monthly * (month - st.month)
            if st.residual_value:
                cost -= st.residual_value * worth(month - st.month, a) / worth(horizon - st.month, a)
    return cost


def worth(month: float, a: Assumptions) -> float:
    """The share of its price owned hardware fetches after `month` months: straight-line over the depreciation
    years down to the residual fraction."""
    floor = a.get("residual_value_fraction")
    return max(floor, 1 - (1 - floor) * month / (12 * a.get("depreciation_years")))


#: costs closer than this share of the amounts at stake are equal: a break-even does not turn on rounding
TIE = 1e-9


def tie_tolerance(a_dep: Deployment, b_dep: Deployment, horizon: int) -> float:
    """The difference under which two deployments' costs by month are equal: TIE of the largest amount either
    moves over the horizon (one tolerance for every month, so that "costs more" follows the curves)."""
    return TIE * max(max(abs(d.upfront_cost) + abs(d.running_monthly) * horizon + abs(d.residual_value), 1.0)
                     for d in (a_dep, b_dep))


def breakeven_within(a_dep: Deployment, b_dep: Deployment, horizon: int, a: Assumptions) -> float | None:
    """The month (tenths) from which `a_dep` has cost less than `b_dep` for good, up to the horizon, on curves that
    count the resale value of owned hardware (so a break-even agrees with the totals): the tenth after the last one
    at which `a_dep` costs more (by more than `tie_tolerance`); None: `a_dep` is not the cheaper at the horizon.
    Without resale on either side this is `breakeven` where the curves cross in time.

    In closed form: the difference of the two curves is linear in the month on either side of the month the
    depreciation reaches its floor, so on each side the tenths at which `a_dep` costs more are a run at one end;
    the crossing is solved for, and the tenths beside it are checked on the curves themselves."""
    if not a_dep.residual_value and not b_dep.residual_value and not a_dep.growth and not b_dep.growth:
        m = breakeven(a_dep, b_dep)
        return m if m is not None and m <= horizon else None

    eps = tie_tolerance(a_dep, b_dep, horizon)

    def dearer_at(k: int) -> bool:  # a_dep costs more at month k/10
        return cost_by_month(a_dep, k / 10, horizon, a) - cost_by_month(b_dep, k / 10, horizon, a) > eps

    last = horizon * 10
    if dearer_at(last):
        return None
    for lo, hi in reversed(_pieces(a_dep, b_dep, last, a)):  # the later side first: its last dearer tenth is the answer
        k = _last_dearer(lo, hi, dearer_at, a_dep, b_dep, horizon, a)
        if k is not None:
            return (k + 1) / 10
    return 0.0


def _pieces(a_dep: Deployment, b_dep: Deployment, last: int, a: Assumptions) -> list[tuple[int, int]]:
    """The runs of tenths [lo, hi] up to `last` on which both cost curves are straight: tenths up to the knee are on
    the line of the depreciation, the later ones on its floor; a growth step starts a run at its month (its upfront
    is a jump there) and has its own knee."""
    knee = math.floor(120 * a.get("depreciation_years"))
    ends = {knee}
    for st in (*a_dep.growth, *b_dep.growth):
        ends |= {st.month * 10 - 1, st.month * 10 + knee}
    pieces, lo = [], 0
    for end in sorted(e for e in ends if 0 <= e < last):
        pieces.append((lo, end))
        lo = end + 1
    return [*pieces, (lo, last)]


def _last_dearer(lo: int, hi: int, dearer_at: Callable[[int], bool], a_dep: Deployment, b_dep: Deployment,
                 horizon: int, a: Assumptions) -> int | None:
    """The last tenth in [lo, hi] at which `a_dep` costs more, given that the curves' difference is linear there."""
    def gap(k: int) -> float:
        return cost_by_month(a_dep, k / 10, horizon, a) - cost_by_month(b_dep, k / 10, horizon, a)

    g_lo, g_hi = gap(lo), gap(hi)
    if g_hi >= g_lo:  # a_dep grows no cheaper across the piece: dearer at its end, or nowhere in it
        k = hi if dearer_at(hi) else None
    else:  # a_dep grows cheaper: dearer up to the crossing
        root = lo + g_lo / (g_lo - g_hi) * (hi - lo)
        k = min(hi, max(lo, math.ceil(root) - 1))
    if k is None:
        return None
    while k >= lo and not dearer_at(k):
        k -= 1
    while k < hi and dearer_at(k + 1):
        k += 1
    return k if k >= lo else None


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


__all__ = ["TIE", "breakeven", "breakeven_within", "cost_by_month", "owning_breakeven_utilization", "tie_tolerance",
           "worth"]
