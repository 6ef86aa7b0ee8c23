"""Render a PlanResult or a FitResult as rich text or JSON."""

from __future__ import annotations

import json

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from gpuplan.schema.plan import Candidate, Deployment, FitResult, PlanResult, Rejected
from gpuplan.units import GIB

def render_json(result: PlanResult | FitResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2)


def time_text(c: Candidate, day: str = "d", per_request: str = "s/req", per_billion: str = "/1B tok") -> str:
    """A candidate's time: the run's wall time (per 1e9 tokens when the run has no length), or a request's.
    The unit words are the report language's (English by default)."""
    if c.time_hours is not None:
        h = c.time_hours
        txt = f"{h * 60:,.0f} min" if h < 1 else (f"{h:,.1f} h" if h < 48 else f"{h / 24:,.1f} {day}")
        if c.time is not None and c.time.wall_hours is None:
            txt += f" {per_billion}"
        return txt
    if c.request_latency_s is not None:
        return f"{c.request_latency_s:,.1f} {per_request}"
    return "-"


def price_text(c: Candidate) -> str:
    return "-" if c.price_usd is None else f"${c.price_usd:,.0f}"


def layout_text(c: Candidate, replicas: str = "replicas", batch: str = "batch") -> str:
    lay = c.layout
    if lay.serving:
        return f"tp={lay.tp} x{lay.replicas} {replicas}, {batch} {lay.batch_per_replica}"
    parts = [f"zero={lay.zero}"] + [f"{k}={v}" for k, v in (("tp", lay.tp), ("pp", lay.pp)) if v > 1]
    if lay.micro_batch_size is not None:
        parts.append(f"mb={lay.micro_batch_size}")
    if lay.gradient_checkpointing:
        parts.append("ckpt")
    return " ".join(parts)


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


def is_chosen(c: Candidate, d: Deployment) -> bool:
    return c.deployment is not None and d.option == c.deployment.option and d.provider == c.deployment.provider


def chosen_deployment(c: Candidate) -> Deployment | None:
    return next((d for d in c.deployments if is_chosen(c, d)), None)


def render_text(result: PlanResult, console: Console, top: int = 8, details: bool = False) -> None:
    """The plan in a terminal (report/terminal.py): a one-screen summary, everything else with `details`."""
    from gpuplan.report.terminal import render_text as render_terminal

    render_terminal(result, console, top=top, details=details)


def render_fit_text(result: FitResult, console: Console) -> None:
    t = Table(title=f"{result.project}: on {result.gpus} x {result.gpu_id} "
                    f"({result.usable_bytes / GIB:,.1f} GiB usable per GPU; layout "
                    + ", ".join(f"{k}={v}" for k, v in result.layout.items()) + ")")
    for col in ("setting", "checkpointing", "largest that fits", "note"):
        t.add_column(col)
    for lim in result.limits:
        ck = "-" if lim.gradient_checkpointing is None else ("on" if lim.gradient_checkpointing else "off")
        if lim.largest is None:
            val = "[red]nothing fits[/red]"
        elif lim.setting == "model_scale":
            val = f"x{lim.largest:,.2f} ({(lim.parameters or 0) / 1e9:,.1f} B parameters)"
        else:
            val = f"{lim.largest:,.0f}"
        t.add_row(lim.setting, ck, val, lim.note or "")
    console.print(t)


def render_costs_text(result: PlanResult, console: Console, top: int = 1) -> None:
    for c in result.candidates[:top]:
        t = Table(title=f"{c.servers} x {c.server.platform_name} with {c.gpus_per_server} x {c.gpu_id}: where it "
                        "lives and what it costs")
        for col in ("option", "provider", "upfront", "per month", "total", "per run / per M tokens", "break-even"):
            t.add_column(col, justify="right" if col in ("upfront", "per month", "total") else "left")
        for d in c.deployments:
            unit = (f"{d.cost_per_run:,.0f} / run" if d.cost_per_run is not None else
                    f"{d.cost_per_million_tokens:,.2f} / M tok" if d.cost_per_million_tokens is not None else "-")
            be = ", ".join(f"vs {k}: " + ("never" if v is None else "now" if v == 0 else f"month {v:,.1f}")
                           for k, v in d.breakeven_months_vs.items())
            mark = "→ " if is_chosen(c, d) else ""
            t.add_row(mark + d.option, d.provider, f"{d.upfront_cost:,.0f}", f"{d.monthly_cost:,.0f}",
                      f"{d.total_cost:,.0f} {d.currency}", unit, be)
        lines: list[object] = [t]
        if c.deployment is not None:
            lines.append("\n".join(f"· {r}" for r in c.deployment.reasons))
        chosen = chosen_deployment(c)
        if chosen is not None:
            lines.append("Assumptions: " + "; ".join(chosen.assumptions))
            for w in chosen.warnings:
                lines.append(f"[yellow]! {w}[/yellow]")
        if not c.deployments:
            lines.append("No price list covers this configuration: add quotes with --prices.")
        console.print(Panel(Group(*lines), title=f"gpuplan cost: {result.project}", expand=False))
