"""Golden cases from published measurements (../shared/validation/measurements.yaml), each with its source
and a tolerance we can defend. The whole table with comparison columns is benchmarks/accuracy.py."""

from __future__ import annotations

import pytest

from gpuplan.api import estimate
from gpuplan.catalog.loader import load_overheads
from gpuplan.units import GIB, MIB


def _est(preset: str, **workload):
    return estimate({"model": {"preset": preset}, "workload": workload})


def test_vllm_llama3_8b_weights() -> None:
    # vLLM PR #10511 profiling log: "model weights take 14.96GiB" (Meta-Llama-3-8B, bf16, TP=1)
    r = _est("llama-3-8b", task="inference", weights_dtype="bf16", batch_size=1, context_length=16)
    assert r.memory.weights_bytes / GIB == pytest.approx(14.96, abs=0.005)


def test_vllm_llama2_7b_kv_per_token() -> None:
    # vLLM PR #2031: 7351 blocks x 16 tokens = 57.4 GiB of KV cache, i.e. 512 KiB per token (fp16, Llama-2-7B)
    r = _est("llama-2-7b", task="inference", weights_dtype="fp16", kv_cache_dtype="fp16", batch_size=1,
             context_length=7351 * 16)
    assert r.memory.kv_cache_bytes == 7351 * 16 * 512 * 1024


@pytest.mark.parametrize("mb,ga,ckpt,precision,optimizer,measured_mib", [
    # HF transformers docs, "Efficient training on a single GPU", bert-large-uncased on a V100 16 GB (nvidia-smi)
    (4, 1, False, "fp32", "adamw", 14949),
    (1, 4, True, "fp32", "adamw", 6775),
    (4, 1, False, "fp16-mixed", "adamw", 13939),
    (1, 4, True, "fp16-mixed", "adafactor", 4847),
    (4, 1, False, "fp32", "adamw-8bit", 13085),
])
def test_hf_bert_large_sweep(mb, ga, ckpt, precision, optimizer, measured_mib) -> None:
    # assumptions: eager attention and the one-parameter-at-a-time AdamW of the HF Trainer of 2021, and that
    # stack's CUDA context: 1343 MB (HF docs, "Model training anatomy", same V100, CUDA 11.2, modules loaded
    # eagerly) where gpuplan models today's lazy loading (data/overheads.toml, measured on an H200)
    r = _est("bert-large-uncased", task="full-finetune", precision=precision, optimizer=optimizer,
             micro_batch_size=mb, global_batch_size=mb * ga, sequence_length=512, gradient_checkpointing=ckpt,
             attention="eager", optimizer_implementation="for-loop")
    context_2021 = 1343 * MIB
    device = r.memory.device_bytes - load_overheads().cuda_context_bytes + context_2021
    assert device == pytest.approx(measured_mib * MIB, rel=0.10)  # nvidia-smi: allocator-dependent


def test_peft_full_finetune_out_of_memory() -> None:
    # PEFT README: full fine-tuning of bigscience/mt0-xxl and bloomz-7b1 run out of memory on an 80 GB A100
    for preset in ("mt0-xxl", "bloomz-7b1"):
        r = estimate({"model": {"preset": preset}, "workload": {"task": "full-finetune", "precision": "fp32",
                      "micro_batch_size": 8, "sequence_length": 64}, "hardware": {"gpu": "a100-sxm-80gb"}})
        assert r.memory.fits is False
