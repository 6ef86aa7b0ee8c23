"""Issue 28: `deployment.price_groups` restricts the cloud prices a plan uses to provider classes and/or commitments.
Each cloud cost then rests only on quotes of those groups, names its group (`price_group`) and says it was
restricted; an unknown class or commitment is refused with the allowed values and a "did you mean"."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan import api
from gpuplan.catalog.loader import example_path, load_project
from gpuplan.catalog.prices import load_prices
from gpuplan.errors import InputError
from gpuplan.schema.project import Project

BOOK = load_prices()
TIER = {p.provider: p.tier for p in BOOK.cloud}


def _plan(groups: dict[str, Any], example: str = "llama3-8b-qlora") -> api.PlanResult:
    proj, base = load_project(example_path(example))
    data = proj.model_dump(exclude_none=True)
    data["deployment"]["price_groups"] = groups
    return api.plan(Project.model_validate(data), base_dir=base, top=20)


def _clouds(result: api.PlanResult) -> list[Any]:
    return [d for c in result.candidates for d in c.deployments if d.option == "cloud"]


def test_without_price_groups_every_class_is_used() -> None:
    tiers = {TIER[p] for d in _clouds(_plan({})) for p in d.providers}
    assert len(tiers) >= 2  # the comparison mixes classes unless told otherwise


@pytest.mark.parametrize("providers", [["hyperscaler"], ["specialist"], ["specialist", "marketplace"]])
def test_only_the_provider_classes_asked_for_price_the_cloud(providers: list[str]) -> None:
    clouds = _clouds(_plan({"providers": providers}))
    assert clouds, "some candidate has a cloud price in these classes"
    for d in clouds:
        assert {TIER[p] for p in d.providers} <= set(providers), d.providers
        assert any("deployment.price_groups asks for: providers " + ", ".join(providers) in a for a in d.assumptions)


def test_only_the_commitments_asked_for_are_priced() -> None:
    result = _plan({"commitments": ["reserved-1y"]}, "llama3-70b-serving")
    clouds = _clouds(result)
    assert clouds and {d.provider for d in clouds} == {"cloud reserved-1y"}
    assert all(d.price_group and d.price_group.startswith("reserved-1y: ") for d in clouds)


def test_a_gpu_with_no_price_left_in_the_groups_says_so() -> None:
    rec = _plan({"providers": ["marketplace"], "commitments": ["reserved-3y"]}, "llama3-70b-serving").recommendation
    assert rec is not None and rec.deployment is not None
    assert all(d.option != "cloud" for d in rec.deployments)
    assert any(g.startswith(f"cloud: no cloud GPU-hour price for {rec.gpu_id} in the price groups") and
               "providers marketplace; commitments reserved-3y" in g for g in rec.deployment.gaps)


@pytest.mark.parametrize("key, value, hint", [("providers", "hyperscalr", "hyperscaler"),
                                              ("commitments", "reserved-1year", "reserved-1y")])
def test_an_unknown_group_is_refused_with_did_you_mean(key: str, value: str, hint: str) -> None:
    from gpuplan.catalog.loader import parse_project

    data = {"model": {"preset": "llama-3.1-8b"}, "workload": {"task": "qlora"},
            "deployment": {"price_groups": {key: [value]}}}
    with pytest.raises(InputError) as err:
        parse_project(data)
    msg = str(err.value)
    assert f"deployment.price_groups.{key}[0]" in msg and f"did you mean '{hint}'" in msg and "allowed:" in msg
