"""The plan in a terminal: one screen (the verdict and why, the server, a bar of what fills the GPU, the
alternatives, the deployment costs, the checklist and the FAQ), with the rest behind `--details`.

Without colour (NO_COLOR, a pipe, a file) the output still reads: the checklist keeps its marks ✓ ! ✗ and the
memory bar draws each part with its own letter. `progress` shows a spinner on stderr, only on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich import box
from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from gpuplan.core.layout_text import compact_layout_text
from gpuplan.report.common import (
    MONEY_COLUMNS,
    cost_text,
    is_chosen,
    layout_text,
    money_cells,
    price_text,
    ranked_cost_caption,
    ranked_cost_text,
    time_text,
    unchosen_gpus,
)
from gpuplan.schema.plan import Candidate, ChecklistItem, Deployment, PlanResult
from gpuplan.units import GIB, fmt_gib, fmt_ram_gb

#: checklist verdict -> (mark, colour)
MARK = {"pass": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "red"), "not evaluated": ("–", "dim")}

#: the memory bar, left to right: MemoryOut field, legend label, letter drawn without colour, colour. The eight
#: tensor parts (the reference model: DPO and GRPO; the rollout engine's weights: GRPO) sum to the tensors' peak;
#: the allocator's reserve and the CUDA context bring it to the device total (what nvidia-smi shows, what the plan
#: checks against the GPU's memory).
BAR_PARTS = (("weights_bytes", "weights", "W", "blue"), ("reference_bytes", "reference model", "F", "bright_cyan"),
             ("gradients_bytes", "gradients", "G", "magenta"), ("optimizer_bytes", "optimizer", "O", "yellow"),
             ("activations_bytes", "activations", "A", "green"), ("kv_cache_bytes", "KV cache", "K", "cyan"),
             ("other_bytes", "temporaries", "T", "bright_blue"),
             ("rollout_weights_bytes", "rollout engine", "E", "bright_green"),
             ("reserve", "allocator reserve", "R", "bright_magenta"),
             ("context", "CUDA context", "C", "red"))
FREE_GLYPH = "·"
#: the free memory the plan keeps as headroom (constraints.memory_headroom), beyond the usable limit
KEPT_GLYPH = "░"
KEPT_GLYPH_PLAIN = ":"
BAR_WIDTH = 80
#: reasons under the verdict in the summary (all of them with --details)
WHY_MAX = 3


@contextmanager
def progress(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs; nothing at all when stderr is not a terminal (pipes,
    tests, JSON output). The user's own prints are left alone (no stdout redirection). The spinner's modules are
    imported only to draw it."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.live import Live
    from rich.spinner import Spinner

    with Live(Spinner("dots", text=message), console=Console(stderr=True), transient=True,
              redirect_stdout=False, redirect_stderr=False, refresh_per_second=12.5):
        yield


def _hanging(rows: list[tuple[str | Text, str | Text]]) -> Table:
    """Bulleted lines whose continuation lines stay indented under the text."""
    g = Table.grid(padding=(0, 1))
    g.add_column(no_wrap=True)
    g.add_column()
    for bullet, text in rows:
        g.add_row(bullet, text)
    return g


def _plain(console: Console) -> bool:
    return console.no_color or console.color_system is None


def memory_parts(c: Candidate) -> list[tuple[str, str, str, int]]:
    """(label, letter, colour, bytes) per part of the device total per GPU, in bar order; they sum to
    `memory.device_bytes`."""
    m = c.memory
    values = {"reserve": max(0, m.reserved_bytes - m.peak_tensor_bytes),
              "context": max(0, m.device_bytes - max(m.reserved_bytes, m.peak_tensor_bytes))}
    return [(label, letter, colour, int(values[f] if f in values else getattr(m, f)))
            for f, label, letter, colour in BAR_PARTS]


def vram_bytes(c: Candidate) -> int | None:
    m = c.memory
    return None if m.headroom_bytes is None else m.device_bytes + m.headroom_bytes


def memory_bar(c: Candidate, plain: bool, width: int = BAR_WIDTH, headroom: float = 0.0) -> Text:
    """A horizontal stacked bar of the parts against the GPU's memory: the free part dotted up to the usable
    limit, then the `headroom` fraction the plan keeps free shaded."""
    parts = memory_parts(c)
    vram = vram_bytes(c)
    scale = max(vram or 0, c.memory.device_bytes, 1)
    bar, cum, edge = Text("▕" if not plain else "["), 0, 0
    for _, letter, colour, v in parts:
        cum += v
        right = round(cum / scale * width)
        if right > edge:
            bar.append((letter if plain else "█") * (right - edge), style=colour)
            edge = right
    usable = max(edge, round((1 - headroom) * (vram or 0) / scale * width)) if vram else width
    bar.append(FREE_GLYPH * (min(usable, width) - edge), style="dim")
    bar.append((KEPT_GLYPH_PLAIN if plain else KEPT_GLYPH) * (width - min(usable, width)), style="dim")
    bar.append("▏" if not plain else "]")
    return bar


def memory_legend(c: Candidate, plain: bool, width: int, headroom: float = 0.0) -> list[Text]:
    """The bar's key, GiB per part (parts under 0.05 GiB left out), packed into lines of `width` columns
    without splitting an entry."""
    entries = []
    for label, letter, colour, v in memory_parts(c):
        if round(v / GIB, 1) == 0:
            continue
        entries.append(Text.assemble((letter if plain else "█", colour), f" {label} {v / GIB:,.1f}"))
    vram = vram_bytes(c)
    if vram is not None:
        free = vram - c.memory.device_bytes
        kept = headroom * vram
        entries.append(Text(f"{FREE_GLYPH} free {fmt_gib(free)}, {free / vram:.0%}", style="dim"))
        if kept > 0:
            entries.append(Text(f"{KEPT_GLYPH_PLAIN if plain else KEPT_GLYPH} of which the plan keeps "
                                f"{fmt_gib(kept)} ({headroom:.0%} headroom)", style="dim"))
    lines = [Text()]
    for e in entries:
        if lines[-1].cell_len and lines[-1].cell_len + 2 + e.cell_len > width:
            lines.append(Text())
        if lines[-1].cell_len:
            lines[-1].append("  ")
        lines[-1].append_text(e)
    return lines


def _where(rec: Candidate) -> str:
    d = rec.deployment
    if d is None:
        return "no price list covers this configuration (add quotes with --prices)"
    return f"deploy {d.option} ({d.provider}): {cost_text(rec)}"


def _verdict(result: PlanResult, rec: Candidate) -> Text:
    """The first line: the action (buy or rent what, from whom, at what cost, and the runner-up), else the server
    the plan would get with no price list covering it."""
    out = Text()
    if rec.evidence is not None and not rec.evidence.adequate:
        out.append("No candidate has adequate evidence; the best of what qualifies: ", style="bold yellow")
    a = rec.action
    if a is not None:
        verb, rest = a.text.split(" ", 1)
        head, _, tail = rest.partition(a.item)
        out.append(verb + " ", style="bold")
        out.append(head + a.item, style="bold green")
        out.append(tail)
    else:
        s = rec.server
        out.append("Get ", style="bold")
        out.append(f"{rec.servers} × {s.platform_name} with {rec.gpus_per_server} × {rec.gpu_name}", style="bold green")
        out.append(f"; {_where(rec)}.")
    if rec.time_hours is None and rec.request_latency_s is not None:
        out.append(f" A request takes {rec.request_latency_s:,.1f} s.")
    elif rec.time is not None and rec.time.wall_hours is None:
        out.append(f" {time_text(rec)} (the project gives no training length).")
    return out


def why_reasons(rec: Candidate) -> list[str]:
    """The candidate's own reasons, then the deployment's (which the first line already states when it names the
    action): the first WHY_MAX go in the summary."""
    dep = rec.deployment.reasons if rec.deployment is not None and rec.action is None else []
    picks = rec.reasons[:WHY_MAX - 1] + dep[:1]
    rest = [r for r in rec.reasons + dep if r not in picks]
    return picks + rest


def _server(rec: Candidate) -> Table:
    s = rec.server
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column()
    rack = f", {s.rack_units} U" if s.rack_units else ""
    label = "If you buy" if rec.action is not None and rec.action.verb == "rent" else "Server"
    g.add_row(label, f"{rec.servers} × {s.platform_name}{rack}, price {price_text(rec)}")
    g.add_row("", f"{rec.gpus_per_server} × {rec.gpu_name} ({rec.gpu_id}) per server, {layout_text(rec)}")
    g.add_row("", f"{s.cpu_sockets} × {s.cpu_model} ({s.cpu_cores} cores) · RAM {fmt_ram_gb(s.ram_bytes)} · "
                  f"NVMe {s.storage_bytes / 1e12:,.1f} TB ({s.drives} drive{'s' if s.drives > 1 else ''}, "
                  f"{s.storage_read_gb_s:,.1f} GB/s) · "
                  f"network {s.network_gbit_s:,.0f} Gb/s · {s.power_w / 1000:,.1f} kW · "
                  f"{s.cooling_btu_h:,.0f} BTU/h ({s.cooling})")
    return g


def _memory(console: Console, rec: Candidate, headroom: float) -> None:
    m, vram, plain = rec.memory, vram_bytes(rec), _plain(console)
    of = f" of {vram / GIB:,.1f}" if vram else ""
    head = Text()
    head.append("Memory per GPU", style="bold")
    head.append(f"  {m.device_bytes / GIB:,.1f}{of} GiB at the peak ({m.peak_phase}; largest: {m.dominant}); "
                f"{rec.grown_device_bytes / GIB:,.1f} after growth")
    console.print(head)
    console.print(memory_bar(rec, plain, width=max(20, min(BAR_WIDTH, console.width - 2)), headroom=headroom),
                  no_wrap=True, overflow="crop")
    for line in memory_legend(rec, plain, console.width, headroom):
        console.print(line)


#: below this many columns the tables leave out what the verdict and --details already say (the alternatives' score,
#: the deployments' resale and break-even), so that a layout or a provider is never wrapped a letter a line
WIDE = 100


def _candidates(result: PlanResult, top: int, width: int = WIDE) -> Table:
    """The alternatives; at full width without the score when the layouts need its room (a tensor and pipeline
    parallel layout is wider than the column leaves), so that no layout wraps."""
    table = _candidates_table(result, top, width, score=width >= WIDE)
    if width >= WIDE and Console(width=4 * width).measure(table).maximum > width:  # its natural width
        table = _candidates_table(result, top, width, score=False)
    return table


def _candidates_table(result: PlanResult, top: int, width: int, score: bool) -> Table:
    shown = result.candidates[:top]
    kept = max(result.stats.candidates_kept, len(result.candidates))
    thin = any(c.evidence is not None and not c.evidence.adequate for c in shown)
    t = Table(title=f"Alternatives (best {len(shown)} of {kept}; → recommended, * Pareto"
                    + ("; ? evidence not adequate, ranked last" if thin else "") + "; GPUs: per server × servers)",
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    cost_col = f"cost {result.currency}"
    wide = width >= WIDE
    mem_col = "GiB/GPU" if wide else "GiB"
    cost_col = cost_col if wide else result.currency
    cols = ("", "GPU", "GPUs", "layout", mem_col, "time", cost_col) + (("score",) if score else ())
    for col in cols:  # the layout alone may wrap, never a number
        t.add_column(col, justify="right" if col in (mem_col, "time", cost_col, "score") else "left",
                     no_wrap=col != "layout", min_width=2 if not col else None,
                     overflow="fold" if col == "layout" else "ellipsis")
    for c in shown:
        mark = (("→" if c == result.recommendation else " ") + ("*" if c.pareto else " ")
                + ("?" if c.evidence is not None and not c.evidence.adequate else " "))
        layout = compact_layout_text(c.layout)  # narrow: parts spaced, so that a line breaks between them
        t.add_row(mark, c.gpu_id, f"{c.gpus_per_server} × {c.servers}", layout if wide else layout.replace("·", " "),
                  f"{c.memory.device_bytes / GIB:,.1f}", time_text(c), ranked_cost_text(c),
                  *((f"{c.score:.3g}",) if score else ()))
    t.caption = ranked_cost_caption(result)
    t.caption_justify = "left"
    return t


def _breakeven(d: Deployment) -> str:
    """From when `d` is cheaper than each other option, grouped: "now: on-prem, managed; never: cloud"."""
    when: dict[str, list[str]] = {}
    for k, v in d.breakeven_months_vs.items():
        when.setdefault("never" if v is None else "now" if v == 0 else f"month {v:,.1f}", []).append(k)
    return "; ".join(f"{w}: {', '.join(opts)}" for w, opts in when.items()) or "-"


def _deployments(rec: Candidate, width: int = WIDE) -> Table:
    wide = width >= WIDE
    t = Table(title="Deployment costs (→ chosen" + (")" if wide else "; more: --format md)"),
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    money = MONEY_COLUMNS if wide else tuple(c for c in MONEY_COLUMNS if c != "resale")
    for col in ("option", "provider", *money, *(("cheaper than",) if wide else ())):
        t.add_column(col, justify="right" if col in MONEY_COLUMNS else "left",
                     no_wrap=col not in ("provider", "cheaper than"))
    for d in rec.deployments:
        cells = money_cells(d)
        t.add_row(("→ " if is_chosen(rec, d) else "  ") + d.option, _provider(d),
                  *(cells if wide else (cells[0], cells[1], cells[3])), *((_breakeven(d),) if wide else ()))
    gaps = rec.deployment.gaps if rec.deployment is not None else []
    if gaps:  # the options asked for that no price covers, under the table (a row would wrap a word a line)
        t.caption, t.caption_justify = "; ".join(gaps), "left"
    return t


def _provider(d: Deployment) -> str:
    """Who provides it, short: "cloud on-demand" -> "on-demand" (the option says cloud)."""
    return d.provider.removeprefix("cloud ") if d.option == "cloud" else d.provider


def summary_reason(item: ChecklistItem) -> str:
    """One reason per item for the summary: the first (the finding) when it passes, the last (where the checklist
    puts the warning or the failed check) otherwise."""
    if not item.reasons:
        return ""
    return item.reasons[0] if item.verdict == "pass" else item.reasons[-1]


def _mark(item: ChecklistItem) -> Text:
    mark, colour = MARK[item.verdict]
    return Text(mark, style=f"bold {colour}")


def _checklist(console: Console, result: PlanResult, details: bool) -> None:
    """One line per item in the summary (mark, item, verdict, one reason); every reason with `details`."""
    console.print(Text("Decision checklist" + ("" if details else " (every reason with --details)"), style="bold"))
    pad = max((len(f"{i.item} ({i.verdict})") for i in result.checklist), default=0)
    for item in result.checklist:
        line = Text.assemble(" ", _mark(item), f" {item.item} ({item.verdict})".ljust(pad + 3))
        if details:
            console.print(line)
            console.print(_hanging([("      ·", r) for r in item.reasons]))
        else:
            line.append(summary_reason(item))
            line.truncate(console.width, overflow="ellipsis")
            console.print(line, no_wrap=True, overflow="ellipsis")


def _faq(console: Console, result: PlanResult, details: bool) -> None:
    if not result.faq:
        return
    console.print(Text("Questions", style="bold"))
    for f in result.faq:
        line = Text("  ")
        line.append(f.question, style="bold")
        line.append(f" {f.answer}.")
        if details:
            console.print(line)
            console.print(_hanging([("    ·", r) for r in f.reasons]))
        else:
            console.print(line, no_wrap=True, overflow="ellipsis")


def _bullets(console: Console, title: str, lines: list[str], bullet: str = "·") -> None:
    if lines:
        console.print(Text(title, style="bold"))
        console.print(_hanging([(f"  {bullet}", line) for line in lines]))


def _rejected_lines(result: PlanResult) -> list[str]:
    lines = []
    for r in unchosen_gpus(result):
        shape = (f" {r.gpus_per_server} per server" + (f" x {r.servers} servers" if r.servers > 1 else "")
                 if r.gpus_per_server else "")
        lines.append(f"{r.gpu_id}{shape}: {r.reason}")
    return lines


def render_text(result: PlanResult, console: Console, top: int = 8, details: bool = False) -> None:
    """The one-screen summary; with `details`, then every reason: the server's rules, the full checklist and FAQ,
    and every GPU not chosen with why."""
    rec = result.recommendation
    console.print(Rule(Text(f"gpuplan plan: {result.project} (objective: {result.objective})", style="bold"),
                       align="left"))
    if result.have is not None:  # the server the team has comes first; then what to get instead
        from gpuplan.report.have import render_have_text

        render_have_text(result.have, console, result.currency, details)
        console.print(Rule(Text("If you buy or rent instead", style="bold"), align="left"))
    if rec is not None:
        console.print(_verdict(result, rec))
        # the stack (reason "stack: ...", candidate.stack) goes to the first lines (issue #30); until then the summary
        # keeps to one screen and shows it with --details
        why = [r for r in why_reasons(rec) if details or not r.startswith("stack: ")]
        console.print(_hanging([("  ·", r) for r in (why if details else why[:WHY_MAX])]
                               + [(Text("  !", style="bold yellow"), Text(w, style="yellow"))
                                  for w in rec.server.warnings]))
        console.print(_server(rec))
        _memory(console, rec, result.headroom)
    else:
        console.print(Text("No recommendation: no candidate meets the project.", style="bold red"))
    if result.candidates:
        console.print(_candidates(result, top, console.width))
    if rec is not None:
        if rec.deployments:
            console.print(_deployments(rec, console.width))
        else:
            console.print("Deployment costs: no price list covers this configuration (add quotes with --prices).")
    if result.checklist:
        _checklist(console, result, details)
    _faq(console, result, details)
    for n in result.notes:
        if n.code == "framework-default" and not details:  # the plan's default stack: with --details, as above
            continue
        console.print(Text(f"· {n.message}"))
    rejected = _rejected_lines(result)
    if details:
        if rec is not None:
            _bullets(console, "The server, rule by rule", rec.server.reasons)
        _bullets(console, "GPUs not chosen, and why", rejected, bullet="✗")
    st = result.stats
    foot = (f"{st.candidates_evaluated:,} configurations over {st.gpu_types} GPU types in {st.search_seconds:.2f} s"
            + (f"; {len(rejected)} GPU types not chosen" if rejected else ""))
    if not details:
        foot += "; --details: the server's rules, every reason, the GPUs not chosen and why"
    console.print(Text(foot, style="dim"))
