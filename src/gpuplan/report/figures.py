"""The four figures of the HTML report (report/document.py), drawn with matplotlib into inline SVG: memory per GPU
against the VRAM and the usable VRAM, time against cost, cumulative cost over the horizon, and memory as the model
grows (the growth view). Each `draw_*` draws
one figure for a PlanResult in a report language; `svg` renders it deterministically (no date, a fixed hash
salt), so that the page is stable."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from gpuplan.report.common import is_chosen, ranked_cost
from gpuplan.report.i18n import t
from gpuplan.report.numbers import Numbers, numbers
from gpuplan.schema.plan import Candidate, Deployment, GrowthRow, PlanResult
from gpuplan.units import GIB

MEMORY_PARTS = ("weights", "reference", "gradients", "optimizer", "activations", "kv_cache", "other")


def _vram_gib(c: Candidate) -> float | None:
    """The GPU memory the plan compared the candidate with (its catalog row, built-in or the user's); None when
    the candidate was not compared with a GPU (every planned candidate is)."""
    if c.memory.headroom_bytes is None:
        return None
    return (c.memory.device_bytes + c.memory.headroom_bytes) / GIB


def _vram_marks(ax: object, ys: Sequence[float], vrams: list[float | None], usable: list[float | None], half: float,
                lang: str) -> None:
    """Per bar group: a solid mark at the GPU's VRAM and a dashed one at the usable VRAM (less the headroom)."""
    first = True
    for y, vram, use in zip(ys, vrams, usable):
        if vram is None:
            continue
        ax.plot([vram, vram], [y - half, y + half], color="black", linewidth=2,  # type: ignore[attr-defined]
                label=t("l_vram", lang) if first else None)
        if use is not None:
            ax.plot([use, use], [y - half, y + half], color="black", linewidth=1.5,  # type: ignore[attr-defined]
                    linestyle="--", label=t("l_usable", lang) if first else None)
        first = False


def _label(c: Candidate) -> str:
    return f"{c.gpu_id} {c.gpus_per_server}x{c.servers}"


def _localize_ticks(ax: object, nf: Numbers) -> None:
    """Tick labels written with the report language's numbers (after the axes' scales and formatters are set)."""
    if nf.lang == "en":
        return
    from matplotlib.ticker import Formatter

    class Localized(Formatter):
        def __init__(self, base: Formatter) -> None:
            self.base = base

        def set_axis(self, axis: Any) -> None:
            super().set_axis(axis)
            self.base.set_axis(axis)

        def set_locs(self, locs: Any) -> None:
            super().set_locs(locs)
            self.base.set_locs(locs)

        def __call__(self, x: float, pos: int | None = None) -> str:
            return nf.localize(self.base(x, pos))

    for axis in (ax.xaxis, ax.yaxis):  # type: ignore[attr-defined]
        axis.set_major_formatter(Localized(axis.get_major_formatter()))


def _no_data(ax: object, lang: str) -> None:
    ax.text(0.5, 0.5, t("no_data", lang), ha="center", va="center", transform=ax.transAxes)  # type: ignore[attr-defined]
    ax.set_axis_off()  # type: ignore[attr-defined]


def draw_memory(result: PlanResult, lang: str, fig: object) -> None:
    ax = fig.subplots()  # type: ignore[attr-defined]
    cands = list(reversed(result.candidates))
    if not cands:
        return _no_data(ax, lang)
    ys = range(len(cands))
    left = [0.0] * len(cands)
    for part in (*MEMORY_PARTS, "rest"):
        if part == "rest":
            vals = [max(0.0, c.memory.device_bytes / GIB - lft) for c, lft in zip(cands, left)]
        else:
            vals = [getattr(c.memory, f"{part}_bytes") / GIB for c in cands]
        if any(v > 0 for v in vals):
            ax.barh(list(ys), vals, left=left, label=t(f"m_{part}", lang), height=0.6)
            left = [lft + v for lft, v in zip(left, vals)]
    vrams = [_vram_gib(c) for c in cands]
    _vram_marks(ax, list(ys), vrams, [None if v is None else v * (1 - result.headroom) for v in vrams], 0.4, lang)
    ax.set_yticks(list(ys), [_label(c) for c in cands])
    ax.set_xlabel(t("ax_gib", lang))
    _localize_ticks(ax, numbers(lang))
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))


