"""Exact parameter counts from config.json, against the counts transformers gives (golden values: built
with transformers 5.24 on the meta device, see tests/trace/test_param_counts.py for the live check)."""

from __future__ import annotations

import pytest

from gpuplan.catalog.hf_config import SUPPORTED_MODEL_TYPES, arch_from_hf_config
from gpuplan.core.sizing.params import count_params
from gpuplan.errors import InputError, UnsupportedModelError
from tests.conftest import hf_config

GOLDEN = {
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "llama-3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x22b": 140_630_071_296,
    "qwen2.5-72b": 72_706_203_648,
    "qwen3-235b-a22b": 235_093_634_560,
    "gemma-2b": 2_506_172_416,
    "gemma-2-9b": 9_241_705_984,
    "phi-2": 2_779_683_840,
    "phi-3-mini-4k": 3_821_079_552,
    "falcon-7b": 6_921_720_704,
    "bloomz-7b1": 7_069_016_064,
    "stablelm-base-alpha-3b": 3_637_321_728,
    "bert-large-uncased": 335_143_938,  # BertForSequenceClassification, 2 labels
    "t0-3b": 2_849_757_184,  # the checkpoint's untied lm_head included (transformers 5 ties T5 on build)
    "mt0-xxl": 12_921_057_280,
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_parameter_count_matches_transformers(name: str) -> None:
    assert count_params(arch_from_hf_config(hf_config(name))).total == GOLDEN[name]


def test_moe_active_parameters_are_fewer() -> None:
    p = count_params(arch_from_hf_config(hf_config("mixtral-8x22b")))
    # Mixtral 8x22B: 141 B total, 39 B active (Mistral AI announcement, 2024-04-17)
    assert 38.5e9 < p.active < 39.5e9


def test_unsupported_model_type_lists_supported() -> None:
    with pytest.raises(UnsupportedModelError) as exc:
        arch_from_hf_config({"model_type": "rwkv"}, source="rwkv-7b/config.json")
    text = str(exc.value)
    assert "rwkv-7b/config.json" in text and "model_type" in text
    for t in SUPPORTED_MODEL_TYPES:
        assert t in text


def test_missing_key_names_it() -> None:
    cfg = hf_config("llama-3-8b")
    del cfg["hidden_size"]
    with pytest.raises(InputError, match="hidden_size"):
        arch_from_hf_config(cfg)


def test_zero_layers_is_an_error() -> None:
    cfg = {**hf_config("llama-3-8b"), "num_hidden_layers": 0}
    with pytest.raises(InputError, match="num_layers"):
        arch_from_hf_config(cfg)


def test_gqa_and_head_dim_read_exactly() -> None:
    a = arch_from_hf_config(hf_config("gemma-7b"))
    assert (a.num_heads, a.num_kv_heads, a.head_dim) == (16, 16, 256)  # explicit head_dim != 3072/16
    b = arch_from_hf_config(hf_config("llama-3-70b"))
    assert (b.num_heads, b.num_kv_heads, b.head_dim) == (64, 8, 128)


def test_sliding_window_layers() -> None:
    g2 = arch_from_hf_config(hf_config("gemma-2-9b"))
    assert g2.sliding_window == 4096 and g2.sliding_window_layers == g2.num_layers // 2
    m = arch_from_hf_config(hf_config("mistral-7b"))
    assert m.sliding_window == 4096 and m.sliding_window_layers == m.num_layers


def test_mpt_is_sized_with_its_own_measurements() -> None:
    """Issue #30: MPT was refused ("unsupported model_type mpt"). mpt-7b's count is the one its model card
    publishes (6,649,286,656: ../shared/hf-configs/SOURCES.md); its activations are MPT's own rows (transformers'
    MPT computes attention eagerly, with ALiBi), not a fallback to llama's."""
    from gpuplan import api

    est = api.estimate({"name": "mpt", "model": {"preset": "mpt-7b"},
                        "workload": {"task": "lora", "micro_batch_size": 2, "sequence_length": 2048}})
    assert est.model.parameters == 6_649_286_656
    assert not [n for n in est.notes if n.code == "activation-fallback"]
    eager = api.estimate({"name": "mpt", "model": {"preset": "mpt-7b"},
                          "workload": {"task": "lora", "micro_batch_size": 2, "sequence_length": 2048,
                                       "attention": "eager"}})
    assert eager.memory.activations_bytes == est.memory.activations_bytes  # sdpa runs as eager in MPT


def test_llama4_scout_text_is_sized_with_its_own_measurements() -> None:
    """Issue #30: Llama 4's text model. Scout's 17B active parameters (the model card's; its 109B total include the
    vision encoder), every layer MoE with a shared expert; its activations are Llama 4's own rows, not llama's."""
    from gpuplan import api

    est = api.estimate({"name": "scout", "model": {"preset": "llama-4-scout-17b-16e"},
                        "workload": {"task": "lora", "micro_batch_size": 1, "sequence_length": 4096,
                                     "precision": "bf16", "gradient_checkpointing": True}})
    assert est.model.parameters == 107_769_861_120
    assert round(est.model.active_parameters / 1e9) == 17
    assert not [n for n in est.notes if n.code == "activation-fallback"]
