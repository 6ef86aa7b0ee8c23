"""Project files: every key of the contract is accepted; bad input names the field, what is allowed and a
close match."""

from __future__ import annotations

import pytest

from gpuplan.catalog.loader import parse_project, resolve_model
from gpuplan.errors import HubUnavailableError, InputError, UnknownNameError

FULL = {
    "name": "all-keys",
    "model": {"preset": "llama-3.1-8b"},
    "workload": {
        "task": "lora", "precision": "bf16-mixed", "optimizer": "adamw", "micro_batch_size": 2,
        "global_batch_size": 32, "sequence_length": 2048, "target_length": 128, "image_size": 224,
        "gradient_checkpointing": True, "attention": "sdpa", "lora": {"rank": 8, "alpha": 16, "targets": ["q_proj"]},
        "tokens": 1e9, "epochs": 2, "batch_size": 1, "context_length": 4096, "output_tokens": 256,
        "weights_dtype": "bf16", "kv_cache_dtype": "fp8",
    },
    "data": {"samples": 1000, "size_gb": 1.5, "modality": "text"},
    "goals": {"purpose": "production", "deadline_days": 30, "objective": "cost",
              "budget": {"amount": 1000, "currency": "USD", "period": "monthly"}},
    "growth": {"model_scale": 2, "data_scale": 3, "horizon_months": 24},
    "constraints": {"gpus": ["h100-sxm-80gb"], "exclude_gpus": ["rtx-4090-24gb"], "datacenter_only": True,
                    "max_gpus_per_server": 8},
    "deployment": {"options": ["on-prem", "cloud"]},
    "hardware": {"gpu": "h100-sxm-80gb", "gpus": 8, "layout": {"zero": 3, "tp": 2, "pp": 1, "offload": "optimizer"}},
}


def test_every_contract_key_is_accepted() -> None:
    p = parse_project(FULL)
    assert p.hardware is not None and p.hardware.layout.zero == 3
    assert p.workload.lora is not None and p.workload.lora.targets == ["q_proj"]


def _error(data: dict) -> InputError:
    with pytest.raises(InputError) as exc:
        parse_project(data, source="p.yaml")
    return exc.value


def test_unknown_key_suggests_the_right_one() -> None:
    e = _error({**FULL, "workload": {**FULL["workload"], "micro_batch": 2}})
    assert e.loc == ("workload", "micro_batch")
    assert "micro_batch_size" in str(e) and "did you mean" in str(e) and "p.yaml" in str(e)


@pytest.mark.parametrize(("key", "ours"), [("input_tokens", "context_length"), ("prompt_tokens", "context_length"),
                                           ("max_new_tokens", "output_tokens"), ("qps", "arrival_rate"),
                                           ("per_device_train_batch_size", "micro_batch_size")])
def test_another_tools_name_for_a_key_points_to_ours(key: str, ours: str) -> None:
    """A serving prompt's `input_tokens` (vLLM's benchmark, most papers) is `context_length` here: spelling alone
    suggests `output_tokens`, the wrong key."""
    e = _error({**FULL, "workload": {**FULL["workload"], key: 100}})
    assert e.loc == ("workload", key)
    assert f"'workload.{ours}' here" in str(e) and "output_tokens'" not in str(e).split("(allowed")[0].replace(
        "'workload.output_tokens'", "")
    assert e.suggestions[0] == ours  # type: ignore[attr-defined]


def test_a_key_in_the_wrong_section_says_where_it_goes() -> None:
    e = _error({**FULL, "data": {"tokens": 10**9}})
    assert e.loc == ("data", "tokens")
    assert "'workload.tokens' is where it goes" in str(e)


def test_bad_literal_lists_allowed_values() -> None:
    e = _error({**FULL, "workload": {**FULL["workload"], "precision": "bf16mixed"}})
    assert e.loc == ("workload", "precision")
    assert "bf16-mixed" in str(e) and "fp32" in str(e)


@pytest.mark.parametrize("field,value", [("micro_batch_size", -1), ("micro_batch_size", 0), ("sequence_length", 0)])
def test_impossible_values(field: str, value: int) -> None:
    e = _error({**FULL, "workload": {**FULL["workload"], field: value}})
    assert e.loc == ("workload", field)
    assert "greater than 0" in str(e)


def test_wrong_type() -> None:
    e = _error({**FULL, "workload": {**FULL["workload"], "micro_batch_size": "four"}})
    assert e.loc == ("workload", "micro_batch_size") and "integer" in str(e)


def test_model_needs_exactly_one_source() -> None:
    e = _error({**FULL, "model": {"preset": "llama-3.1-8b", "hf_id": "meta-llama/Llama-3.1-8B"}})
    assert e.loc == ("model",) and "exactly one" in str(e)
    e = _error({**FULL, "model": {}})
    assert "exactly one" in str(e)


def test_layout_must_divide_gpus() -> None:
    e = _error({**FULL, "hardware": {"gpu": "h100-sxm-80gb", "gpus": 6, "layout": {"tp": 4}}})
    assert e.loc == ("hardware",) and "multiple of tp" in str(e)


def test_unknown_preset_did_you_mean() -> None:
    p = parse_project({**FULL, "model": {"preset": "llama-3.1-8"}})
    with pytest.raises(UnknownNameError) as exc:
        resolve_model(p.model)
    assert "llama-3.1-8b" in exc.value.suggestions
    assert exc.value.loc == ("model", "preset")


def test_preset_by_alias_and_hub_id() -> None:
    a = resolve_model(parse_project({**FULL, "model": {"preset": "meta-llama/Llama-3.1-8B"}}).model)
    b = resolve_model(parse_project({**FULL, "model": {"hf_id": "meta-llama/Llama-3.1-8B"}}).model)
    assert a.arch == b.arch and a.origin == "preset:llama-3.1-8b"


def test_hub_id_offline_names_the_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network in tests, and not the user's own cache
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    p = parse_project({**FULL, "model": {"hf_id": "some-org/unknown-model"}})
    with pytest.raises(HubUnavailableError, match="is not available") as exc:
        resolve_model(p.model)
    assert exc.value.cache_path in str(exc.value)


def test_missing_hf_config_file(tmp_path) -> None:
    p = parse_project({**FULL, "model": {"hf_config": "nope/config.json"}})
    with pytest.raises(InputError, match="no such file"):
        resolve_model(p.model, tmp_path)


def test_prefix_cache_is_a_serving_engines() -> None:
    """Issue #29: prefix caching applies to a serving engine's requests; a training task or generate() has none."""
    import pydantic

    from gpuplan.schema.project import Workload

    assert Workload(task="inference", prefix_cache={"hit_rate": 0.5}).prefix_cache.shared  # type: ignore[arg-type,union-attr]
    for bad in ({"task": "lora", "prefix_cache": {"hit_rate": 0.5}},
                {"task": "inference", "engine": "transformers", "batch_size": 4, "prefix_cache": {"hit_rate": 0.5}},
                {"task": "inference", "prefix_cache": {"hit_rate": 1.0}}):
        with pytest.raises(pydantic.ValidationError):
            Workload.model_validate(bad)
