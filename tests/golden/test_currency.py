"""One currency per plan (issue #26): every example planned in euros and in dollars states every amount of every
output (the terminal's text, `cost`, JSON, Markdown, HTML with its figures) in the plan's currency. Another
currency appears only where a source is cited in its own words (a quote's own figure, "80 USD per TB ... ; <source>",
the rate "1 USD = 0.9239 EUR"), and the `*_usd` JSON keys keep their meaning: the same amounts, in US dollars."""

from __future__ import annotations

import functools
import html
import json
import math
import re
from typing import Any

import pytest
import yaml
from rich.console import Console

from gpuplan import api
from gpuplan.catalog.currency import in_currency
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.report.document import render_html, render_markdown
from gpuplan.report.plan import render_costs_text, render_json, render_text
from gpuplan.schema.plan import PlanResult

CURRENCIES = ("EUR", "USD")
BUNDLE = api.load_bundle()


def project_in(name: str, currency: str) -> dict[str, Any]:
    """The example with its budget in `currency` (the same amount, converted); one without a budget gets one so
    large that it binds nothing, to be planned in euros."""
    data = yaml.safe_load(example_path(name).read_text(encoding="utf-8"))
    budget = data.setdefault("goals", {}).get("budget")
    if budget is None:
        data["goals"]["budget"] = {"amount": 1e9, "currency": currency}
    else:
        was = budget.get("currency", "EUR")
        budget.update(amount=budget["amount"] * BUNDLE.fx[currency] / BUNDLE.fx[was], currency=currency)
    return data


@functools.cache
def planned(name: str, currency: str) -> PlanResult:
    return api.plan(project_in(name, currency), top=100)


def cited(currency: str) -> list[str]:
    """What the plan may cite in another currency, longest first: the sources of the quotes and assumptions (a
    converted one begins with the source's own figure), and the rate."""
    book = in_currency(BUNDLE, currency).prices
    texts = {r.source for r in [*book.cloud, *book.hosting, *book.assumptions.values()]}
    texts |= {f"1 USD = {BUNDLE.fx[c]:g} {c}" for c in BUNDLE.fx}
    return sorted(texts, key=len, reverse=True)


def foreign_amounts(text: str, currency: str) -> list[str]:
    """Amounts `text` states in a currency other than `currency`, once the citations are set aside."""
    text = " ".join(text.split())
    for c in cited(currency):
        text = text.replace(" ".join(c.split()), " ")
    others = "|".join(c for c in BUNDLE.fx if c != currency)
    pattern = rf"[\d,.]+\s?(?:{others})\b|\b(?:{others})\s?[\d,.]+"
    if currency != "USD":
        pattern += r"|[$]\s?\d[\d,.]*|\d[\d,.]*\s?\$US"
    if currency != "EUR":
        pattern += r"|€\s?\d|\d\s?€"
    return [text[max(m.start() - 60, 0):m.end() + 20] for m in re.finditer(pattern, text)]


def terminal(result: PlanResult) -> str:
    console = Console(width=4000, record=True, emoji=False)
    with console.capture():
        render_text(result, console, top=100, details=True)
        render_costs_text(result, console, top=100)
    return console.export_text()


CASES = [(n, c) for n in example_names() for c in CURRENCIES]


@pytest.mark.parametrize(("name", "currency"), CASES)
def test_every_output_states_amounts_in_the_plans_currency(name: str, currency: str) -> None:
    plan = planned(name, currency)
    assert plan.currency == currency
    outputs = {"text": terminal(plan), "json": render_json(plan), "md": render_markdown(plan),
               "html": html.unescape(re.sub(r"<[^>]+>", " ", render_html(plan)))}
    for kind, text in outputs.items():
        assert not foreign_amounts(text, currency), (kind, foreign_amounts(text, currency)[:5])
    if any(c.cost is not None for c in plan.candidates):  # the time-vs-cost figure's axis says its currency
        assert f"cost ({currency})" in outputs["html"]


@pytest.mark.parametrize(("name", "currency"), CASES)
def test_the_usd_keys_are_the_same_amounts_in_dollars(name: str, currency: str) -> None:
    plan = planned(name, currency)
    rate = BUNDLE.fx[currency]
    assert plan.usd_rate == rate
    data = json.loads(render_json(plan))
    for c in data["candidates"]:
        assert c["currency"] == c["server"]["currency"] == currency
        assert all(d["currency"] == currency for d in c["deployments"])
        for key in ("price", "rent", "cost"):
            if c[key] is None:
                assert c[f"{key}_usd"] is None
            else:
                assert math.isclose(c[f"{key}_usd"] * rate, c[key], rel_tol=1e-12), (c["gpu_id"], key)
        if c["server"]["price"] is not None:
            assert math.isclose(c["server"]["price_usd"] * rate, c["server"]["price"], rel_tol=1e-12)
    stats = data["stats"]
    assert math.isclose(stats["same_cost_usd"] * rate, stats["same_cost"], rel_tol=1e-12)
    if stats["cheapest_cost"] is not None:
        assert math.isclose(stats["cheapest_cost_usd"] * rate, stats["cheapest_cost"], rel_tol=1e-12)


@pytest.mark.parametrize("name", example_names())
def test_the_currency_changes_no_decision(name: str) -> None:
    """The same project in euros and in dollars (its budget converted at the rate) ranks the same candidates with
    the same deployments: converting changes the unit, not the answer."""
    eur, usd = planned(name, "EUR"), planned(name, "USD")
    assert [(c.gpu_id, c.gpus_per_server, c.servers) for c in eur.candidates] == \
        [(c.gpu_id, c.gpus_per_server, c.servers) for c in usd.candidates]
    for a, b in zip(eur.candidates, usd.candidates):
        if a.cost is not None:
            assert math.isclose(a.cost_usd, b.cost_usd, rel_tol=1e-9)
        assert (a.deployment and a.deployment.option) == (b.deployment and b.deployment.option)