def draw_pareto(result: PlanResult, lang: str, fig: object) -> int:
    ax = fig.subplots()  # type: ignore[attr-defined]
    training = any(c.time_hours is not None for c in result.candidates)
    pts = []
    for c in result.candidates:
        x = c.time_hours if training else c.request_latency_s
        cost = ranked_cost(c)  # as the ranking and its Pareto front count it
        if x is not None and cost is not None:
            pts.append((c, x, cost[0]))
    skipped = len(result.candidates) - len(pts)
    if not pts:
        _no_data(ax, lang)
        return skipped
    ax.scatter([p[2] for p in pts], [p[1] for p in pts], color="tab:blue")
    for c, x, y in pts:
        ax.annotate(_label(c), (y, x), textcoords="offset points", xytext=(5, 4), fontsize="small")
    front = sorted((p for p in pts if p[0].pareto), key=lambda p: p[2])
    if len(front) > 1:
        ax.plot([p[2] for p in front], [p[1] for p in front], color="tab:orange", label=t("l_pareto", lang))
    rec = next((p for p in pts if p[0] is result.recommendation), None)
    if rec is None and result.recommendation is not None:
        rec = next((p for p in pts if p[0] == result.recommendation), None)
    if rec is not None:
        ax.scatter([rec[2]], [rec[1]], s=200, facecolors="none", edgecolors="tab:red", linewidths=2,
                   label=t("l_recommended", lang))
    xs, ys = [p[2] for p in pts], [p[1] for p in pts]
    if min(xs) > 0 and max(xs) / min(xs) > 20:
        ax.set_xscale("log")
    if min(ys) > 0 and max(ys) / min(ys) > 20:
        ax.set_yscale("log")
    if ax.get_xscale() == "linear":
        ax.xaxis.set_major_formatter("{x:,.0f}")
    _localize_ticks(ax, numbers(lang))
    ax.set_xlabel(t("ax_cost", lang, currency=result.currency))
    ax.set_ylabel(t("ax_time_h" if training else "ax_latency", lang))
    ax.legend(fontsize="small")
    return skipped


def _horizon_months(deps: list[Deployment]) -> float:
    return max((d.total_cost / d.monthly_cost for d in deps if d.monthly_cost > 0), default=12.0)


def draw_tco(result: PlanResult, lang: str, fig: object) -> None:
    ax = fig.subplots()  # type: ignore[attr-defined]
    rec = result.recommendation
    if rec is None or not rec.deployments:
        return _no_data(ax, lang)
    months = _horizon_months(rec.deployments)
    steps = [months * i / 60 for i in range(61)]
    first = True
    for d in rec.deployments:
        ax.plot(steps, [d.upfront_cost + d.running_monthly * m for m in steps], label=f"{d.option} ({d.provider})",
                linewidth=3 if is_chosen(rec, d) else 1.5)
        for other, v in d.breakeven_months_vs.items():
            if v is not None and 0 < v <= months:
                ax.plot([v], [d.upfront_cost + d.running_monthly * v], "o", color="black",
                        label=t("l_breakeven", lang) if first else None)
                when = t("be_month", lang, m=numbers(lang).num(v, 1))
                ax.annotate(f"{when} vs {other}", (v, d.upfront_cost + d.running_monthly * v),
                            textcoords="offset points", xytext=(5, -12), fontsize="small")
                first = False
    ax.set_xlabel(t("ax_month", lang))
    ax.set_ylabel(t("ax_cumulative", lang, currency=rec.deployments[0].currency))
    ax.set_xlim(0, months)
    ax.yaxis.set_major_formatter("{x:,.0f}")
    _localize_ticks(ax, numbers(lang))
    ax.legend(fontsize="small")


