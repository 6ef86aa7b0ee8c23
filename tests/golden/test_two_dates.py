"""The date is an input (issue #26): every example planned for two dates a year apart differs only where the date
itself explains it. Quotes age: a quote younger than six months on the first date is older on the second, so the
deployments' "prices older than 6 months" lines and each GPU's evidence change, and with them the ranking, since a
GPU whose price rests on one old quote ranks after the adequate ones (core/search/evidence.py). Nothing else may
move: what fits, what it costs, how long it takes, what is rejected and why."""

from __future__ import annotations

import datetime
import functools
import re
from typing import Any

import pytest

from gpuplan import api
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.core.search.evidence import STALE_DAYS
from gpuplan.schema.plan import PlanResult

FIRST, SECOND = datetime.date(2026, 12, 1), datetime.date(2027, 12, 1)
#: what a date changes in a line: the stale-price warnings, and the evidence's count of young quotes
DATED = re.compile(r"prices older than 6 months|younger than \d+ months")
#: what the ranking writes on a candidate (it moves when the evidence does)
RANKED = ("score", "evidence")


@functools.cache
def planned(name: str, as_of: datetime.date) -> PlanResult:
    return api.plan(example_path(name), top=100_000, as_of=as_of)


def undated(value: Any) -> Any:
    """`value` (a plan's JSON) without what the date explains: dated lines, and the ranking's own fields."""
    if isinstance(value, dict):
        return {k: undated(v) for k, v in value.items() if k not in RANKED}
    if isinstance(value, list):
        return [undated(v) for v in value if not (isinstance(v, str) and DATED.search(v))]
    if isinstance(value, str) and DATED.search(value):
        return "<dated>"
    return value


def same_item(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """Two checklist items alike once dated: a stale-price line on either date may also move the item's verdict
    (pass to warn), which the date explains (a quote fresh on the first date is six months old on the second)."""
    ux, uy = undated(x), undated(y)
    if any(isinstance(r, str) and DATED.search(r) for r in [*x.get("reasons", []), *y.get("reasons", [])]):
        ux.pop("verdict", None), uy.pop("verdict", None)
    return bool(ux == uy)


def key(c: Any) -> tuple[str, int, int]:
    return c.gpu_id, c.gpus_per_server, c.servers


def test_the_two_dates_are_a_year_apart_and_age_some_quotes() -> None:
    assert (SECOND - FIRST).days >= 365 > STALE_DAYS
    young = planned("llama3-8b-qlora", FIRST)
    assert young.as_of == FIRST and planned("llama3-8b-qlora", SECOND).as_of == SECOND
    # the data has quotes younger than six months on the first date: the second date must age them
    assert any(c.evidence is not None and c.evidence.price == "quoted" for c in young.candidates)


@pytest.mark.parametrize("name", example_names())
def test_a_year_later_only_the_dated_evidence_and_the_ranking_it_moves_change(name: str) -> None:
    a, b = planned(name, FIRST), planned(name, SECOND)
    # the same candidates qualify, each with the same memory, server, time and costs
    ca, cb = {key(c): c for c in a.candidates}, {key(c): c for c in b.candidates}
    assert ca.keys() == cb.keys()
    for k, c in ca.items():
        assert undated(c.model_dump(mode="json")) == undated(cb[k].model_dump(mode="json")), k
    assert [undated(r.model_dump(mode="json")) for r in a.rejected] == \
        [undated(r.model_dump(mode="json")) for r in b.rejected]
    # the order moves only if some GPU's evidence changed adequacy between the dates
    moved = [key(c) for c in a.candidates] != [key(c) for c in b.candidates]
    adequacy_changed = {k for k in ca if ca[k].evidence and cb[k].evidence
                        and ca[k].evidence.adequate != cb[k].evidence.adequate}
    if moved or key(a.recommendation) != key(b.recommendation):
        assert adequacy_changed, "the ranking moved with no change of evidence"
    # evidence only ages: a quote fresh a year later was fresh before
    for k in ca:
        ea, eb = ca[k].evidence, cb[k].evidence
        if ea is not None and eb is not None:
            assert eb.adequate <= ea.adequate or ea.price == eb.price
            assert not (eb.price == "quoted" and ea.price != "quoted")
    # the rest of the plan is the same, once the dated lines are set aside
    rest = ("project", "objective", "stats", "headroom", "currency", "usd_rate", "growth_view")
    ja, jb = a.model_dump(mode="json"), b.model_dump(mode="json")
    for field in rest:
        if field == "stats":
            ja[field].pop("search_seconds"), jb[field].pop("search_seconds")
        assert undated(ja[field]) == undated(jb[field]) or field == "growth_view" and moved, field
    if key(a.recommendation) == key(b.recommendation):
        assert len(ja["checklist"]) == len(jb["checklist"])
        for x, y in zip(ja["checklist"], jb["checklist"], strict=True):
            assert same_item(x, y), (x, y)
