"""The plan in a terminal: one screen (the verdict and why, the server, a bar of what fills the GPU, the
alternatives, the deployment costs, the checklist and the FAQ), with the rest behind `--details`.

Without colour (NO_COLOR, a pipe, a file) the output still reads: the checklist keeps its marks ✓ ! ✗ and the
memory bar draws each part with its own letter. `progress` shows a spinner on stderr, only on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from gpuplan.report.common import (
    cost_text,
    layout_text,
    price_text,
    unchosen_gpus,
)
from gpuplan.report.i18n import t
from gpuplan.report.numbers import numbers
from gpuplan.report.terminal_tables import candidates_table, deployments_table
from gpuplan.report.translate import french_number, tr
from gpuplan.report.verdict import time_in, verdict_lines
from gpuplan.schema.plan import Candidate, ChecklistItem, PlanResult
from gpuplan.units import GIB

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
#: the bar's labels that the reports' fixed strings name (report/i18n.py), for another language than English
LABEL_KEYS = {"weights": "m_weights", "reference model": "m_reference", "rollout engine": "m_rollout",
              "gradients": "m_gradients",
              "optimizer": "m_optimizer", "activations": "m_activations", "KV cache": "m_kv_cache",
              "temporaries": "tx_temporaries", "allocator reserve": "tx_reserve", "CUDA context": "tx_context"}


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


def memory_legend(c: Candidate, plain: bool, width: int, headroom: float = 0.0, lang: str = "en") -> list[Text]:
    """The bar's key, GiB per part (parts under 0.05 GiB left out), packed into lines of `width` columns
    without splitting an entry."""
    nf = numbers(lang)
    entries = []
    for label, letter, colour, v in memory_parts(c):
        if round(v / GIB, 1) == 0:
            continue
        name = label if lang == "en" else t(LABEL_KEYS[label], lang)
        entries.append(Text.assemble((letter if plain else "█", colour), f" {name} {nf.num(v / GIB, 1)}"))
    vram = vram_bytes(c)
    if vram is not None:
        free = vram - c.memory.device_bytes
        kept = headroom * vram
        entries.append(Text(t("tx_free", lang, glyph=FREE_GLYPH, gib=nf.num(free / GIB, 1), pct=nf.pct(free / vram)),
                            style="dim"))
        if kept > 0:
            entries.append(Text(t("tx_kept", lang, glyph=KEPT_GLYPH_PLAIN if plain else KEPT_GLYPH,
                                  gib=nf.num(kept / GIB, 1), pct=nf.pct(headroom)), style="dim"))
    lines = [Text()]
    for e in entries:
        if lines[-1].cell_len and lines[-1].cell_len + 2 + e.cell_len > width:
            lines.append(Text())
        if lines[-1].cell_len:
            lines[-1].append("  ")
        lines[-1].append_text(e)
    return lines


def _where(rec: Candidate, lang: str = "en") -> str:
    d = rec.deployment
    if d is None:
        return t("tx_no_price", lang)
    return t("tx_deploy", lang, option=tr(d.option, lang), provider=tr(d.provider, lang), cost=tr(cost_text(rec), lang))


def _verdict(result: PlanResult, rec: Candidate, lang: str = "en") -> Text:
    """The first line: the action (buy or rent what, from whom, at what cost, and the runner-up), else the server
    the plan would get with no price list covering it."""
    out = Text()
    if rec.evidence is not None and not rec.evidence.adequate:
        out.append(t("tx_thin", lang), style="bold yellow")
    a = rec.action
    if a is not None:
        # English: the core's own sentence; another language: the reports' (report/verdict.py), the server line left out
        text, item = a.text, a.item
        if lang != "en":
            text, item = " ".join(verdict_lines(result, lang)[:-1]), tr(a.item, lang)
        verb, rest = text.split(" ", 1)
        head, _, tail = rest.partition(item)
        out.append(verb + " ", style="bold")
        out.append(head + item, style="bold green")
        out.append(tail)
    else:
        s = rec.server
        out.append(t("tx_get", lang) + " ", style="bold")
        out.append(t("server_of", lang, servers=rec.servers, platform=s.platform_name, gpus=rec.gpus_per_server,
                     gpu=rec.gpu_name).replace(" x ", " × "), style="bold green")
        out.append(f"; {_where(rec, lang)}." if lang == "en" else f" ; {_where(rec, lang)}.")
    if rec.time_hours is None and rec.request_latency_s is not None:
        out.append(t("tx_request", lang, s=numbers(lang).num(rec.request_latency_s, 1)))
    elif rec.time is not None and rec.time.wall_hours is None:
        out.append(t("tx_no_length", lang, time=time_in(rec, lang)))
    return out


def why_reasons(rec: Candidate) -> list[str]:
    """The candidate's own reasons, then the deployment's (which the first line already states when it names the
    action): the first WHY_MAX go in the summary."""
    dep = rec.deployment.reasons if rec.deployment is not None and rec.action is None else []
    picks = rec.reasons[:WHY_MAX - 1] + dep[:1]
    rest = [r for r in rec.reasons + dep if r not in picks]
    return picks + rest


def _server(rec: Candidate, lang: str = "en") -> Table:
    s = rec.server
    nf = numbers(lang)
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column()
    rack = f", {s.rack_units} U" if s.rack_units else ""
    label = t("if_you_buy" if rec.action is not None and rec.action.verb == "rent" else "tx_server", lang)
    g.add_row(label, t("tx_server_line", lang, servers=rec.servers, platform=s.platform_name, rack=rack,
                       price=french_number(price_text(rec)) if lang == "fr" else price_text(rec)))
    g.add_row("", t("tx_gpu_line", lang, gpus=rec.gpus_per_server, gpu=rec.gpu_name, gpu_id=rec.gpu_id,
                    layout=layout_text(rec, replicas=t("word_replicas", lang), batch=t("word_batch", lang))))
    g.add_row("", t("tx_spec", lang, sockets=s.cpu_sockets, cpu=s.cpu_model, cores=s.cpu_cores,
                    ram=t("tx_ram", lang, n=nf.num(s.ram_bytes / GIB)), tb=nf.num(s.storage_bytes / 1e12, 1),
                    drives=t("tx_drives" if s.drives > 1 else "tx_drive", lang, n=s.drives),
                    read=nf.num(s.storage_read_gb_s, 1), net=nf.num(s.network_gbit_s), kw=nf.num(s.power_w / 1000, 1),
                    btu=nf.num(s.cooling_btu_h), cooling=tr(s.cooling, lang)))
    return g


def _memory(console: Console, rec: Candidate, headroom: float, lang: str = "en") -> None:
    m, vram, plain = rec.memory, vram_bytes(rec), _plain(console)
    nf = numbers(lang)
    of = t("tx_of", lang, v=nf.num(vram / GIB, 1)) if vram else ""
    head = Text()
    head.append(t("tx_memory", lang), style="bold")
    head.append(t("tx_memory_line", lang, dev=nf.num(m.device_bytes / GIB, 1), of=of, phase=tr(m.peak_phase, lang),
                  dominant=tr(m.dominant, lang), grown=nf.num(rec.grown_device_bytes / GIB, 1)))
    console.print(head)
    console.print(memory_bar(rec, plain, width=max(20, min(BAR_WIDTH, console.width - 2)), headroom=headroom),
                  no_wrap=True, overflow="crop")
    for line in memory_legend(rec, plain, console.width, headroom, lang):
        console.print(line)


def summary_reason(item: ChecklistItem) -> str:
    """One reason per item for the summary: the first (the finding) when it passes, the last (where the checklist
    puts the warning or the failed check) otherwise."""
    if not item.reasons:
        return ""
    return item.reasons[0] if item.verdict == "pass" else item.reasons[-1]


def _mark(item: ChecklistItem) -> Text:
    mark, colour = MARK[item.verdict]
    return Text(mark, style=f"bold {colour}")


def _checklist(console: Console, result: PlanResult, details: bool, lang: str = "en") -> None:
    """One line per item in the summary (mark, item, verdict, one reason); every reason with `details`."""
    console.print(Text(t("h_checklist", lang) + ("" if details else t("tx_every_reason", lang)), style="bold"))

    def head(i: ChecklistItem) -> str:
        return f"{tr(i.item, lang)} ({i.verdict if lang == 'en' else t('v_' + i.verdict, lang)})"

    pad = max((len(head(i)) for i in result.checklist), default=0)
    for item in result.checklist:
        line = Text.assemble(" ", _mark(item), f" {head(item)}".ljust(pad + 3))
        if details:
            console.print(line)
            console.print(_hanging([("      ·", tr(r, lang)) for r in item.reasons]))
        else:
            line.append(tr(summary_reason(item), lang))
            line.truncate(console.width, overflow="ellipsis")
            console.print(line, no_wrap=True, overflow="ellipsis")


def _faq(console: Console, result: PlanResult, details: bool, lang: str = "en") -> None:
    if not result.faq:
        return
    console.print(Text(t("tx_questions", lang), style="bold"))
    for f in result.faq:
        line = Text("  ")
        line.append(tr(f.question, lang), style="bold")
        line.append(f" {tr(f.answer, lang)}.")
        if details:
            console.print(line)
            console.print(_hanging([("    ·", tr(r, lang)) for r in f.reasons]))
        else:
            console.print(line, no_wrap=True, overflow="ellipsis")


def _bullets(console: Console, title: str, lines: list[str], bullet: str = "·") -> None:
    if lines:
        console.print(Text(title, style="bold"))
        console.print(_hanging([(f"  {bullet}", line) for line in lines]))


def _rejected_lines(result: PlanResult, lang: str = "en") -> list[str]:
    lines = []
    for r in unchosen_gpus(result):
        shape = (" " + t("per_server", lang, n=r.gpus_per_server)
                 + (" " + t("x_servers", lang, n=r.servers) if r.servers > 1 else "") if r.gpus_per_server else "")
        lines.append(f"{r.gpu_id}{shape}{':' if lang == 'en' else ' :'} {tr(r.reason, lang)}")
    return lines


def render_text(result: PlanResult, console: Console, top: int = 8, details: bool = False, lang: str = "en") -> None:
    """The one-screen summary; with `details`, then every reason: the server's rules, the full checklist and FAQ,
    and every GPU not chosen with why. `lang`: the report language (report/i18n.py; the core's lines through
    report/translate.py)."""
    rec = result.recommendation
    console.print(Rule(Text(t("tx_rule", lang, project=result.project,
                              objective=t(f"objective_{result.objective}", lang) if lang != "en" else result.objective),
                            style="bold"), align="left"))
    if result.have is not None:  # the server the team has comes first; then what to get instead
        from gpuplan.report.have import render_have_text

        render_have_text(result.have, console, result.currency, details)
        console.print(Rule(Text(t("tx_instead", lang), style="bold"), align="left"))
    if rec is not None:
        console.print(_verdict(result, rec, lang))
        # the stack (reason "stack: ...", candidate.stack) goes to the first lines (issue #30); until then the summary
        # keeps to one screen and shows it with --details
        why = [r for r in why_reasons(rec) if details or not r.startswith("stack: ")]
        console.print(_hanging([("  ·", tr(r, lang)) for r in (why if details else why[:WHY_MAX])]
                               + [(Text("  !", style="bold yellow"), Text(tr(w, lang), style="yellow"))
                                  for w in rec.server.warnings]))
        console.print(_server(rec, lang))
        _memory(console, rec, result.headroom, lang)
    else:
        console.print(Text(t("tx_no_recommendation", lang), style="bold red"))
    if result.candidates:
        console.print(candidates_table(result, top, console.width, lang))
    if rec is not None:
        if rec.deployments:
            console.print(deployments_table(rec, console.width, lang))
        else:
            console.print(t("tx_no_deployments", lang))
    if result.checklist:
        _checklist(console, result, details, lang)
    _faq(console, result, details, lang)
    for n in result.notes:
        if n.code == "framework-default" and not details:  # the plan's default stack: with --details, as above
            continue
        console.print(Text(f"· {tr(n.message, lang)}"))
    rejected = _rejected_lines(result, lang)
    if details:
        if rec is not None:
            _bullets(console, t("tx_rules", lang), [tr(r, lang) for r in rec.server.reasons])
        _bullets(console, t("h_rejected", lang), rejected, bullet="✗")
    st = result.stats
    nf = numbers(lang)
    foot = (t("tx_foot", lang, n=nf.num(st.candidates_evaluated), gpus=st.gpu_types, s=nf.num(st.search_seconds, 2))
            + (t("tx_foot_rejected", lang, n=len(rejected)) if rejected else ""))
    if not details:
        foot += t("tx_foot_details", lang)
    console.print(Text(foot, style="dim"))