def draw_latency(result: PlanResult, lang: str, fig: object) -> None:
    """Latency against load (issue #29): one panel per latency (time to first token, inter-token, end to end), each
    percentile of the recommendation's latency curve against the deployment's arrival rate, the objective drawn
    across (dashed), the planned load (solid) and the capacity within the objectives (dotted) marked."""
    rec = result.recommendation
    curve = rec.latency_curve if rec is not None else None
    if curve is None or not curve.points:
        return _no_data(fig.subplots(), lang)  # type: ignore[attr-defined]
    axes = fig.subplots(1, 3)  # type: ignore[attr-defined]
    xs = [p.requests_per_s for p in curve.points]
    obj = curve.objectives
    nf = numbers(lang)
    for ax, key in zip(axes, ("ttft", "itl", "e2e")):
        for k, q in enumerate(curve.percentiles):
            ax.plot(xs, [getattr(p, f"{key}_s")[f"p{q}"] for p in curve.points], color=f"C{k}",
                    label=f"p{q}")
        target = getattr(obj, f"{key}_s") if obj is not None else None
        if obj is not None and target is not None:
            ax.axhline(target, color="tab:red", linestyle="--", linewidth=1.5,
                       label=t("l_objective", lang, pct=obj.percentile))
        ax.axvline(curve.planned_requests_per_s, color="black", linewidth=1, label=t("l_planned_load", lang))
        if curve.capacity_requests_per_s:
            ax.axvline(curve.capacity_requests_per_s, color="black", linestyle=":", linewidth=1,
                       label=t("l_capacity", lang))
        ax.set_title(t(f"p_{key}", lang), fontsize="medium")
        ax.set_xlabel(t("ax_rate", lang))
        ax.set_xlim(0, xs[-1])
        ax.set_ylim(bottom=0)
        _localize_ticks(ax, nf)
    axes[0].set_ylabel(t("ax_seconds", lang))
    handles, labels = axes[-1].get_legend_handles_labels()
    for ax in axes[:-1]:  # an objective drawn on another panel only
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, fontsize="small", loc="outside lower center", ncols=min(len(labels), 6))  # type: ignore[attr-defined]


def draw_growth(result: PlanResult, lang: str, fig: object) -> None:
    """The growth view: per candidate, one bar per model size (x1 as planned, x1.5, x2), against its VRAM and
    usable VRAM; a size that no longer fits is hatched."""
    ax = fig.subplots()  # type: ignore[attr-defined]
    rows: dict[tuple[str, int, int], list[GrowthRow]] = {}
    for r in result.growth_view:
        rows.setdefault((r.gpu_id, r.gpus_per_server, r.servers), []).append(r)
    cands = [c for c in reversed(result.candidates) if (c.gpu_id, c.gpus_per_server, c.servers) in rows]
    if not cands:
        return _no_data(ax, lang)
    from matplotlib.patches import Patch

    nf = numbers(lang)
    ys = list(range(len(cands)))
    sizes = rows[(cands[0].gpu_id, cands[0].gpus_per_server, cands[0].servers)]
    height = 0.8 / len(sizes)
    keys: list[Patch] = []
    for k, size in enumerate(sizes):
        grown = [rows[(c.gpu_id, c.gpus_per_server, c.servers)][k] for c in cands]
        color = f"C{k}"
        ax.barh([y + 0.4 - height * (k + 0.5) for y in ys], [r.device_bytes / GIB for r in grown], height=height,
                color=color, hatch=["" if r.fits else "//" for r in grown], edgecolor="white")
        keys.append(Patch(facecolor=color, label=t("l_planned" if size.factor == 1 else "l_factor", lang,
                                                  f=nf.num(size.factor, 1 if size.factor % 1 else 0))))
    keys.append(Patch(facecolor="grey", edgecolor="white", hatch="//", label=t("l_no_fit", lang)))
    _vram_marks(ax, ys, [_vram_gib(c) for c in cands],
                [rows[(c.gpu_id, c.gpus_per_server, c.servers)][0].usable_bytes / GIB for c in cands], 0.45, lang)
    ax.set_yticks(ys, [_label(c) for c in cands])
    ax.set_xlabel(t("ax_gib", lang))
    _localize_ticks(ax, nf)
    lines, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*lines, *keys], fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))


_SVG_HEAD = re.compile(r"\A.*?(?=<svg)", re.S)


def svg(draw: object) -> tuple[str, object]:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "gpuplan", "svg.fonttype": "none", "font.size": 9}):
        fig = Figure(figsize=(7.5, 3.6), layout="constrained")
        extra = draw(fig)  # type: ignore[operator]
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    # drop the XML prolog and DOCTYPE: the SVG is inlined into HTML5
    return _SVG_HEAD.sub("", buf.getvalue()).strip(), extra


__all__ = ["MEMORY_PARTS", "draw_growth", "draw_latency", "draw_memory", "draw_pareto", "draw_tco", "svg"]
