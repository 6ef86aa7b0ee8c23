"""DeepSeek-V3 (multi-head latent attention, MoE with a shared expert, MTP) and gpt-oss (MXFP4 experts, sinks,
alternating sliding windows) sized from their presets: the KV cache an MLA engine holds, the attention FLOPs of
MLA, the served weights of an MXFP4 checkpoint, against the figures their makers publish (issue #30)."""

from __future__ import annotations

import pytest

from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_overheads, load_presets
from gpuplan.core.sizing.flops import attention_flops_per_key, forward_flops
from gpuplan.core.sizing.params import count_params, expert_weights, mtp_params
from gpuplan.core.sizing.serving_memory import estimate_inference, kv_cache_bytes
from gpuplan.schema.project import Layout, Workload
from gpuplan.units import GIB


def _arch(preset: str):
    return arch_from_hf_config(load_presets()[preset].config)


def test_mla_caches_the_latent_and_rope_key_not_every_heads_k_and_v() -> None:
    # vLLM's MLA backend: a cache of [blocks, block_size, 1, kv_lora_rank + qk_rope_head_dim]
    # (docs.vllm.ai v0.9.0, vllm/distributed/kv_transfer/kv_connector/utils.py), 512 + 64 = 576 values per token
    arch = _arch("deepseek-v3")
    assert arch.cache_values_per_token_layer == 576
    assert kv_cache_bytes(arch, 1, 1000, 2) == 61 * 576 * 2 * 1000
    # 2 x 128 heads x 192 would be 85x more: what a GQA formula would have said
    assert 2 * arch.kv_dim / arch.cache_values_per_token_layer > 85


def test_mla_cache_is_whole_on_every_tensor_parallel_gpu() -> None:
    arch = _arch("deepseek-v3")
    p = count_params(arch)
    w = Workload(task="inference", batch_size=4, context_length=4096, weights_dtype="fp8")
    kv = [estimate_inference(arch, p, w, Layout(tp=tp), tp, load_overheads()).breakdown.kv_cache_bytes
          for tp in (1, 8)]
    assert kv[0] == kv[1] > 0
    llama = _arch("llama-3.1-70b")  # GQA: 8 KV heads split across 8 GPUs
    lp = count_params(llama)
    kv_l = [estimate_inference(llama, lp, w, Layout(tp=tp), tp, load_overheads()).breakdown.kv_cache_bytes
            for tp in (1, 8)]
    assert kv_l[0] == pytest.approx(8 * kv_l[1], rel=0.01)


def test_mla_attention_flops_use_the_qk_and_v_head_widths() -> None:
    arch = _arch("deepseek-v3")
    assert attention_flops_per_key(arch) == 2 * 128 * (192 + 128)
    fwd = forward_flops(arch, count_params(arch), 4096)
    # causal SDPA: (s + 1) / 2 keys per query on average, 61 layers
    assert fwd.attention_forward == pytest.approx(2 * 128 * 320 * 61 * 4097 / 2 * 4096)


def test_deepseek_v3_active_and_mtp_parameters() -> None:
    # deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: 36.6B activated (0.9B output head included), MTP 11.5B unique
    arch = _arch("deepseek-v3")
    p = count_params(arch)
    assert p.total == load_presets()["deepseek-v3"].parameters
    assert (p.active - p.embedding) / 1e9 == pytest.approx(36.6, rel=0.005)
    assert mtp_params(arch) / 1e9 == pytest.approx(11.5, rel=0.02)
    assert arch.mtp_layers == 1 and arch.moe is not None and arch.moe.moe_layers == 58


@pytest.mark.parametrize("preset,total_b,active_b,checkpoint_gib", [
    # OpenAI, gpt-oss-120b & gpt-oss-20b Model Card (arXiv 2508.10925, 2025-08): parameters, active parameters per
    # token, and the checkpoint with the MoE weights in MXFP4 and the rest in bf16
    ("gpt-oss-20b", 20.9, 3.6, 12.8),
    ("gpt-oss-120b", 116.8, 5.1, 60.8),
])
def test_gpt_oss_counts_and_mxfp4_weights_match_the_model_card(preset: str, total_b: float, active_b: float,
                                                                 checkpoint_gib: float) -> None:
    arch = _arch(preset)
    p = count_params(arch)
    assert p.total / 1e9 == pytest.approx(total_b, abs=0.05)
    assert (p.active - p.embedding) / 1e9 == pytest.approx(active_b, abs=0.05)
    w = Workload(task="inference", batch_size=1, context_length=1024, weights_dtype="mxfp4")
    est = estimate_inference(arch, p, w, Layout(), 1, load_overheads())
    assert est.breakdown.weights_bytes / GIB == pytest.approx(checkpoint_gib, abs=0.05)
    # every block linear in MXFP4 would undercount: attention stays in bf16 in the checkpoint
    assert expert_weights(arch) < p.block_linear_weights


def test_gpt_oss_alternates_sliding_and_full_attention_with_sinks() -> None:
    arch = _arch("gpt-oss-120b")
    assert (arch.sliding_window, arch.sliding_window_layers, arch.num_layers) == (128, 18, 36)
    assert arch.attention_sinks and arch.q_dim == 4096 and arch.hidden_size == 2880
    # a paged engine keeps the window on the sliding layers: 18 layers of 128 tokens + 18 of the whole context
    per_token_layer = 2 * 8 * 64 * 2
    assert kv_cache_bytes(arch, 1, 8192, 2) == per_token_layer * (18 * 128 + 18 * 8192)
