"""Hand-computed cases of the memory model (the arithmetic is written out in each test)."""

from __future__ import annotations

import pytest

from gpuplan.api import estimate
from gpuplan.core.sizing.memory import NF4_BYTES_PER_PARAM
from gpuplan.units import GIB

P_8B = 8_030_261_248  # Llama 3 8B


def _mem(preset: str, hardware: dict | None = None, **workload):
    project = {"model": {"preset": preset}, "workload": workload}
    if hardware:
        project["hardware"] = hardware
    return estimate(project).memory


def test_kv_cache_llama3_8b() -> None:
    # 32 layers x (K and V) x 8 KV heads x 128 dims x 2 bytes x 4 sequences x (2048 prompt + 256 output tokens,
    # whole 16-token blocks: the engine allocates the cache for every token a request will hold; issue 14)
    m = _mem("llama-3-8b", task="inference", batch_size=4, context_length=2048)
    assert m.kv_cache_bytes == 32 * 2 * 8 * 128 * 2 * 4 * 2304 == GIB * 2304 // 2048


def test_kv_heads_replicate_when_tp_exceeds_them() -> None:
    # Qwen3-235B-A22B has 4 KV heads: on 8-way tensor parallel each GPU keeps one head (not half of one)
    m = _mem("qwen3-235b-a22b", {"gpu": "h200", "gpus": 8, "layout": {"tp": 8}}, task="inference",
             batch_size=1, context_length=4096, kv_cache_dtype="fp8")
    assert m.kv_cache_bytes == 94 * 2 * 1 * 128 * 1 * (4096 + 256)  # prompt + the default 256 output tokens


def test_sliding_window_caps_the_cache() -> None:
    # Mistral 7B v0.1: every layer slides over 4096 tokens, so 8192 tokens of context cost as much as 4096
    a = _mem("mistral-7b-v0.1", task="inference", context_length=4096)
    b = _mem("mistral-7b-v0.1", task="inference", context_length=8192)
    assert a.kv_cache_bytes == b.kv_cache_bytes == 32 * 2 * 8 * 128 * 2 * 4096


def test_full_finetune_static_bytes_per_parameter() -> None:
    # fp32 AdamW: weights 4 + gradients 4 + two moments 8 = 16 bytes per parameter at the optimizer step
    m = _mem("llama-3-8b", task="full-finetune", precision="fp32", micro_batch_size=1, sequence_length=128)
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == pytest.approx(
        (4 * P_8B, 4 * P_8B, 8 * P_8B), abs=512)
    # pure bf16: 2 + 2 + 4 (torch keeps the moments in the parameters' dtype)
    m = _mem("llama-3-8b", task="full-finetune", precision="bf16", micro_batch_size=1, sequence_length=128)
    assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == pytest.approx(
        (2 * P_8B, 2 * P_8B, 4 * P_8B), abs=512)


def test_zero_stages_shard_what_they_should() -> None:
    # 8 GPUs, bf16-mixed: ZeRO-1 shards the optimizer states, ZeRO-2 also the gradients, ZeRO-3 also weights
    base = dict(task="full-finetune", precision="bf16-mixed", micro_batch_size=1, sequence_length=128)
    z = {k: _mem("llama-3-8b", {"gpu": "h100", "gpus": 8, "layout": {"zero": k}}, **base) for k in (1, 2, 3)}
    assert z[1].optimizer_bytes == pytest.approx(8 * P_8B / 8, abs=512)
    assert z[1].weights_bytes == pytest.approx(4 * P_8B, abs=512)
    assert z[2].gradients_bytes <= 4 * P_8B / 8 + 512
    assert z[3].weights_bytes == pytest.approx(4 * P_8B / 8, abs=512)


def test_qlora_weights() -> None:
    # block linear weights in NF4 with double quantization (4.127 bits), the rest (embeddings, head, norms)
    # in bf16, LoRA adapters in fp32
    m = estimate({"model": {"preset": "llama-3-8b"}, "workload": {"task": "qlora", "micro_batch_size": 1,
                  "sequence_length": 128, "lora": {"rank": 16, "targets": ["all-linear"]}}})
    linear = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336)
    rest = P_8B - linear
    adapters = m.model.trainable_parameters
    expected = linear * NF4_BYTES_PER_PARAM + rest * 2 + adapters * 4
    assert m.memory.weights_bytes == pytest.approx(expected, abs=512)
    assert NF4_BYTES_PER_PARAM == pytest.approx(4.127 / 8, abs=1e-3)


def test_offload_moves_optimizer_off_the_gpu() -> None:
    base = dict(task="full-finetune", precision="bf16-mixed", micro_batch_size=1, sequence_length=128)
    m = _mem("llama-3-8b", {"gpu": "h100", "gpus": 8, "layout": {"zero": 2, "offload": "optimizer"}}, **base)
    assert m.optimizer_bytes == 0
