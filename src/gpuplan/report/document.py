"""Render a PlanResult as a Markdown or a self-contained HTML report (with four inline SVG figures).
Pure: a result in, a string out; nothing time-dependent, so the output is stable for snapshot tests. Every number
goes through the report language's formatter (report/numbers.py)."""

from __future__ import annotations

import html

from gpuplan.report import figures
from gpuplan.report.common import chosen_deployment, is_chosen, ranked_cost, unchosen_gpus
from gpuplan.report.have import OPTION_HEAD, WAY_HEAD, have_lines, option_rows, way_rows
from gpuplan.report.i18n import check_lang, t
from gpuplan.report.numbers import Numbers, numbers
from gpuplan.report.translate import tr, tr_all
from gpuplan.report.verdict import amount_in, gib_in, layout_in, price_in, server_head, time_in, verdict_lines
from gpuplan.schema.plan import Candidate, Deployment, GrowthRow, PlanResult
from gpuplan.units import GIB

MARK = {"pass": "✓", "warn": "!", "fail": "✗", "not evaluated": "–"}
MAX_REJECTED = 12


# ---------------------------------------------------------------- shared pieces

def _colon(lang: str) -> str:
    """A colon as the language writes it: French puts a space before it."""
    return " :" if lang == "fr" else ":"


def _spec(c: Candidate, lang: str) -> str:
    s = c.server
    nf = numbers(lang)
    txt = t("spec", lang, cpu_sockets=s.cpu_sockets, cpu=s.cpu_model, cores=s.cpu_cores,
            ram=nf.num(s.ram_bytes / GIB), drives=s.drives, storage=nf.num(s.storage_bytes / 1e12, 1),
            read=nf.num(s.storage_read_gb_s, 1), net=nf.num(s.network_gbit_s), power=nf.num(s.power_w / 1000, 1),
            btu=nf.num(s.cooling_btu_h), cooling=s.cooling)
    if s.rack_units:
        txt += ", " + t("rack_units", lang, u=s.rack_units)
    return txt


def _candidate_rows(result: PlanResult, lang: str) -> list[list[str]]:
    nf = numbers(lang)
    return [["*" if c.pareto else "", c.gpu_id, f"{c.gpus_per_server} x {c.servers}", layout_in(c, lang),
             gib_in(c.memory.device_bytes, nf), time_in(c, lang), price_in(c, nf), _ranked_in(c, lang),
             nf.sig(c.score)]
            for c in result.candidates]


def _ranked_in(c: Candidate, lang: str) -> str:
    """The cost the ranking compared: the total of the way the candidate is got over the horizon, and its basis."""
    r = ranked_cost(c)
    return "-" if r is None else f"{amount_in(r[0], c.currency, numbers(lang))} {t(f'tx_basis_{r[1]}', lang)}"


def _breakeven(d: Deployment, lang: str) -> str:
    parts = []
    for other, v in d.breakeven_months_vs.items():
        when = (t("be_never", lang) if v is None else t("be_now", lang) if v == 0
                else t("be_month", lang, m=numbers(lang).num(v, 1)))
        parts.append(t("be_vs", lang, other=tr(other, lang), when=when))
    return ", ".join(parts)


def _deployment_rows(c: Candidate, lang: str) -> list[list[str]]:
    nf = numbers(lang)
    return [[(t("chosen", lang) + _colon(lang) + " " if is_chosen(c, d) else "") + tr(d.option, lang),
             tr(d.provider, lang), nf.num(d.upfront_cost), nf.num(d.running_monthly),
             ("-" + nf.num(d.residual_value)) if d.residual_value else "0",
             nf.money(d.total_cost, d.currency), _breakeven(d, lang)]
            for d in c.deployments]


