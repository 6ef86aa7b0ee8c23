"""Snapshot tests of the Markdown and HTML reports (report/document.py) for the built-in examples.

Regenerate the snapshots after an intended change:
GPUPLAN_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_reports.py
The HTML snapshots hold the page with each SVG figure replaced by a placeholder, so that plot details (tick
positions, path data) do not break them; the figures are checked structurally instead."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from gpuplan import api
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.errors import InputError
from gpuplan.report.document import render_html, render_markdown
from gpuplan.report.i18n import STRINGS, t
from gpuplan.schema.plan import PlanResult
from gpuplan.units import GIB

SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"
UPDATE = os.environ.get("GPUPLAN_UPDATE_SNAPSHOTS") == "1"
NAMES = example_names()
FR_EXAMPLE = "llama3-70b-serving"
SVG = re.compile(r"<svg\b.*?</svg>", re.S)


@functools.cache
def _plan(name: str) -> PlanResult:
    return api.plan(example_path(name), top=5)


@functools.cache
def _html(name: str, lang: str = "en") -> str:
    return render_html(_plan(name), lang)


def _strip_svg(page: str) -> str:
    return SVG.sub("<svg><!-- figure --></svg>", page)


def _check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"snapshot {path} is missing: create it with "
                    "GPUPLAN_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_reports.py")
    want = path.read_text(encoding="utf-8")
    assert text == want, (f"report differs from {path}; if the change is intended, regenerate with "
                          "GPUPLAN_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_reports.py")


CASES = [(n, "en") for n in NAMES] + [(FR_EXAMPLE, "fr")]


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_markdown_snapshot(name: str, lang: str) -> None:
    _check_snapshot(f"{name}.{lang}.md", render_markdown(_plan(name), lang))


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_html_snapshot(name: str, lang: str) -> None:
    _check_snapshot(f"{name}.{lang}.html", _strip_svg(_html(name, lang)))


@pytest.mark.parametrize(("name", "lang"), CASES)
def test_html_is_self_contained(name: str, lang: str) -> None:
    page = _html(name, lang)
    assert page.startswith("<!DOCTYPE html>")
    figures = 5 if _plan(name).recommendation.latency_curve is not None else 4  # a serving plan: latency (#29)
    assert page.count("<svg") == figures
    assert page.count("<figcaption>") == figures
    assert "@media print" in page
    assert "<script" not in page.lower()
    external = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert external == []
    assert "url(http" not in page and "@import" not in page
    assert _plan(name).recommendation.gpu_id in SVG.sub("", page)
    assert len(page.encode()) < 1_500_000


def test_a_serving_report_draws_latency_against_load_with_its_objective() -> None:
    """Issue #29: the serving example's HTML report has the latency-against-load figure: the three latencies
    against the arrival rate, its end-to-end objective (30 s at p90) drawn across, the planned load marked."""
    res = _plan("llama3-70b-serving")
    page = render_html(res)
    fig = page.split(f"<strong>{t('fig_latency')}.</strong>")[0].rsplit("<figure>", 1)[1]
    for key in ("p_ttft", "p_itl", "p_e2e", "l_planned_load", "l_capacity", "ax_rate"):
        assert t(key) in fig
    assert t("l_objective", pct=90) in fig
    assert t("fig_latency", "fr") in render_html(res, "fr")
    training = render_html(_plan("llama3-8b-qlora"))
    assert t("fig_latency") not in training


def test_html_is_deterministic() -> None:
    res = _plan(NAMES[0])
    assert render_html(res) == _html(NAMES[0])


def test_markdown_has_the_sections() -> None:
    res = _plan("llama3-70b-serving")
    md = render_markdown(res)
    for key in ("h_verdict", "h_server", "h_candidates", "h_checklist", "h_deployments", "h_sources"):
        assert f"## {t(key)}" in md
    assert res.recommendation.gpu_id in md
    assert re.search(r"\| [✓!✗–] ", md)


HEADINGS = [k for k in STRINGS if k.startswith("h_")]


def test_french_headings() -> None:
    res = _plan(FR_EXAMPLE)
    for text in (render_markdown(res, "fr"), _strip_svg(_html(FR_EXAMPLE, "fr"))):
        assert "Serveur recommandé" in text and "Hypothèses et sources" in text
        assert "les raisons détaillées sont en anglais" not in text.lower()  # they are French now
        for key in HEADINGS:
            en, fr = STRINGS[key]
            if en != fr:
                assert en not in text, f"English heading {en!r} in the French report"
    assert '<html lang="fr">' in _html(FR_EXAMPLE, "fr")


def test_french_numbers() -> None:
    """Numbers the report writes follow French rules in French (report/numbers.py), the core's lines' too."""
    res = _plan(FR_EXAMPLE)
    rec = res.recommendation
    md = render_markdown(res, "fr")
    verdict = md.split("## ", 2)[1]
    gib = f"{rec.memory.device_bytes / GIB:,.1f}".replace(".", ",")
    assert f"{gib} Gio par GPU" in verdict
    # the price in the plan's currency, the budget's (issue #13: one currency)
    price = rec.price_usd * res.usd_rate
    assert res.currency == "EUR"
    assert f"prix {price:,.0f}\u00a0€".replace(",", "\u202f") in verdict
    d = rec.deployment
    assert f"{d.total_cost:,.0f}".replace(",", "\u202f") + f"\u00a0€ sur {rec.action.horizon_months} mois" in verdict
    assert "$" not in verdict and "EUR" not in verdict
    # the English report keeps Python's grouping
    assert f"price {price:,.0f} EUR" in render_markdown(res, "en")


def test_growth_view_and_headroom_in_the_reports() -> None:
    """The growth table has one row per shown candidate and a column per model size; the captions and the footer
    state the headroom the plan used (--headroom 0.25 here)."""
    res = api.plan(example_path("llama3-70b-serving"), top=3, headroom=0.25)
    assert res.headroom == 0.25
    md = render_markdown(res)
    section = md.split(f"## {t('h_growth')}", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(res.candidates)
    assert table[0].count("|") == 5 and "×1.5" in table[0] and "×2" in table[0]
    assert "less the 25% headroom" in section and "keeps 25% of it free" in md
    page = render_html(res)
    assert "less the 25% headroom the plan keeps free" in page and "dashed: VRAM less the 25% headroom" in page
    assert "usable VRAM" in page  # the legend of the memory and growth figures
    fr = render_markdown(res, "fr")
    assert "la marge de 25\u202f%" in fr and f"## {t('h_growth', 'fr')}" in fr


def test_every_string_has_both_languages() -> None:
    for key, (en, fr) in STRINGS.items():
        assert fr and en, key


def test_unknown_language() -> None:
    res = _plan(NAMES[0])
    with pytest.raises(InputError) as err:
        render_markdown(res, "de")
    assert err.value.loc == ("--lang",) and "en, fr" in str(err.value)
    with pytest.raises(InputError):
        render_html(res, "de")
