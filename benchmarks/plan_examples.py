"""The table of docs/plan.md "Examples": each built-in example's verdict as `gpuplan plan` prints it (its first
line: the action and its cost), with its one-line reason and evidence, from the current code and data (issues #13
and #27: what an experienced engineer would buy or rent, and why).

The reason says what decided it: the objective's ranking against the runner-up (the next shown candidate on other
hardware), then where it runs and why (the deployment choice's first reason).

Run: python benchmarks/plan_examples.py   (prints the Markdown table to paste into docs/plan.md)
"""

from __future__ import annotations

from gpuplan.api import plan
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.clock import plan_date
from gpuplan.report.common import cost_text, time_text
from gpuplan.schema.plan import Candidate, PlanResult


def shape(c: Candidate) -> str:
    return f"{c.servers} x {c.gpus_per_server} x {c.gpu_id}"


def runner_up(result: PlanResult) -> Candidate | None:
    rec = result.recommendation
    return next((c for c in result.candidates if rec is not None and c.gpu_id != rec.gpu_id), None)


def reason(result: PlanResult) -> str:
    """One line: why this candidate over the next one, and why this deployment."""
    rec = result.recommendation
    assert rec is not None
    other = runner_up(result)
    if other is None:
        vs = f"the only candidate that qualifies ({result.objective})"
    else:
        vs = f"ranked first by {result.objective} over {shape(other)} ({time_text(other)}, {cost_text(other)})"
        better_time = (other.time_hours or other.request_latency_s or 0) < (rec.time_hours or rec.request_latency_s
                                                                            or 0)
        better_cost = (other.cost or 0) < (rec.cost or 0)
        if result.objective == "time" and better_time or result.objective == "cost" and better_cost:
            vs += ": within the estimates' 10% (ranking.SAME), so the " + (
                "fewer GPUs" if rec.gpus_per_server * rec.servers < other.gpus_per_server * other.servers
                else "cheaper machine") + " wins"
        elif result.objective == "balanced":
            vs += " (cost and time in 10% buckets, then fewer GPUs)"
    where = rec.deployment.reasons[0] if rec.deployment is not None and rec.deployment.reasons else ""
    return f"{vs}; {where}" if where else vs


def evidence(c: Candidate) -> str:
    e = c.evidence
    if e is None:
        return "-"
    newest = f", newest {e.newest_quote}" if e.newest_quote else ""
    return f"speed {e.speed}, price {e.price} ({e.providers} providers{newest})" + ("" if e.adequate else
                                                                                  "; not adequate")


def main() -> None:
    when = plan_date()  # $GPUPLAN_AS_OF, else today
    print(f"### Examples ({when})\n")
    print("| example | objective | verdict, as printed | what it costs; how long | why | evidence |")
    print("|---|---|---|---|---|---|")
    for name in example_names():
        result = plan(example_path(name), as_of=when)
        rec = result.recommendation
        assert rec is not None
        d = rec.deployment
        where = f", {d.option} ({d.provider})" if d is not None else ""
        verdict = rec.action.text if rec.action is not None else f"{shape(rec)}{where}"
        print(f"| {name} | {result.objective} | {verdict} | {cost_text(rec)}; {time_text(rec)} | "
              f"{reason(result)} | {evidence(rec)} |")


if __name__ == "__main__":
    main()