def _rejected_lines(result: PlanResult, lang: str) -> list[str]:
    """GPUs with no candidate, each with the reason of its largest shape tried (report/common.py)."""
    lines = []
    for r in unchosen_gpus(result):
        shape = ""
        if r.gpus_per_server:
            shape = " " + t("per_server", lang, n=r.gpus_per_server)
            if r.servers > 1:
                shape += " " + t("x_servers", lang, n=r.servers)
        lines.append(f"✗ {r.gpu_id}{shape}{_colon(lang)} {tr(r.reason, lang)}")
    if len(lines) > MAX_REJECTED:
        lines = lines[:MAX_REJECTED] + [t("more_rejected", lang, n=len(lines) - MAX_REJECTED)]
    return lines


def _sources(result: PlanResult, lang: str) -> list[str]:
    nf = numbers(lang)
    out = [t("sources", lang, headroom=nf.pct(result.headroom))]
    out.append(t("stats", lang, n=nf.num(result.stats.candidates_evaluated), gpus=result.stats.gpu_types))
    return out


def _factor(x: float, nf: Numbers) -> str:
    """A size factor: "1.5", "2"."""
    return nf.num(x, 1 if x % 1 else 0)


def _caption_key(result: PlanResult) -> str:
    """The candidates' caption: French says "la meilleure" for one."""
    return "candidates_caption_one" if len(result.candidates) == 1 else "candidates_caption"


def _growth_sizes(result: PlanResult) -> list[GrowthRow]:
    """The model sizes of the growth view (the first candidate's rows: every candidate has the same sizes)."""
    first = result.growth_view[0]
    return [r for r in result.growth_view
            if (r.gpu_id, r.gpus_per_server, r.servers) == (first.gpu_id, first.gpus_per_server, first.servers)]


def _growth_head(result: PlanResult, lang: str) -> list[str]:
    nf = numbers(lang)
    return [t("col_candidate", lang)] + [
        t("g_col_planned" if r.factor == 1 else "g_col", lang, f=_factor(r.factor, nf),
          scale=_factor(r.model_scale, nf), params=nf.num(r.parameters / 1e9, 1)) for r in _growth_sizes(result)]


def _growth_cell(r: GrowthRow, lang: str) -> str:
    mem = gib_in(r.device_bytes, numbers(lang))
    if r.fits:
        return t("g_fits", lang, mem=mem)
    if r.min_gpus is None:
        return t("g_no_shape", lang, mem=mem)
    return t("g_needs", lang, mem=mem, gpus=t("one_gpu" if r.min_gpus == 1 else "n_gpus", lang, n=r.min_gpus))


def _growth_rows(result: PlanResult, lang: str) -> list[list[str]]:
    """One row per shown candidate: its label, then each model size's peak per GPU and whether it fits."""
    rows: dict[tuple[str, int, int], list[str]] = {}
    for r in result.growth_view:
        key = (r.gpu_id, r.gpus_per_server, r.servers)
        rows.setdefault(key, [f"{r.gpu_id} {r.gpus_per_server} x {r.servers}"]).append(_growth_cell(r, lang))
    return list(rows.values())


def _growth_caption(result: PlanResult, lang: str) -> str:
    nf = numbers(lang)
    return t("growth_caption", lang, scale=_factor(result.growth_view[0].model_scale, nf),
             headroom=nf.pct(result.headroom))


# ---------------------------------------------------------------- Markdown

def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out


def _candidate_head(lang: str) -> list[str]:
    return ["", *(t(k, lang) for k in ("col_gpu", "col_shape", "col_layout", "col_mem", "col_time", "col_price",
                                       "col_ranked", "col_score"))]


def _deployment_head(lang: str) -> list[str]:
    return [t(k, lang) for k in ("col_option", "col_provider", "col_upfront", "col_monthly", "col_resale",
                                 "col_total", "col_breakeven")]


