"""The terminal's two tables (report/terminal.py): the alternatives, ranked by the cost they show, and the chosen
candidate's deployment costs, in the report language (report/i18n.py; the core's words through report/translate.py)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from gpuplan.core.layout_text import compact_layout_text
from gpuplan.report.common import (
    MONEY_COLUMNS,
    is_chosen,
    money_cells,
    ranked_cost,
    ranked_cost_caption,
    ranked_cost_text,
    time_text,
)
from gpuplan.report.i18n import t
from gpuplan.report.numbers import numbers
from gpuplan.report.translate import french_number, tr
from gpuplan.report.verdict import time_in
from gpuplan.schema.plan import Candidate, Deployment, PlanResult
from gpuplan.units import GIB

#: below this many columns the tables leave out what the verdict and --details already say (the alternatives' score,
#: the deployments' resale and break-even), so that a layout or a provider is never wrapped a letter a line
WIDE = 100


def candidates_table(result: PlanResult, top: int, width: int = WIDE, lang: str = "en") -> Table:
    """The alternatives; at full width without the score when the layouts need its room (a tensor and pipeline
    parallel layout is wider than the column leaves), so that no layout wraps."""
    table = _candidates_table(result, top, width, score=width >= WIDE, lang=lang)
    if width >= WIDE and Console(width=4 * width).measure(table).maximum > width:  # its natural width
        table = _candidates_table(result, top, width, score=False, lang=lang)
    return table


def _ranked_cost(c: Candidate, lang: str) -> str:
    """The cost the ranking compared and its basis ("21 rent", "53,181 buy"), in the language's words."""
    r = ranked_cost(c)
    if lang == "en" or r is None:
        return ranked_cost_text(c)
    return f"{numbers(lang).num(r[0])} {t(f'tx_basis_{r[1]}', lang)}"


def _ranked_caption(result: PlanResult, lang: str) -> str:
    if lang == "en":
        return ranked_cost_caption(result)
    return t("tx_ranked", lang) + (t("tx_ranked_cost", lang) if result.objective == "cost" else "")


def _candidates_table(result: PlanResult, top: int, width: int, score: bool, lang: str = "en") -> Table:
    shown = result.candidates[:top]
    kept = max(result.stats.candidates_kept, len(result.candidates))
    thin = any(c.evidence is not None and not c.evidence.adequate for c in shown)
    nf = numbers(lang)
    key = "tx_alternatives_one" if len(shown) == 1 else "tx_alternatives"
    table = Table(title=t(key, lang, shown=len(shown), kept=kept, thin=t("tx_thin_mark", lang) if thin else ""),
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    wide = width >= WIDE
    mem_col = t("col_mem" if wide else "tx_col_gib", lang)
    cost_col = t("tx_col_cost", lang, currency=result.currency) if wide else result.currency
    cols = ("", t("col_gpu", lang), t("tx_col_gpus", lang), t("col_layout", lang), mem_col, t("col_time", lang),
            cost_col) + ((t("col_score", lang),) if score else ())
    for i, col in enumerate(cols):  # the layout alone may wrap, never a number
        table.add_column(col, justify="right" if i >= 4 else "left", no_wrap=i != 3, min_width=2 if not col else None,
                         overflow="fold" if i == 3 else "ellipsis")
    for c in shown:
        mark = (("→" if c == result.recommendation else " ") + ("*" if c.pareto else " ")
                + ("?" if c.evidence is not None and not c.evidence.adequate else " "))
        layout = compact_layout_text(c.layout)  # narrow: parts spaced, so that a line breaks between them
        table.add_row(mark, c.gpu_id, f"{c.gpus_per_server} × {c.servers}",
                      layout if wide else layout.replace("·", " "), nf.num(c.memory.device_bytes / GIB, 1),
                      time_text(c) if lang == "en" else time_in(c, lang), _ranked_cost(c, lang),
                      *((nf.sig(c.score),) if score else ()))
    table.caption = _ranked_caption(result, lang)
    table.caption_justify = "left"
    return table


def _breakeven(d: Deployment, lang: str = "en") -> str:
    """From when `d` is cheaper than each other option, grouped: "now: on-prem, managed; never: cloud"."""
    when: dict[str, list[str]] = {}
    nf = numbers(lang)
    for k, v in d.breakeven_months_vs.items():
        w = t("be_never", lang) if v is None else t("be_now", lang) if v == 0 else t("be_month", lang, m=nf.num(v, 1))
        when.setdefault(w, []).append(tr(k, lang))
    sep, colon = ("; ", ": ") if lang == "en" else (" ; ", " : ")
    return sep.join(f"{w}{colon}{', '.join(opts)}" for w, opts in when.items()) or "-"


def deployments_table(rec: Candidate, width: int = WIDE, lang: str = "en") -> Table:
    wide = width >= WIDE
    table = Table(title=t("tx_deployments" if wide else "tx_deployments_narrow", lang),
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    money = [i for i in range(4) if wide or MONEY_COLUMNS[i] != "resale"]
    heads = [t(k, lang) for k in ("col_upfront", "col_monthly", "col_resale", "col_total")]
    for i, col in enumerate((t("col_option", lang), t("col_provider", lang), *(heads[m] for m in money),
                             *((t("tx_col_cheaper", lang),) if wide else ()))):
        table.add_column(col, justify="right" if 2 <= i < 2 + len(money) else "left",
                         no_wrap=i != 1 and not (wide and i == 2 + len(money)))
    for d in rec.deployments:
        cells = [french_number(x) for x in money_cells(d)] if lang == "fr" else list(money_cells(d))
        table.add_row(("→ " if is_chosen(rec, d) else "  ") + tr(d.option, lang), tr(_provider(d), lang),
                      *(cells[m] for m in money), *((_breakeven(d, lang),) if wide else ()))
    gaps = rec.deployment.gaps if rec.deployment is not None else []
    if gaps:  # the options asked for that no price covers, under the table (a row would wrap a word a line)
        table.caption, table.caption_justify = ("; " if lang == "en" else " ; ").join(tr(g, lang) for g in gaps), "left"
    return table


def _provider(d: Deployment) -> str:
    """Who provides it, short: "cloud on-demand" -> "on-demand" (the option says cloud)."""
    return d.provider.removeprefix("cloud ") if d.option == "cloud" else d.provider


__all__ = ["WIDE", "candidates_table", "deployments_table"]
