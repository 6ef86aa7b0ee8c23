"""French output is complete (issue #27): no line of a `--lang fr` report of the built-in examples is left in English.

The detector (report/translate.py `english_words`) looks for English words outside what legitimately stays as
written: the source citations and names the data files give (their `source`, `kind`, `name`, ... values), ids, file
names, URLs and code. It is tested on English and French lines of its own, so that it can fail."""

from __future__ import annotations

import html
import io
import re
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from gpuplan import api
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.errors import CatalogError
from gpuplan.report.document import render_html, render_markdown
from gpuplan.report.numbers import numbers
from gpuplan.report.terminal import render_text
from gpuplan.report.translate import _rows, data_citations, english_words, french_number, memory, tr
from gpuplan.schema.plan import PlanResult
from tests.golden.test_users_load import CHAT, RAG

EXAMPLES = ["llama2-7b-pretrain", "llama3-70b-lora", "llama3-70b-serving", "llama3-8b-full-finetune", "qwen2.5-7b-grpo",
            "llama3-8b-qlora", "vit-imagenet", "llama3-8b-dpo"]


@cache
def _plan(name: str) -> PlanResult:
    return api.plan(example_path(name))


def _english_lines(lines: list[str]) -> list[str]:
    cites = data_citations()
    return [f"{line!r}: {english_words(line, cites)}" for line in lines if english_words(line, cites)]


# ---------------------------------------------------------------- the detector itself

@pytest.mark.parametrize("line", [
    "cheapest per run: 1,030 EUR",
    "the project plans no growth (growth.*): nothing is reserved for it",
    "Power 13,847 W: (8 x 1000 W GPUs + 2 x 350 W CPUs) x 1.47 (rule chassis_overhead_fraction)",
    "Dedicated server or cloud?",
    "network 4,800 Gb/s",
    "Plateforme NVIDIA DGX B200 : la seule plateforme qui les accepte; passed over: dell-poweredge-xe9680",
])
def test_detector_finds_english(line: str) -> None:
    assert english_words(line, data_citations()), line


@pytest.mark.parametrize("line", [
    "le moins cher par exécution : 1 030 €",
    "le projet ne prévoit pas de croissance (growth.*) : rien n'est réservé pour elle",
    "NVMe 30,7 To à 56,0 Go/s en lecture",
    "Serveur dédié ou cloud ?",
    "infogéré : aucun prix pour h100-nvl-94gb dans les listes de prix (ajoutez-en une avec --prices)",
    "la comparaison des déploiements (`gpuplan cost`) chiffre les deux",
    "voir https://example.org/the-price-of-a-server",
])
def test_detector_passes_french(line: str) -> None:
    assert english_words(line, data_citations()) == [], line


def test_detector_keeps_only_what_is_marked_as_cited() -> None:
    """A citation is taken out only when it is given: the same English text, not cited, is English."""
    cite = "Amazon EBS gp3 $0.08 per GB-month: AWS Pricing API list rate"
    line = f"stockage 0,4 To x 80 $US/To-mois ({cite})"
    assert english_words(line, [cite]) == []
    assert english_words(line, []) == ["per", "month"]


# ---------------------------------------------------------------- the translation memory

def test_fields_by_kind() -> None:
    assert tr("cheapest per run: 1,030 EUR", "fr") == "le moins cher par exécution : 1\u202f030\u00a0€"
    assert tr("budget $2,000,000 in total", "fr") == "budget 2\u202f000\u202f000\u00a0$US au total"
    # a {name:t} field is itself translated; a plain one ("{list}": provider names) is copied
    assert tr("Akash Network, Hyperstack (B200) and 6 more", "fr") == "Akash Network, Hyperstack (B200) et 6 autres"
    assert tr("cloud (cloud on-demand)", "fr") == "cloud (cloud à la demande)"
    # a line no row matches stays as it is (and the detector names it); English is never touched
    assert tr("a line nobody wrote", "fr") == "a line nobody wrote"
    assert tr("cheapest per run: 1,030 EUR", "en") == "cheapest per run: 1,030 EUR"


def test_fragments_after_whole_lines() -> None:
    assert tr("stack: HF Trainer + PEFT (eager kernels)", "fr") == "pile logicielle : HF Trainer + PEFT (noyaux eager)"
    assert "(règle psu_headroom)" in tr("something new (rule psu_headroom)", "fr")


def test_a_row_using_a_field_the_english_lacks_is_refused() -> None:
    with pytest.raises(CatalogError) as err:
        _rows({"line": [{"en": "cheapest per run: {c:n}", "fr": "le moins cher : {cost}"}]}, "line", True, "x.toml")
    assert "cost" in str(err.value) and "line 1" in str(err.value)
    with pytest.raises(CatalogError):
        _rows({"line": [{"en": "no French"}]}, "line", True, "x.toml")


