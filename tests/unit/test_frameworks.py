"""`workload.framework`: the defaults of data/frameworks.toml fill the keys a project leaves unset, explicit keys
win, and the data file is checked on load (every default a workload key with a valid value and a source)."""

from __future__ import annotations

import datetime

import pytest

from gpuplan.catalog.frameworks import load_frameworks, parse_frameworks
from gpuplan.core.sizing.frameworks import FRAMEWORK_KEYS, apply_framework, framework_note_text
from gpuplan.errors import CatalogError
from gpuplan.schema.project import Framework, Workload

FRAMEWORKS = load_frameworks()


def test_every_framework_has_sourced_defaults() -> None:
    assert set(FRAMEWORKS) == set(Framework.__args__)  # type: ignore[attr-defined]
    for fw in FRAMEWORKS.values():
        assert fw.source and datetime.date.fromisoformat(fw.as_of) <= datetime.date.today()
        for d in fw.defaults:
            assert d.key in FRAMEWORK_KEYS and d.source.strip()


def test_torchtune_implies_its_recipe_settings() -> None:
    w, implied = apply_framework(Workload(task="lora", framework="torchtune"), FRAMEWORKS)
    assert (w.loss, w.precision, w.gradient_checkpointing) == ("chunked", "bf16", True)
    assert implied == ["precision bf16", "gradient_checkpointing true", "loss chunked"]
    assert framework_note_text("torchtune", implied).startswith("framework torchtune implied: precision bf16")
    full, _ = apply_framework(Workload(task="full-finetune", framework="torchtune"), FRAMEWORKS)
    assert full.optimizer_in_backward is True and full.optimizer == "paged-adamw-8bit"  # task-specific defaults


def test_explicit_keys_win() -> None:
    w, implied = apply_framework(Workload(task="lora", framework="torchtune", loss="standard",
                                          gradient_checkpointing=False, precision="bf16-mixed"), FRAMEWORKS)
    assert (w.loss, w.gradient_checkpointing, w.precision) == ("standard", False, "bf16-mixed")
    assert implied == []


def test_unsloth_offloads_checkpointed_inputs() -> None:
    w, implied = apply_framework(Workload(task="qlora", framework="unsloth"), FRAMEWORKS)
    assert w.activation_offload is True and w.gradient_checkpointing is True and w.loss == "chunked"
    assert "activation_offload true" in implied


def test_no_framework_and_inference_are_left_alone() -> None:
    plain = Workload(task="lora")
    assert apply_framework(plain, FRAMEWORKS) == (plain, [])
    serving = Workload(task="inference", framework="torchtune")
    assert apply_framework(serving, FRAMEWORKS) == (serving, [])


def test_implied_settings_are_not_repeated_when_they_change_nothing() -> None:
    # hf-trainer's loss is the standard one, which an unset key already means
    _, implied = apply_framework(Workload(task="lora", framework="hf-trainer"), FRAMEWORKS)
    assert not any(s.startswith("loss") for s in implied)


@pytest.mark.parametrize("row,field", [
    ({"id": "torchtune", "source": "s", "as_of": datetime.date(2025, 1, 1),
      "defaults": [{"key": "losss", "value": "chunked", "source": "s"}]}, "defaults[0].key"),
    ({"id": "torchtune", "source": "s", "as_of": datetime.date(2025, 1, 1),
      "defaults": [{"key": "loss", "value": "fused", "source": "s"}]}, "defaults[0].value"),
    ({"id": "torchtune", "source": "s", "as_of": datetime.date(2025, 1, 1),
      "defaults": [{"key": "loss", "value": "chunked"}]}, "defaults[0]"),
    ({"id": "megatron", "source": "s", "as_of": datetime.date(2025, 1, 1), "defaults": []}, "id"),
    ({"id": "torchtune", "source": "s", "as_of": "2025", "defaults": []}, "as_of"),
])
def test_bad_rows_name_the_field(row, field) -> None:
    with pytest.raises(CatalogError) as err:
        parse_frameworks({"schema_version": 1, "framework": [row]})
    assert err.value.field == field


def test_unknown_schema_version_is_refused() -> None:
    with pytest.raises(CatalogError, match="schema_version"):
        parse_frameworks({"schema_version": 2, "framework": []})
