"""Parameter counts against transformers itself, and LoRA adapter counts against PEFT itself, for every
supported model_type (tiny configs on the meta device; real configs in tests/data)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from gpuplan.catalog.hf_config import SUPPORTED_MODEL_TYPES, arch_from_hf_config  # noqa: E402
from gpuplan.core.sizing.lora import lora_params  # noqa: E402
from gpuplan.core.sizing.params import count_params, mtp_params  # noqa: E402
from tests.conftest import hf_config  # noqa: E402

pytestmark = pytest.mark.trace
transformers.logging.set_verbosity_error()

TINY = {
    "deepseek_v3": dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=4, vocab_size=128, n_routed_experts=4,
                        num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1, q_lora_rank=24,
                        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=12, n_group=1,
                        topk_group=1),
    "gpt_oss": dict(hidden_size=64, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, vocab_size=128, num_local_experts=4, num_experts_per_tok=2),
    "llama": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128, attention_bias=True),
    "llama4_text": dict(hidden_size=64, intermediate_size=32, intermediate_size_mlp=96, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128, num_local_experts=4,
                        num_experts_per_tok=1, interleave_moe_layer_step=2),
    "mistral": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=128),
    "mixtral": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=128, num_local_experts=4, num_experts_per_tok=2),
    "qwen2": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128),
    "qwen2_moe": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32, shared_expert_intermediate_size=48, mlp_only_layers=[1]),
    "qwen3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=24, vocab_size=128),
    "qwen3_moe": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32),
    "gemma": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=1, head_dim=32, vocab_size=128),
    "gemma2": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=32, vocab_size=128),
    "gemma3_text": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=32, vocab_size=128),
    "phi": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                qk_layernorm=True),
    "phi3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=128, pad_token_id=0),
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64),
    "gpt_neox": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                     vocab_size=128),
    "falcon": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128),
    "bloom": dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=128),
    "mpt": dict(d_model=64, n_heads=4, n_layers=2, vocab_size=128, attn_config={"alibi": True}),
    "stablelm": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=128, qk_layernorm=True, use_qkv_bias=True),
    "bert": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, vocab_size=128),
    "roberta": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    vocab_size=128),
    "t5": dict(d_model=64, d_kv=16, d_ff=96, num_layers=2, num_decoder_layers=3, num_heads=4, vocab_size=128),
    "mt5": dict(d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4, vocab_size=128),
    "vit": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                patch_size=8, num_labels=10),
    "resnet": dict(embedding_size=16, hidden_sizes=[32, 64], depths=[1, 2], layer_type="bottleneck", num_labels=7),
}
EXTRA = {
    "falcon-new-arch": ("falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                                       new_decoder_architecture=True, num_kv_heads=2, vocab_size=128)),
    "falcon-sequential": ("falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         parallel_attn=False, multi_query=False, bias=True, vocab_size=128)),
    "stablelm-parallel": ("stablelm", dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                           num_attention_heads=4, vocab_size=128, use_parallel_residual=True)),
    "resnet-basic": ("resnet", dict(embedding_size=16, hidden_sizes=[16, 32], depths=[2, 1], layer_type="basic",
                                    downsample_in_first_stage=True)),
    "llama4-all-moe-bias": ("llama4_text", dict(hidden_size=64, intermediate_size=32, intermediate_size_mlp=96,
                                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                 head_dim=16, vocab_size=128, num_local_experts=4,
                                                 num_experts_per_tok=2, attention_bias=True)),
    "deepseek_v3-no-q-lora-bias": ("deepseek_v3", dict(
        hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, vocab_size=128, n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=0,
        q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=12, n_group=1,
        topk_group=1, attention_bias=True)),
    "gpt_oss-layer-types": ("gpt_oss", dict(hidden_size=64, intermediate_size=48, num_hidden_layers=3,
                                            num_attention_heads=4, num_key_value_heads=1, head_dim=8, vocab_size=128,
                                            num_local_experts=4, num_experts_per_tok=1, attention_bias=False,
                                            tie_word_embeddings=True,
                                            layer_types=["full_attention", "sliding_attention", "full_attention"])),
    "gemma2-pattern": ("gemma2", dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=128,
                                      tie_word_embeddings=False)),
}
CASES = {**{t: (t, c) for t, c in TINY.items()}, **EXTRA}


def build(model_type: str, cfg: dict, device: str = "meta"):
    c = transformers.AutoConfig.for_model(model_type, **cfg)
    if model_type in ("t5", "mt5"):
        cls = transformers.AutoModelForSeq2SeqLM
    elif model_type in ("bert", "roberta"):
        cls = transformers.AutoModelForSequenceClassification
    elif model_type in ("vit", "resnet"):
        cls = transformers.AutoModelForImageClassification
    else:
        cls = transformers.AutoModelForCausalLM
    with torch.device(device):
        return cls.from_config(c)


def test_every_supported_type_is_covered() -> None:
    assert set(TINY) == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_parameters_equal_transformers(case: str) -> None:
    model_type, cfg = CASES[case]
    model = build(model_type, cfg)
    ours = count_params(arch_from_hf_config({"model_type": model_type, **cfg}))
    assert ours.total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_type", sorted(t for t in TINY if t != "resnet"))
def test_lora_all_linear_equals_peft(model_type: str) -> None:
    cfg = TINY[model_type]
    model = peft.get_peft_model(build(model_type, cfg, "cpu"), peft.LoraConfig(r=4, target_modules="all-linear"))
    peft_count = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert lora_params(arch_from_hf_config({"model_type": model_type, **cfg}), 4) == peft_count


@pytest.mark.parametrize("model_type,targets", [("llama", ["q_proj", "v_proj"]), ("t5", ["q", "v"]),
                                                 ("gpt_neox", ["query_key_value"]), ("bert", ["query", "value"])])
def test_lora_named_targets_equal_peft(model_type: str, targets: list[str]) -> None:
    cfg = TINY[model_type]
    model = peft.get_peft_model(build(model_type, cfg, "cpu"), peft.LoraConfig(r=8, target_modules=targets))
    peft_count = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert lora_params(arch_from_hf_config({"model_type": model_type, **cfg}), 8, targets) == peft_count


@pytest.mark.parametrize("name", ["llama-3-8b", "mixtral-8x22b", "qwen3-235b-a22b", "gemma-2-9b", "phi-2",
                                  "falcon-7b", "bert-large-uncased", "mpt-7b", "deepseek-v3"])
def test_real_configs_equal_transformers(name: str) -> None:
    cfg = hf_config(name)
    model = build(cfg["model_type"], {k: v for k, v in cfg.items() if k != "model_type"})
    assert count_params(arch_from_hf_config(cfg)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("case", ["deepseek_v3", "deepseek_v3-no-q-lora-bias"])
def test_mtp_modules_equal_transformers(case: str) -> None:
    """DeepSeek-V3's multi-token prediction modules, as transformers' MtpModel builds them beside the causal LM
    (speculative decoding): their own parameters, the embedding and head being the main model's."""
    from transformers.modeling_layers import MtpModel

    model_type, cfg = CASES[case]
    with torch.device("meta"):
        mtp = MtpModel(build(model_type, cfg), 2)
    arch = arch_from_hf_config({"model_type": model_type, **cfg, "num_nextn_predict_layers": 2})
    assert mtp_params(arch) == sum(p.numel() for p in mtp.layers.parameters())


def test_deepseek_v3_published_counts() -> None:
    """DeepSeek-V3's README_WEIGHTS.md (deepseek-ai/DeepSeek-V3, 2024-12-26): 671B main-model parameters, 36.6B
    activated (the output head included, the input embedding a lookup), MTP 11.5B unique parameters."""
    arch = arch_from_hf_config(hf_config("deepseek-v3"))
    p = count_params(arch)
    assert p.total == 671_026_404_352
    assert abs((p.active - p.embedding) / 36.6e9 - 1) < 0.005
    assert abs(mtp_params(arch) / 11.5e9 - 1) < 0.02