def test_memory_loads() -> None:
    lines, fragments = memory("fr")
    assert len(lines) > 100 and fragments
    assert len({r.en for r in lines}) == len(lines), "a row is written twice"


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), st.integers(min_value=0, max_value=3))
def test_french_number_as_the_reports_write_it(x: float, decimals: int) -> None:
    """A number the core wrote in English notation reads as report/numbers.py writes it in French."""
    nf = numbers("fr")
    assert french_number(f"{x:,.{decimals}f}") == nf.num(x, decimals)
    assert french_number(f"{x:,.{decimals}f} EUR") == nf.money(x, "EUR", decimals)
    assert french_number(f"{abs(x) / 1e9:.{decimals}%}") == nf.pct(abs(x) / 1e9, decimals)


# ---------------------------------------------------------------- the examples' French output

def test_the_examples_are_the_built_in_ones() -> None:
    assert set(EXAMPLES) == set(example_names())


@pytest.mark.parametrize("name", EXAMPLES)
def test_markdown_is_french(name: str) -> None:
    md = render_markdown(_plan(name), "fr")
    cells = [cell for line in md.splitlines() for row in line.split(" | ") for cell in row.split("<br>")]
    assert not _english_lines(cells), "\n".join(_english_lines(cells))
    assert "anglais" not in md


@pytest.mark.parametrize("name", EXAMPLES)
def test_html_is_french(name: str) -> None:
    page = re.sub(r"<style>.*?</style>", " ", render_html(_plan(name), "fr"), flags=re.S)
    texts = [html.unescape(p).strip() for p in re.split(r"<[^>]+>", page)]
    assert not _english_lines(texts), "\n".join(_english_lines(texts))


def _terminal(result: PlanResult, details: bool) -> list[str]:
    """The text output, on a console wide enough that no line wraps (a citation wrapped over two lines would not read
    as one)."""
    console = Console(width=2000, no_color=True, record=True, file=io.StringIO())
    render_text(result, console, details=details, lang="fr")
    return console.export_text().splitlines()


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("details", [False, True])
def test_terminal_is_french(name: str, details: bool) -> None:
    lines = _terminal(_plan(name), details)
    assert not _english_lines(lines), "\n".join(_english_lines(lines))
    assert lines[0].startswith(f"gpuplan plan : {name} (objectif : ")


def test_plan_lang_fr_prints_french_text() -> None:
    """`gpuplan plan --lang fr` (text format) is French: the verdict's verb, the headings, the core's lines."""
    from typer.testing import CliRunner

    from gpuplan.cli import app

    res = CliRunner().invoke(app, ["plan", "--example", "llama3-8b-qlora", "--lang", "fr"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("gpuplan plan : llama3-8b-qlora") and lines[1].startswith("Louer ")
    assert "Liste de contrôle de la décision" in res.output and "Decision checklist" not in res.output
    english = CliRunner().invoke(app, ["plan", "--example", "llama3-8b-qlora"]).output
    assert english.splitlines()[1].startswith("Rent ") and "Decision checklist" in english


@pytest.mark.parametrize("name", EXAMPLES)
def test_web_summary_is_french(name: str) -> None:
    from gpuplan.web.summary import summarize

    summary = summarize(_plan(name), "fr")
    texts = [summary.verdict] + [x for r in summary.rows for x in (r.label, r.value)]
    assert not _english_lines(texts), "\n".join(_english_lines(texts))
    assert summarize(_plan(name)).rows[0].label == "GPUs"  # English unless asked


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_candidates_lines_are_french(name: str) -> None:
    """Beyond what a report shows: every line the core wrote for each of the examples' 100 best candidates (their
    server's rules, reasons, every deployment's assumptions), every GPU not chosen and the checklist, translated;
    another project whose plan recommends one of them reads French too."""
    r = api.plan(example_path(name), top=100)
    lines = [x for c in r.candidates for x in (c.server.reasons + c.reasons + c.server.warnings
                                              + [y for d in c.deployments for y in d.assumptions + d.warnings])]
    lines += [x.reason for x in r.rejected] + [y for i in r.checklist for y in i.reasons]
    french = [tr(x, "fr") for x in sorted(set(lines))]
    assert not _english_lines(french), "\n".join(_english_lines(french))


def test_a_list_field_translates_each_part() -> None:
    line = ("evidence: not adequate evidence for a purchase: the speed is extrapolated (speed extrapolated (a prior) "
            "for cdna3 GPUs; no cloud or managed-hosting quote in the price lists)")
    assert tr(line, "fr") == ("preuves : insuffisantes pour un achat : la vitesse est extrapolée (vitesse extrapolée "
                              "(a priori) pour les GPU cdna3 ; aucun devis cloud ni d'hébergement infogéré dans les "
                              "listes de prix)")


# services the examples do not cover: users and an arrival rate, growth steps, a template's objectives
SERVICES = {"chat": CHAT, "rag": RAG}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_a_growing_service_reads_french(name: str) -> None:
    """Growth steps ("+1 serveur(s) après 33 mois", "d'emblée"), a template's scaled objectives and the checklist's
    grown load, which no built-in example shows."""
    result = api.plan(SERVICES[name])
    md = render_markdown(result, "fr")
    cells = [cell for line in md.splitlines() for row in line.split(" | ") for cell in row.split("<br>")]
    assert not _english_lines(cells), "\n".join(_english_lines(cells))
    assert "croissance (utilisateurs x" in md
