"""The server the team has, first (`plan --have` / `--this-machine`): the answer, the ways it runs the job (each
re-estimated and timed), and what to do, cheapest first. Text for the terminal (`render_have_text`) and lines for
the Markdown report (`have_markdown`); the figures are PlanResult.have's, nothing is computed here."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpuplan.schema.owned import HaveOption, HaveResult, HaveWay
from gpuplan.units import fmt_hours, fmt_money, fmt_ram_gb

#: ways shown in the summary (all of them with --details)
WAYS_MAX = 8
KIND = {"keep": "keep", "rent-rest": "keep + rent", "add": "add", "rent": "rent", "replace": "replace"}


def _target(value: bool | None) -> str:
    return "–" if value is None else "yes" if value else "no"


def _way_time(w: HaveWay) -> str:
    if w.time_hours is not None:
        return fmt_hours(w.time_hours)
    if w.request_latency_s is not None:
        return f"{w.request_latency_s:,.1f} s/request"
    return "–"


def _runs(w: HaveWay) -> str:
    if w.runs:
        return "runs"
    return "GPU memory short" if not w.fits else "RAM short"


def _per_gpu(w: HaveWay) -> str:
    """"16.1 / 21.2": the way's peak per GPU of the usable memory, GiB."""
    return f"{w.device_bytes / 2**30:,.1f} / {w.usable_bytes / 2**30:,.1f}"


def _recipe(w: HaveWay) -> str:
    return "changed" if w.changes_recipe else "kept"


def _cost(o: HaveOption, currency: str) -> str:
    return "no price" if o.cost is None else f"{fmt_money(o.cost, currency)} {o.cost_basis}"


def _head(have: HaveResult) -> Text:
    colour = "green" if have.can_do else "yellow" if have.how is not None else "red"
    what = f"{have.gpus} x {have.gpu}" if have.gpus else "no GPU"
    out = Text()
    out.append("The server you have: ", style="bold")
    out.append(f"{have.machine}: {what}, {have.cpu_cores} CPU cores, {fmt_ram_gb(have.ram_bytes)} RAM\n")
    out.append(have.verdict, style=f"bold {colour}")
    return out


def ways_table(have: HaveResult, details: bool) -> Table:
    t = Table(title="How it runs on your server (each re-estimated on its GPUs)", box=box.SIMPLE_HEAD,
              title_justify="left", pad_edge=False, show_edge=False, padding=(0, 1))
    for col in ("way", "GiB/GPU", "host RAM", "run", "in time", "recipe"):
        t.add_column(col, justify="right" if col in ("GiB/GPU", "host RAM", "run") else "left",
                     no_wrap=col != "way", ratio=1 if col == "way" else None)
    shown = have.ways if details else have.ways[:WAYS_MAX]
    for w in shown:
        mark = "→ " if have.how is not None and w.code == have.how.code else ""
        style = None if w.runs else "dim"
        t.add_row(escape(mark + w.change), _per_gpu(w),
                  fmt_ram_gb(w.host_ram_bytes) if w.host_ram_bytes else "–", _way_time(w) if w.runs else _runs(w),
                  _target(w.meets_target), _recipe(w), style=style)
    if len(have.ways) > len(shown):
        t.caption = f"{len(have.ways) - len(shown)} more with --details"
    return t


def options_table(have: HaveResult, currency: str) -> Table:
    t = Table(title="What to do, cheapest first", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False,
              show_edge=False, padding=(0, 1))
    for col in ("", "option", "what", "cost", "time"):
        t.add_column(col, justify="right" if col in ("cost", "time") else "left", no_wrap=col != "what",
                     ratio=1 if col == "what" else None)
    for o in have.options:
        t.add_row("→" if o.best else "", KIND[o.kind], escape(o.what), _cost(o, currency),
                  fmt_hours(o.time_hours) if o.time_hours is not None else "–")
    return t


def render_have_text(have: HaveResult, console: Console, currency: str, details: bool = False) -> None:
    console.print(_head(have))
    if have.ways:
        console.print(ways_table(have, details))
    if have.options:
        console.print(options_table(have, currency))
    best = next((o for o in have.options if o.best), None)
    lines = (best.reasons if best is not None else []) if not details else \
        [f"{o.kind}: {r}" for o in have.options for r in o.reasons]
    for r in lines[:3] if not details else lines:
        console.print(Text(f"  · {r}"))
    for n in have.notes[: None if details else 2]:
        console.print(Text(f"  · {n}", style="dim"))


WAY_HEAD = ["way", "GiB per GPU", "host RAM", "run", "in time", "recipe"]
OPTION_HEAD = ["", "option", "what", "cost", "time"]


def way_rows(have: HaveResult) -> list[list[str]]:
    """Every way, as table cells (the reports)."""
    return [[w.change, _per_gpu(w), fmt_ram_gb(w.host_ram_bytes) if w.host_ram_bytes else "–",
             _way_time(w) if w.runs else _runs(w), _target(w.meets_target), _recipe(w)] for w in have.ways]


def option_rows(have: HaveResult, currency: str) -> list[list[str]]:
    return [["→" if o.best else "", KIND[o.kind], o.what, _cost(o, currency),
             fmt_hours(o.time_hours) if o.time_hours is not None else "–"] for o in have.options]


def have_lines(have: HaveResult) -> list[str]:
    """The section's prose: the machine, then the answer."""
    what = f"{have.gpus} x {have.gpu}" if have.gpus else "no GPU"
    return [f"{have.machine}: {what}, {have.cpu_cores} CPU cores, {fmt_ram_gb(have.ram_bytes)} RAM.", have.verdict]


__all__ = ["OPTION_HEAD", "WAYS_MAX", "WAY_HEAD", "have_lines", "option_rows", "options_table", "render_have_text",
           "way_rows", "ways_table"]
