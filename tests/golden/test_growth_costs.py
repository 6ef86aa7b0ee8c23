"""Growth is planned, not only checked (issue #27, point 3): a service whose users double gets the servers the grown
load needs, when it needs them, in every deployment's total; a training run whose model and data both double is
costed at about four runs' compute and checked against its deadline. The projects are the issue's own: a
Llama-3.1-70B chat service for 200 users (think time 20 s, 2,048-token prompts, 400-token answers, TTFT 2 s, ITL
50 ms) and the built-in `llama2-7b-pretrain` (model x2, data x2, a 60-day deadline)."""

from __future__ import annotations

import copy
import functools
import math

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuplan import api
from gpuplan.catalog.currency import in_currency
from gpuplan.catalog.loader import example_path
from gpuplan.core.cost.breakeven import cost_by_month
from gpuplan.core.cost.deployments import deploy, pricing
from gpuplan.core.cost.growth import load_at, serving_additions
from gpuplan.schema.plan import PlanResult
from gpuplan.schema.project import Project

CHAT = {
    "name": "llama70-chat-200",
    "model": {"preset": "llama-3.1-70b"},
    "workload": {"task": "inference", "users": 200, "think_time_s": 20, "context_length": 2448,
                 "output_tokens": 400, "use_case": "chat", "slo": {"ttft_s": 2.0, "itl_s": 0.05}},
    "goals": {"purpose": "production", "budget": {"amount": 3_000_000, "currency": "EUR"}},
    "growth": {"users_scale": 1, "horizon_months": 36},
}


def chat(users_scale: float) -> dict:
    p = copy.deepcopy(CHAT)
    p["growth"]["users_scale"] = users_scale
    return p


@functools.cache
def chat_plan(users_scale: float) -> PlanResult:
    return api.plan(chat(users_scale), base_dir=example_path("llama3-70b-serving").parent)


def test_a_grown_service_pays_for_the_servers_its_load_needs() -> None:
    flat, grown = chat_plan(1.0), chat_plan(2.0)
    rec = grown.recommendation
    assert rec is not None and rec.inference is not None
    inf = rec.inference
    # the issue: one server's replicas serve less than the grown load; the grown plan adds what the load needs
    assert inf.capacity_requests_per_s is not None and inf.capacity_requests_per_s < 2 * inf.requests_per_s
    adds = serving_additions(inf, rec.layout, rec.gpus_per_server, rec.servers, 2.0, 36)
    assert adds, "the grown load outgrows the servers planned"
    for d in rec.deployments:
        assert [(s.month, s.servers) for s in d.growth] == adds or any("not priced" in w for w in d.warnings)
        # a cost curve with its steps still ends at the total the report shows
        assert math.isclose(cost_by_month(d, 36, 36, _assumptions(grown)), d.total_cost, rel_tol=1e-9)
    # the same configuration without growth costs less, by at least the added servers' purchase
    same = next(c for c in flat.candidates if (c.gpu_id, c.gpus_per_server, c.servers)
                == (rec.gpu_id, rec.gpus_per_server, rec.servers))
    on_prem = {d.option: d for d in rec.deployments}["on-prem"]
    before = {d.option: d for d in same.deployments}["on-prem"]
    assert on_prem.total_cost > before.total_cost + 0.5 * (rec.price or 0) / rec.servers
    # the verdict and the checklist say so
    assert rec.action is not None and "more after " in rec.action.text and "as the load grows" in rec.action.text
    growth = next(i for i in grown.checklist if i.item == "Growth plan")
    assert any("requests/s (users x2" in r and "priced in every deployment's total" in r for r in growth.reasons)


def test_the_month_a_server_is_added_is_when_the_load_outgrows_the_replicas() -> None:
    rec = chat_plan(2.0).recommendation
    assert rec is not None and rec.inference is not None and rec.inference.replica_demand is not None
    demand, per_server = rec.inference.replica_demand, rec.gpus_per_server // (rec.layout.tp * rec.layout.pp)
    (month, k), *_ = serving_additions(rec.inference, rec.layout, rec.gpus_per_server, rec.servers, 2.0, 36)
    # in the month before, the load at its end fits the replicas in place; in the month added, it does not
    assert demand * load_at(month + 1, 2.0, 36) > rec.servers * per_server
    assert demand * load_at(month, 2.0, 36) <= rec.servers * per_server + 1e-9


@settings(max_examples=25, deadline=None)
@given(scale=st.floats(min_value=1.0, max_value=8.0), more=st.floats(min_value=1.0, max_value=4.0))
# CI found it: the grown load's server moved from month 25 (11 months left: rented on demand) to month 24 (12 left:
# a 1-year reservation, cheaper), so more users cost less; a reservation is now paid for its whole term
@example(scale=3.625, more=1.125)
def test_more_users_never_lower_the_cost_of_a_configuration(scale: float, more: float) -> None:
    """Priced the same way (core/cost/deployments.deploy), a configuration never costs less over the horizon when its
    users grow more: every deployment option, with the servers the growth adds."""
    base = chat_plan(1.0)
    rec = base.recommendation
    assert rec is not None
    bundle = in_currency(api.load_bundle(), "EUR")

    def totals(users_scale: float) -> dict[str, float]:
        proj = Project.model_validate(chat(users_scale))
        c = deploy(pricing(proj, bundle.prices, "EUR", base.as_of, bundle.conversion), rec)
        return {d.provider: d.total_cost for d in c.deployments}

    lo, hi = totals(scale), totals(scale * more)
    assert lo.keys() == hi.keys()
    for k in lo:
        assert hi[k] >= lo[k] * (1 - 1e-12), k


def _assumptions(result: PlanResult):  # the cost model's inputs the plan was priced with
    bundle = in_currency(api.load_bundle(), result.currency)
    return pricing(Project.model_validate(chat(2.0)), bundle.prices, result.currency, result.as_of,
                   bundle.conversion).assumptions


@pytest.fixture(scope="module")
def pretrain() -> tuple[PlanResult, PlanResult]:
    path = example_path("llama2-7b-pretrain")
    grown = api.plan(path)
    flat = yaml.safe_load(path.read_text())
    flat["growth"] = {"model_scale": 1.0, "data_scale": 1.0, "horizon_months": flat["growth"]["horizon_months"]}
    return api.plan(flat, base_dir=path.parent), grown


def test_a_model_and_data_that_both_double_cost_about_four_runs(pretrain: tuple[PlanResult, PlanResult]) -> None:
    flat, grown = pretrain
    rec = grown.recommendation
    assert rec is not None
    same = next(c for c in flat.candidates if (c.gpu_id, c.gpus_per_server, c.servers)
                == (rec.gpu_id, rec.gpus_per_server, rec.servers))
    od = {d.provider: d for d in rec.deployments}["cloud on-demand"]
    od1 = {d.provider: d for d in same.deployments}["cloud on-demand"]
    # on demand a run is billed by the hour: the grown model (x2 layers: 1.9-2x the parameters used per token) on
    # twice the data is about 4 runs' compute of the configuration; it was costed as 2 runs at the planned size
    assert od.cost_per_run and od1.cost_per_run
    assert 3.6 < od.total_cost / od.cost_per_run < 4.05
    assert od1.total_cost / od1.cost_per_run == pytest.approx(1.0)
    growth = next(i for i in grown.checklist if i.item == "Growth plan")
    line = next(r for r in growth.reasons if r.startswith("the grown run"))
    assert "x one run's compute" in line and "past the 60-day deadline" in line
    assert growth.verdict == "warn"
