"""Render a PlanResult or a FitResult as rich text or JSON."""

from __future__ import annotations

import json

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from gpuplan.schema.plan import Candidate, Deployment, FitResult, PlanResult, Rejected
from gpuplan.units import GIB

VERDICT = {"pass": "[green]pass[/green]", "warn": "[yellow]warn[/yellow]", "fail": "[red]fail[/red]",
           "not evaluated": "[dim]not evaluated[/dim]"}


def render_json(result: PlanResult | FitResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2)


def time_text(c: Candidate, day: str = "d") -> str:
    """A candidate's time: the run's wall time (per 1e9 tokens when the run has no length), or a request's."""
    if c.time_hours is not None:
        h = c.time_hours
        txt = f"{h * 60:,.0f} min" if h < 1 else (f"{h:,.1f} h" if h < 48 else f"{h / 24:,.1f} {day}")
        if c.time is not None and c.time.wall_hours is None:
            txt += " /1B tok"
        return txt
    if c.request_latency_s is not None:
        return f"{c.request_latency_s:,.1f} s/req"
    return "-"


def price_text(c: Candidate) -> str:
    return "-" if c.price_usd is None else f"${c.price_usd:,.0f}"


def layout_text(c: Candidate) -> str:
    lay = c.layout
    if "replicas" in lay:
        return f"tp={lay['tp']} x{lay['replicas']} replicas, batch {lay['batch_per_replica']}"
    parts = [f"zero={lay['zero']}"] + [f"{k}={lay[k]}" for k in ("tp", "pp") if int(lay.get(k, 1)) > 1]
    if "micro_batch_size" in lay:
        parts.append(f"mb={lay['micro_batch_size']}")
    if lay.get("gradient_checkpointing"):
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


def render_text(result: PlanResult, console: Console, top: int = 8) -> None:
    rec = result.recommendation
    blocks: list[object] = []
    if rec is not None:
        s = rec.server
        head = (f"[bold]Recommended[/bold] ({result.objective}): {rec.servers} x {s.platform_name} with "
                f"{rec.gpus_per_server} x {rec.gpu_name}, {layout_text(rec)}\n"
                f"time {time_text(rec)}, price {price_text(rec)}; {rec.memory.device_bytes / GIB:,.1f} GiB per GPU "
                f"({rec.grown_device_bytes / GIB:,.1f} after growth)\n"
                f"server: {s.cpu_sockets} x {s.cpu_model} ({s.cpu_cores} cores), {s.ram_bytes / 1e9:,.0f} GB RAM, "
                f"{s.drives} x NVMe = {s.storage_bytes / 1e12:,.1f} TB at {s.storage_read_gb_s:,.1f} GB/s, "
                f"{s.network_gbit_s:,.0f} Gb/s network, {s.power_w / 1000:,.1f} kW, {s.cooling_btu_h:,.0f} BTU/h "
                f"({s.cooling})" + (f", {s.rack_units} U" if s.rack_units else ""))
        if rec.deployment is not None:
            d = rec.deployment
            head += (f"\n[bold]Deployment[/bold]: {d.option} ({d.provider}), {d.total_cost:,.0f} {d.currency} over "
                     f"the horizon, {d.monthly_cost:,.0f}/month (`gpuplan cost` compares the options)")
        blocks.append(head)
        blocks.append("\n".join(f"· {r}" for r in s.reasons + rec.reasons))
        for w in s.warnings:
            blocks.append(f"[yellow]! {w}[/yellow]")
    t = Table(title=f"Candidates (best {min(top, len(result.candidates))} of {len(result.candidates)}; * Pareto)")
    for col in ("", "GPU", "per server x servers", "layout", "GiB/GPU", "time", "price", "score"):
        t.add_column(col, justify="right" if col in ("GiB/GPU", "time", "price", "score") else "left")
    for c in result.candidates[:top]:
        t.add_row("*" if c.pareto else "", c.gpu_id, f"{c.gpus_per_server} x {c.servers}", layout_text(c),
                  f"{c.memory.device_bytes / GIB:,.1f}", time_text(c), price_text(c), f"{c.score:,.2f}")
    blocks.append(t)
    ck = Table(title="Decision checklist")
    ck.add_column("item")
    ck.add_column("verdict")
    ck.add_column("why")
    for item in result.checklist:
        ck.add_row(item.item, VERDICT[item.verdict], "\n".join(item.reasons))
    blocks.append(ck)
    faq = [f"[bold]{f.question}[/bold] {f.answer}." + "".join(f"\n  · {r}" for r in f.reasons) for f in result.faq]
    if faq:
        blocks.append("\n".join(faq))
    if result.rejected:
        lines = []
        for r in unchosen_gpus(result):
            shape = (f" {r.gpus_per_server} per server" + (f" x {r.servers} servers" if r.servers > 1 else "")
                     if r.gpus_per_server else "")
            lines.append(f"✗ {r.gpu_id}{shape}: {r.reason}")
        if lines:
            blocks.append("GPUs not chosen, and why:\n" + "\n".join(lines[:12])
                          + (f"\n… {len(lines) - 12} more (--format json)" if len(lines) > 12 else ""))
    for n in result.notes:
        blocks.append(f"· {n.message}")
    st = result.stats
    blocks.append(f"[dim]{st.candidates_evaluated:,} configurations over {st.gpu_types} GPU types in "
                  f"{st.search_seconds:.2f} s[/dim]")
    console.print(Panel(Group(*blocks), title=f"gpuplan plan: {result.project}", expand=False))


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
