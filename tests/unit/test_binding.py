"""The sentence an infeasible plan ends with (core/advise.binding_constraint) names what a buyer can act on
(issue #27): the cheapest way that works when the budget binds, whether bought or rented, and options that fit
the task."""

from __future__ import annotations

from gpuplan.core.advise import binding_constraint
from gpuplan.schema.plan import Rejected


def over(gpu: str, cost: float, what: str) -> Rejected:
    return Rejected(gpu_id=gpu, gpus_per_server=1, servers=1, code="over-budget", cost=cost,
                    reason=f"over budget: {cost:,.0f} EUR {what}, budget 5 EUR")


def test_the_budget_sentence_names_the_cheapest_way_that_works() -> None:
    # it named the first rejection: "1 x V100, 11,364 EUR to buy" although a 7 EUR cloud run existed
    rejected = [over("v100-pcie-32gb", 11_364.0, "to buy"), over("l40s-48gb", 7.0, "to rent for the run")]
    text = binding_constraint(rejected)
    assert "l40s-48gb" in text and "7 EUR to rent" in text and "v100" not in text
    assert "LoRA/QLoRA" in text


def test_a_service_is_not_told_to_fine_tune_differently() -> None:
    text = binding_constraint([over("h100-sxm-80gb", 400_000.0, "to buy")], "inference")
    assert "LoRA" not in text and "load" in text
    nofit = Rejected(gpu_id="l4-24gb", gpus_per_server=1, servers=1, code="no-fit", reason="does not fit")
    assert "QLoRA" not in binding_constraint([nofit], "inference")
    assert "QLoRA" in binding_constraint([nofit])


def test_the_cost_of_a_rejection_is_json_only_where_it_has_one() -> None:
    assert "cost" in over("a", 1.0, "to buy").model_dump(mode="json")
    plain = Rejected(gpu_id="a", gpus_per_server=1, servers=1, code="no-fit", reason="x")
    assert "cost" not in plain.model_dump(mode="json")


def test_a_lora_run_is_not_told_to_use_lora() -> None:
    # a QLoRA project over budget read "options: raise goals.budget, use LoRA/QLoRA, or a smaller model"
    for task in ("lora", "qlora"):
        text = binding_constraint([over("l40s-48gb", 13.0, "to rent for the run")], task)
        assert "LoRA" not in text and "fewer tokens" in text
    nofit = Rejected(gpu_id="l4-24gb", gpus_per_server=1, servers=1, code="no-fit", reason="does not fit")
    assert "QLoRA" not in binding_constraint([nofit], "qlora")
