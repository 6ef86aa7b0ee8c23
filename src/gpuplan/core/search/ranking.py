"""Ranking the search's candidates by the objective, the Pareto front of cost against time, and the budget
check. Pure; the ranking takes anything with the attributes a candidate has (`Ranked`), so the search ranks its
light records before building full results for the candidates it shows."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from gpuplan.schema.project import Budget

#: costs (objective cost) or times (objective time) within this ratio count as the same: the estimates are
#: not finer than that (docs/accuracy.md: median errors of 10-15% for time)
SAME = 1.1
#: with a budget, costs closer than this fraction of it count as the same too: a difference under 1% of what
#: the team can spend does not decide the purchase, the simpler machine does
SAME_BUDGET_FRACTION = 0.01


class Listed(Protocol):
    """What the growth view and the FAQ read of a kept candidate (a full Candidate or the search's light record)."""

    @property
    def gpu_id(self) -> str: ...
    @property
    def gpus_per_server(self) -> int: ...
    @property
    def servers(self) -> int: ...
    @property
    def time_hours(self) -> float | None: ...


class Ranked(Protocol):
    """What ranking reads of a candidate."""

    @property
    def cost(self) -> float | None: ...
    @property
    def time_hours(self) -> float | None: ...
    @property
    def request_latency_s(self) -> float | None: ...
    @property
    def gpus_per_server(self) -> int: ...
    @property
    def servers(self) -> int: ...


T = TypeVar("T", bound=Ranked)


def budget_limit(budget: Budget, horizon: int) -> float:
    """What goals.budget allows in all, in its currency: the amount, or the monthly amount over the horizon."""
    return budget.amount if budget.period == "total" else budget.amount * horizon


def over_budget(cost: float | None, basis: str | None, budget: Budget | None, horizon: int, training: bool,
                both: bool = True, no_rent: str | None = None) -> str | None:
    """Why a candidate's cost (in the budget's currency, the plan's: the cheaper of buying and renting; `both`
    False: only one of them is priced, `no_rent` saying why renting is not when the price lists do) breaks
    goals.budget; None when it does not (or there is no budget)."""
    if budget is None:
        return None
    if cost is None:
        return "no purchase or rental price in the catalog to check against goals.budget (add one with --catalog)"
    limit = budget_limit(budget, horizon)
    if cost <= limit:
        return None
    what = "to buy" if basis == "buy" else ("to rent for the run" if training else f"to rent for {horizon} months")
    rent_gap = no_rent or "no rental price in the price lists"
    which = ("the cheaper of buying and renting" if both else
             rent_gap if basis == "buy" else "no purchase price in the catalog")
    return (f"over budget: {cost:,.0f} {budget.currency} {what} ({which}), budget "
            f"{limit:,.0f} {budget.currency}"
            + (f" ({budget.amount:,.0f}/month x {horizon} months)" if budget.period == "monthly" else ""))


def same_cost(budget: Budget | None, horizon: int) -> float:
    """The cost difference (in the budget's currency) under which the cost objective counts two candidates as
    equally cheap."""
    if budget is None:
        return 0.0
    return SAME_BUDGET_FRACTION * budget_limit(budget, horizon)


#: the score a candidate without a price starts from (every priced candidate scores below it): scores stay finite
UNPRICED = 10**6


def _rel(t: float, t_min: float) -> float:
    """t against the fastest, finite: a candidate with no time at all (nothing to rank it by) counts as UNPRICED."""
    return t / t_min if math.isfinite(t) and math.isfinite(t_min) else float(UNPRICED)


#: training runs shorter than this count as equally fast: a job done within the hour leaves nothing to gain from a
#: bigger machine that finishes sooner, so the ranking falls to cost and then to the smaller machine
SHORTEST_RUN_HOURS = 1.0


def _time(c: Ranked) -> float:
    if c.time_hours is not None:
        return max(c.time_hours, SHORTEST_RUN_HOURS)
    return c.request_latency_s or math.inf


def pareto_front(costs: Sequence[float], times: Sequence[float]) -> list[bool]:
    """Which points no other point dominates (no dearer and no slower, and better in one): O(n log n)."""
    order = sorted(range(len(costs)), key=lambda i: (costs[i], times[i]))
    out = [False] * len(costs)
    best_before: float | None = None  # the fastest time among strictly cheaper points
    k = 0
    while k < len(order):
        j = k
        while j < len(order) and costs[order[j]] == costs[order[k]]:
            j += 1
        fastest_here = times[order[k]]  # equal costs: sorted by time
        for i in order[k:j]:
            out[i] = not ((best_before is not None and best_before <= times[i]) or fastest_here < times[i])
        best_before = fastest_here if best_before is None else min(best_before, fastest_here)
        k = j
    return out


def reference(cands: Sequence[T], adequate: Callable[[T], bool]) -> list[T]:
    """The candidates the buckets count from (the cheapest, the fastest): those that can win. An unproven GPU,
    which ranks after every adequate one, does not move the buckets of the others."""
    return [c for c in cands if adequate(c)] or list(cands)


def rank(cands: Sequence[T], objective: str, same_cost: float = 0.0,
         adequate: Callable[[T], bool] | None = None) -> list[tuple[T, float, bool]]:
    """(candidate, score, on the Pareto front), best first. Score (lower is better) by the objective. Cost is the
    cheaper of buying and renting; a candidate without any price ranks after the priced ones. `same_cost`: costs
    that much above the cheapest still count as the cheapest (`same_cost`). `adequate`: whether a
    candidate's evidence is adequate (core/search/evidence.py); those that are not rank after every one that is,
    whatever their score."""
    if not cands:
        return []
    first = adequate or (lambda c: True)
    ok = [first(c) for c in cands]
    times = [_time(c) for c in cands]  # each read once: the reference, the front, the scores and the order
    costs = [c.cost for c in cands]
    ref = [i for i, a in enumerate(ok) if a] or range(len(cands))  # `reference`, by position
    priced = [v for i in ref if (v := costs[i]) is not None]
    p_min = min(priced) if priced else 1.0
    t_min = min(times[i] for i in ref) or 1e-9
    front = pareto_front([c or math.inf for c in costs], times)
    log_same = math.log(SAME)
    out = []
    for c, price, t in zip(cands, costs, times):
        if price is None:
            price = math.inf
        if objective == "cost":
            # costs within 10% (or same_cost) are the same cost: then fewer GPUs (a simpler machine), then time
            base = p_min + same_cost
            bucket = math.floor(math.log(max(price, base) / base) / log_same) if math.isfinite(price) else UNPRICED
            n = c.gpus_per_server * c.servers
            score = bucket + 1e-2 * math.log2(n) + (1e-4 * max(t / t_min, 1.0) if math.isfinite(t / t_min)
                                                    else 1e-4 * UNPRICED)
        elif objective == "time":
            # times within 10% are the same time: then the cheaper (a faster candidate that costs more is
            # still listed, and on the Pareto front)
            bucket = math.floor(math.log(max(t, t_min) / t_min) / log_same) \
                if math.isfinite(t) and math.isfinite(t_min) else UNPRICED
            score = bucket + (0.5 * max(1 - p_min / price, 0.0) if math.isfinite(price) else 0.5)
        else:  # balanced: the geometric mean of the two ratios, within 10% the same (the estimates are not finer):
            # then fewer GPUs, the simpler machine; without a price, after every priced one, by time
            if math.isfinite(price):
                # an unproven candidate (ranked after the others anyway) may beat the reference: ratios from 1
                mean = math.sqrt(max(price / p_min, 1.0) * max(t / t_min, 1.0))
                n = c.gpus_per_server * c.servers
                score = math.floor(math.log(mean) / log_same) + 1e-2 * math.log2(n) + 1e-4 * mean
            else:
                score = UNPRICED + _rel(t, t_min)
        out.append(score)
    # adequate first, then by score, cost and time (a stable sort: equals keep the search's order)
    keys = [(not a, score, price if price is not None else math.inf, t)
            for a, score, price, t in zip(ok, out, costs, times)]
    return [(cands[i], out[i], front[i]) for i in sorted(range(len(cands)), key=keys.__getitem__)]


__all__ = ["SAME", "SAME_BUDGET_FRACTION", "SHORTEST_RUN_HOURS", "UNPRICED", "Listed", "Ranked", "budget_limit",
           "over_budget", "pareto_front", "rank", "reference", "same_cost"]
