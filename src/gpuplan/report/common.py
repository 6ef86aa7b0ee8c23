"""What every rendering of a plan shares (terminal, Markdown and HTML, figures, the web summary): a candidate's
time, price and layout as short text, which deployment it chose, and the GPUs with no candidate at all. The
words are English by default; the Markdown and HTML reports pass their language's."""

from __future__ import annotations

from gpuplan.core.layout_text import candidate_layout_text
from gpuplan.core.verdict import chosen_deployment, is_chosen
from gpuplan.schema.plan import Candidate, Deployment, PlanResult, Rejected
from gpuplan.units import fmt_hours, fmt_money


def time_text(c: Candidate, day: str = "d", per_request: str = "s/req", per_billion: str = "/1B tok") -> str:
    """A candidate's time: the run's wall time (per 1e9 tokens when the run has no length), or a request's.
    The unit words are the report language's (English by default)."""
    if c.time_hours is not None:
        txt = fmt_hours(c.time_hours, day=day)
        if c.time is not None and c.time.wall_hours is None:
            txt += f" {per_billion}"
        return txt
    if c.request_latency_s is not None:
        return f"{c.request_latency_s:,.1f} {per_request}"
    return "-"


def price_text(c: Candidate) -> str:
    """The hardware's purchase price, in the plan's currency (the candidate's)."""
    return "-" if c.price is None else fmt_money(c.price, c.currency)


def ranked_cost(c: Candidate) -> tuple[float, str] | None:
    """The cost the plan ranks `c` by, and its basis: the total of the way it is got over the horizon (its chosen
    deployment: buying with the running costs less resale, "buy"; managed hosting or the cloud, "rent"); None when
    no price list covers it."""
    d = c.deployment
    if d is None:
        return None
    return d.total_cost, "buy" if d.option == "on-prem" else "rent"


def ranked_cost_text(c: Candidate) -> str:
    """The cost the ranking compared, with its basis ("21 rent", "53,181 buy"), in the plan's currency."""
    r = ranked_cost(c)
    return "-" if r is None else f"{r[0]:,.0f} {r[1]}"


def ranked_cost_caption(result: PlanResult) -> str:
    """What the alternatives' cost column is, under the table."""
    out = ("cost as ranked: the cheapest way of getting it over the horizon, buying (with power, hosting, support "
           "and staff, less resale) or renting (median price)")
    if result.objective == "cost":
        out += "; within 10% of the cheapest (or 1% of the budget) is equal, then fewer GPUs, then faster"
    return out


def layout_text(c: Candidate, replicas: str = "replicas", batch: str = "batch") -> str:
    """The candidate's layout for tables: "zero=3 tp=2 mb=4 ckpt" (core/layout_text.py)."""
    return candidate_layout_text(c.layout, replicas=replicas, batch=batch)


def unchosen_gpus(result: PlanResult) -> list[Rejected]:
    """GPUs with no candidate at all, each with the reason of its largest shape tried (the smaller ones usually
    fail for a reason the larger one removes)."""
    chosen = {c.gpu_id for c in result.candidates}
    last: dict[str, Rejected] = {}
    for r in result.rejected:
        if r.gpu_id in chosen:
            continue
        prev = last.get(r.gpu_id)
        if prev is None or r.gpus_per_server * r.servers >= prev.gpus_per_server * prev.servers:
            last[r.gpu_id] = r
    return list(last.values())


def cost_text(c: Candidate) -> str:
    """What the chosen deployment costs, as the budget sees it: a training run per run (and its runs over the
    horizon), a service over the horizon with its upfront, running and resale lines, in the plan's currency."""
    d = chosen_deployment(c)
    if d is None:
        return "no price list covers this configuration (add quotes with --prices)"
    months = d.total_cost / d.monthly_cost if d.monthly_cost > 0 else 0.0
    total = fmt_money(d.total_cost, d.currency)
    if c.time_hours is not None and d.cost_per_run:
        runs = d.total_cost / d.cost_per_run
        return (f"{fmt_money(d.cost_per_run, d.currency)} per run" + (
            f" ({runs:,.0f} runs over {months:,.0f} months: {total})" if runs > 1.05 else ""))
    return f"{total} over {months:,.0f} months ({d.running_monthly:,.0f}/month running)"


#: a deployment's money columns, the lines that add up: upfront + per month x months - resale = total (docs/cost.md)
MONEY_COLUMNS = ("upfront", "per month", "resale", "total")


def money_cells(d: Deployment) -> tuple[str, str, str, str]:
    """A deployment's MONEY_COLUMNS as the text tables show them (the running cost per month; resale negative)."""
    return (f"{d.upfront_cost:,.0f}", f"{d.running_monthly:,.0f}",
            f"-{d.residual_value:,.0f}" if d.residual_value else "0", f"{d.total_cost:,.0f} {d.currency}")


__all__ = ["MONEY_COLUMNS", "chosen_deployment", "cost_text", "is_chosen", "layout_text", "money_cells", "price_text",
           "ranked_cost", "ranked_cost_caption", "ranked_cost_text",
           "time_text", "unchosen_gpus"]
