"""Every built-in preset: our count from its config equals its recorded exact count (which
tests/data/test_presets_transformers.py checks against transformers), and it estimates without error."""

from __future__ import annotations

import pytest

from gpuplan.api import estimate
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_presets
from gpuplan.core.sizing.params import count_params

PRESETS = load_presets()


def test_at_least_30_presets_across_families() -> None:
    assert len(PRESETS) >= 30
    assert len({p.config["model_type"] for p in PRESETS.values()}) >= 20


@pytest.mark.parametrize("preset_id", sorted(PRESETS))
def test_count_equals_recorded_parameters(preset_id: str) -> None:
    p = PRESETS[preset_id]
    assert count_params(arch_from_hf_config(p.config)).total == p.parameters


@pytest.mark.parametrize("preset_id", sorted(PRESETS))
def test_every_preset_estimates(preset_id: str) -> None:
    task = "full-finetune" if PRESETS[preset_id].config["model_type"] in ("resnet",) else "lora"
    r = estimate({"model": {"preset": preset_id}, "workload": {"task": task, "micro_batch_size": 1,
                                                               "sequence_length": 256}})
    assert r.memory.peak_tensor_bytes > r.model.parameters  # at least a byte per parameter