def render_markdown(result: PlanResult, lang: str = "en") -> str:
    """The plan as a Markdown report: verdict, server, candidates, checklist, deployments, FAQ, rejected GPUs,
    notes and the assumptions and sources."""
    check_lang(lang)
    rec = result.recommendation
    out = [f"# {t('title', lang, project=result.project)}", ""]
    if result.as_of is not None:
        out += [t("made_for", lang, date=result.as_of.isoformat()), ""]
    if result.have is not None:  # the server the team has comes first (plan --have); its texts are English
        h = result.have
        out += ["## The server you have", "", have_lines(h)[0], "", f"**{have_lines(h)[1]}**", ""]
        out += (_md_table(WAY_HEAD, way_rows(h)) + [""] if h.ways else [])
        out += _md_table(OPTION_HEAD, option_rows(h, result.currency)) + [""]
    out += [f"## {t('h_verdict', lang)}", "", " ".join(verdict_lines(result, lang)), ""]
    if rec is not None:
        out += [f"## {t(server_head(rec), lang)}", "",
                f"{rec.servers} x {rec.server.platform_name}{_colon(lang)} {_spec(rec, lang)}", ""]
        out += [f"- {r}" for r in tr_all(rec.server.reasons + rec.reasons, lang)]
        out += [f"- **{t('warning', lang)}**{_colon(lang)} {w}" for w in tr_all(rec.server.warnings, lang)]
        out.append("")
    out += [f"## {t('h_candidates', lang)}", "",
            t(_caption_key(result), lang, shown=len(result.candidates),
              total=numbers(lang).num(result.stats.candidates_evaluated)), ""]
    out += _md_table(_candidate_head(lang), _candidate_rows(result, lang)) + [""]
    if result.growth_view:
        out += [f"## {t('h_growth', lang)}", "", _growth_caption(result, lang), ""]
        out += _md_table(_growth_head(result, lang), _growth_rows(result, lang)) + [""]
    out += [f"## {t('h_checklist', lang)}", ""]
    out += _md_table([t("col_item", lang), t("col_verdict", lang), t("col_why", lang)],
                     [[tr(item.item, lang), f"{MARK[item.verdict]} {t('v_' + item.verdict, lang)}",
                       "\n".join(tr_all(item.reasons, lang))]
                      for item in result.checklist]) + [""]
    if rec is not None:
        out += [f"## {t('h_deployments', lang)}", ""]
        if rec.deployments:
            out += _md_table(_deployment_head(lang), _deployment_rows(rec, lang)) + [""]
            if rec.deployment is not None:
                out += [f"- {r}" for r in tr_all(rec.deployment.reasons, lang)] + [""]
            chosen = chosen_deployment(rec)
            if chosen is not None and chosen.assumptions:
                out += [f"{t('deploy_assumptions', lang)}{_colon(lang)}", ""]
                out += [f"- {a}" for a in tr_all(chosen.assumptions, lang)] + [""]
        else:
            out += [t("no_deployments", lang), ""]
    if result.faq:
        out += [f"## {t('h_faq', lang)}", ""]
        for f in result.faq:
            out += [f"**{tr(f.question, lang)}** {tr(f.answer, lang)}.", ""]
            out += [f"- {r}" for r in tr_all(f.reasons, lang)]
            out.append("")
    rej = _rejected_lines(result, lang)
    if rej:
        out += [f"## {t('h_rejected', lang)}", ""] + [f"- {line}" for line in rej] + [""]
    if result.notes:
        out += [f"## {t('h_notes', lang)}", ""] + [f"- {tr(n.message, lang)}" for n in result.notes] + [""]
    out += [f"## {t('h_sources', lang)}", ""]
    for para in _sources(result, lang):
        out += [para, ""]
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------- HTML

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; border-bottom: 1px solid #ccc; padding-bottom: .2rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; white-space: nowrap; }
.verdict { font-size: 1.05rem; background: #eef5ff; border-left: 4px solid #2b6cb0; padding: .6rem .8rem; }
.pass { color: #1f7a1f; } .warn { color: #a86400; } .fail { color: #b00020; } .not-evaluated { color: #777; }
.warning { color: #a86400; }
figure { margin: 1rem 0 1.5rem; page-break-inside: avoid; break-inside: avoid; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .85rem; color: #444; }
ul { padding-left: 1.3rem; }
footer { font-size: .85rem; color: #444; border-top: 1px solid #ccc; margin-top: 2rem; }
@media print {
  body { max-width: none; margin: 0; font-size: 10pt; }
  h2 { page-break-after: avoid; break-after: avoid; }
  table, figure, tr { page-break-inside: avoid; break-inside: avoid; }
  .verdict { background: none; }
}
""".strip()


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(head: list[str], rows: list[list[str]], num: set[int] = frozenset(),  # type: ignore[assignment]
                raw: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            body = cell if i in raw else _e(cell).replace("\n", "<br>")
            cells.append(f'<td class="num">{body}</td>' if i in num else f"<td>{body}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return out + ["</tbody>", "</table>"]


def _ul(items: list[str], cls: str = "") -> list[str]:
    if not items:
        return []
    attr = f' class="{cls}"' if cls else ""
    return [f"<ul{attr}>"] + [f"<li>{_e(i)}</li>" for i in items] + ["</ul>"]


def _figure(svg: str, title: str, caption: str) -> list[str]:
    return ["<figure>", svg, f"<figcaption><strong>{_e(title)}.</strong> {_e(caption)}</figcaption>", "</figure>"]


def _figures(result: PlanResult, lang: str) -> list[str]:
    """The report's figures with their captions: memory, time against cost, cumulative cost, growth, and for a
    serving plan latency against load (issue #29)."""
    out = [f"<h2>{_e(t('h_figures', lang))}</h2>"]
    svg, _ = figures.svg(lambda fig: figures.draw_memory(result, lang, fig))
    headroom = numbers(lang).pct(result.headroom)
    out += _figure(svg, t("fig_memory", lang), t("fig_memory_caption", lang, headroom=headroom))
    svg, skipped = figures.svg(lambda fig: figures.draw_pareto(result, lang, fig))
    cap = t("fig_pareto_caption", lang) + (" " + t("fig_pareto_skipped", lang, n=skipped) if skipped else "")
    out += _figure(svg, t("fig_pareto", lang), cap)
    svg, _ = figures.svg(lambda fig: figures.draw_tco(result, lang, fig))
    out += _figure(svg, t("fig_tco", lang), t("fig_tco_caption", lang))
    svg, _ = figures.svg(lambda fig: figures.draw_growth(result, lang, fig))
    scale = _factor(result.growth_view[0].model_scale, numbers(lang)) if result.growth_view else "1"
    out += _figure(svg, t("fig_growth", lang), t("fig_growth_caption", lang, scale=scale, headroom=headroom))
    rec = result.recommendation
    curve = rec.latency_curve if rec is not None else None
    if curve is not None and curve.points:
        svg, _ = figures.svg(lambda fig: figures.draw_latency(result, lang, fig))
        pct = curve.objectives.percentile if curve.objectives is not None else 90
        out += _figure(svg, t("fig_latency", lang), t("fig_latency_caption", lang, replicas=curve.replicas, pct=pct,
                                                        arrival=t(f"arrival_{curve.arrival}", lang)))
    return out


def render_html(result: PlanResult, lang: str = "en") -> str:
    """The plan as one self-contained HTML5 page (inline CSS, inline SVG figures, no script, no external
    resource) with the content of the Markdown report and four figures, each captioned with its assumptions
    and sources."""
    check_lang(lang)
    rec = result.recommendation
    title = t("title", lang, project=result.project)
    out = ["<!DOCTYPE html>", f'<html lang="{lang}">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{_e(title)}</title>",
           f"<style>\n{CSS}\n</style>", "</head>", "<body>", f"<h1>{_e(title)}</h1>"]
    if result.as_of is not None:
        out.append(f"<p>{_e(t('made_for', lang, date=result.as_of.isoformat()))}</p>")
    if result.have is not None:
        h = result.have
        out += ["<h2>The server you have</h2>", f"<p>{_e(have_lines(h)[0])}</p>",
                f'<p class="verdict">{_e(have_lines(h)[1])}</p>']
        out += _html_table(WAY_HEAD, way_rows(h)) if h.ways else []
        out += _html_table(OPTION_HEAD, option_rows(h, result.currency), num={3, 4})
    out += [f"<h2>{_e(t('h_verdict', lang))}</h2>",
            f'<p class="verdict">{_e(" ".join(verdict_lines(result, lang)))}</p>']
    if rec is not None:
        out += [f"<h2>{_e(t(server_head(rec), lang))}</h2>",
                f"<p>{_e(f'{rec.servers} x {rec.server.platform_name}{_colon(lang)} {_spec(rec, lang)}')}</p>"]
        out += _ul(tr_all(rec.server.reasons + rec.reasons, lang))
        out += _ul([f"{t('warning', lang)}{_colon(lang)} {w}" for w in tr_all(rec.server.warnings, lang)], "warning")
    out += [f"<h2>{_e(t('h_candidates', lang))}</h2>",
            "<p>" + _e(t(_caption_key(result), lang, shown=len(result.candidates),
                         total=numbers(lang).num(result.stats.candidates_evaluated))) + "</p>"]
    out += _html_table(_candidate_head(lang), _candidate_rows(result, lang), num={4, 5, 6, 7, 8})
    if result.growth_view:
        out += [f"<h2>{_e(t('h_growth', lang))}</h2>", f"<p>{_e(_growth_caption(result, lang))}</p>"]
        out += _html_table(_growth_head(result, lang), _growth_rows(result, lang))
    out += [f"<h2>{_e(t('h_checklist', lang))}</h2>"]
    out += _html_table([t("col_item", lang), t("col_verdict", lang), t("col_why", lang)],
                       [[_e(tr(item.item, lang)),
                         f'<span class="{item.verdict.replace(" ", "-")}">{MARK[item.verdict]} '
                         f"{_e(t('v_' + item.verdict, lang))}</span>",
                         "<br>".join(_e(r) for r in tr_all(item.reasons, lang))] for item in result.checklist],
                       raw={0, 1, 2})
    if rec is not None:
        out += [f"<h2>{_e(t('h_deployments', lang))}</h2>"]
        if rec.deployments:
            out += _html_table(_deployment_head(lang), _deployment_rows(rec, lang), num={2, 3, 4, 5})
            if rec.deployment is not None:
                out += _ul(tr_all(rec.deployment.reasons, lang))
            chosen = chosen_deployment(rec)
            if chosen is not None and chosen.assumptions:
                out += [f"<p>{_e(t('deploy_assumptions', lang) + _colon(lang))}</p>"]
                out += _ul(tr_all(chosen.assumptions, lang))
        else:
            out += [f"<p>{_e(t('no_deployments', lang))}</p>"]

    out += _figures(result, lang)

    if result.faq:
        out += [f"<h2>{_e(t('h_faq', lang))}</h2>"]
        for f in result.faq:
            out += [f"<p><strong>{_e(tr(f.question, lang))}</strong> {_e(tr(f.answer, lang))}.</p>"]
            out += _ul(tr_all(f.reasons, lang))
    rej = _rejected_lines(result, lang)
    if rej:
        out += [f"<h2>{_e(t('h_rejected', lang))}</h2>"] + _ul(rej)
    if result.notes:
        out += [f"<h2>{_e(t('h_notes', lang))}</h2>"] + _ul([tr(n.message, lang) for n in result.notes])
    out += ["<footer>", f"<h2>{_e(t('h_sources', lang))}</h2>"] + [f"<p>{_e(p)}</p>" for p in _sources(result, lang)]
    out += ["</footer>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


__all__ = ["render_html", "render_markdown"]
