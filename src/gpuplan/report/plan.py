"""Render a PlanResult or a FitResult as rich text or JSON. The plan in a terminal is report/terminal.py's
`render_text`; the short texts every rendering shares (time_text, price_text, layout_text, ...) live in
report/common.py and are importable from here too."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table

from gpuplan.core.layout_text import layout_items_text
from gpuplan.report.common import (
    MONEY_COLUMNS,
    chosen_deployment,
    is_chosen,
    layout_text,
    money_cells,
    price_text,
    time_text,
    unchosen_gpus,
)
from gpuplan.report.strict_json import dumps
from gpuplan.report.terminal import render_text
from gpuplan.schema.fit import FitResult
from gpuplan.schema.plan import PlanResult
from gpuplan.units import fmt_gib


def render_json(result: PlanResult | FitResult) -> str:
    return dumps(result.model_dump(mode="json"), indent=2)


def render_fit_text(result: FitResult, console: Console) -> None:
    t = Table(title=f"{result.project}: on {result.gpus} x {result.gpu_id} "
                    f"({fmt_gib(result.usable_bytes)} usable per GPU; layout {layout_items_text(result.layout)})")
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
        for col in ("option", "provider", *MONEY_COLUMNS, "per run / per M tokens", "break-even"):
            t.add_column(col, justify="right" if col in MONEY_COLUMNS else "left")
        for d in c.deployments:
            unit = (f"{d.cost_per_run:,.0f} / run" if d.cost_per_run is not None else
                    f"{d.cost_per_million_tokens:,.2f} / M tok" if d.cost_per_million_tokens is not None else "-")
            be = ", ".join(f"vs {k}: " + ("never" if v is None else "now" if v == 0 else f"month {v:,.1f}")
                           for k, v in d.breakeven_months_vs.items())
            mark = "→ " if is_chosen(c, d) else ""
            t.add_row(mark + d.option, d.provider, *money_cells(d), unit, be)
        lines: list[RenderableType] = [t]
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


__all__ = ["chosen_deployment", "is_chosen", "layout_text", "price_text", "render_costs_text", "render_fit_text",
           "render_json", "render_text", "time_text", "unchosen_gpus"]
