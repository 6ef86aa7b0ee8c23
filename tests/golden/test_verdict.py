"""The first line a buyer reads is the action (issue #27): buy this server at this price, or rent these GPUs from
these providers at this cost, with the next way and why it lost; the JSON's `action` says the same, and the
alternatives show the very cost they were ranked on."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys

import pytest

from gpuplan.catalog.loader import example_names
from gpuplan.core.search.ranking import SAME

EXAMPLES = example_names()


def run(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    return r.stdout


@functools.cache
def planned(name: str) -> tuple[dict, str]:
    return json.loads(run("plan", "--example", name, "--format", "json")), run("plan", "--example", name)


def first_sentence(text: str) -> str:
    """The verdict as the terminal wraps it, joined again: from the line after the title to the first bullet."""
    lines = text.splitlines()[1:]
    out = []
    for line in lines:
        if line.startswith("  ") or line.startswith("Server") or line.startswith("If you buy"):
            break
        out.append(line.strip())
    return " ".join(out)


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_first_line_is_the_action_and_its_cost(name: str) -> None:
    data, text = planned(name)
    rec = data["recommendation"]
    a = rec["action"]
    head = first_sentence(text)
    assert head.split()[0] == a["verb"].capitalize() and head.startswith(" ".join(a["text"].split()))
    d = next(x for x in rec["deployments"] if (x["option"], x["provider"]) == (rec["deployment"]["option"],
                                                                               rec["deployment"]["provider"]))
    assert a["option"] == d["option"] and a["total_cost"] == d["total_cost"] and a["currency"] == data["currency"]
    cost = f"{a['cost']:,.0f}"
    assert cost in head and f"{d['total_cost']:,.0f}" in head  # the headline cost and the horizon's total
    if a["verb"] == "rent":  # what is rented, and from whom; the chassis is only "if you buy"
        assert rec["server"]["platform_name"] not in head.split(";")[0]
        assert "If you buy" in text
        if a["option"] == "cloud":
            assert all(p in head for p in d["providers"][:2])
    else:
        assert a["cost"] == rec["price"] and rec["server"]["platform_name"] in head
    other = next((x for x in rec["deployments"] if x["option"] != d["option"]), None)
    if other is not None:  # the runner-up, and why it lost
        assert f"{other['total_cost']:,.0f}" in head and a["runner_up"] is not None


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_alternatives_show_the_cost_they_are_ranked_on(name: str) -> None:
    data, text = planned(name)
    table = text.split("Alternatives", 1)[1].split("Deployment costs", 1)[0]
    rows = [ln for ln in table.splitlines() if re.search(r"\d (buy|rent)\b", ln)]
    shown = [c for c in data["candidates"]]
    assert len(rows) == len(shown)
    for line, c in zip(rows, shown):
        assert f"{c['cost']:,.0f} {c['cost_basis']}" in line, (line, c["gpu_id"])
    if data["objective"] == "cost":  # in rank order, each cost falls in the same or a later 10% bucket
        base = data["stats"]["cheapest_cost"] + data["stats"]["same_cost"]
        adequate = [c for c in shown if c["evidence"] is None or c["evidence"]["adequate"]]
        buckets = [math.floor(math.log(max(c["cost"], base) / base) / math.log(SAME)) for c in adequate]
        assert buckets == sorted(buckets)


def test_a_cloud_answer_is_not_a_purchase_in_any_output() -> None:
    """llama3-8b-qlora rents: the Markdown verdict, the web summary and the JSON all say rent, and the purchase
    price is labelled as what buying would take (it read "Get 1 x Dell PowerEdge XE7745 ... deploy cloud")."""
    from gpuplan.api import plan
    from gpuplan.catalog.loader import example_path
    from gpuplan.report.document import render_markdown
    from gpuplan.web.summary import summarize

    result = plan(example_path("llama3-8b-qlora"))
    assert result.recommendation.action.verb == "rent"
    verdict = render_markdown(result).split("## Verdict", 1)[1].split("##", 1)[0]
    assert verdict.strip().startswith("Rent ") and "If you buy" in verdict
    summary = summarize(result)
    assert summary.verdict.startswith("Rent ")
    assert any(r.label.startswith("If you buy") for r in summary.rows)
