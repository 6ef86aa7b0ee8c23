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
    # (the KV cache holds prompt and output tokens: 7351 blocks of 16 tokens in all)
    r = _est("llama-2-7b", task="inference", weights_dtype="fp16", kv_cache_dtype="fp16", batch_size=1,
             context_length=7351 * 16 - 16, output_tokens=16)
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


# --- stacks with the memory features of issue 15 (benchmarks/memory_cases.yaml, each row with its source) --------

def _feature_cases() -> list[dict]:
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "memory_cases.yaml"
    by_id: dict[str, dict] = {}
    for row in yaml.safe_load(path.read_text())["cases"]:
        base = by_id.get(row.get("base", ""), {})
        merged = {**base, **{k: v for k, v in row.items() if k not in ("base", "workload")}}
        merged["workload"] = {**base.get("workload", {}), **row.get("workload", {})}
        by_id[row["id"]] = merged
    return list(by_id.values())


def _feature_error(c: dict) -> float:
    from gpuplan.catalog.frameworks import load_frameworks
    from gpuplan.catalog.loader import load_activation_table, resolve_model
    from gpuplan.core.sizing.frameworks import apply_framework
    from gpuplan.core.sizing.memory import estimate_memory
    from gpuplan.core.sizing.params import count_params
    from gpuplan.core.sizing.stack import qlora_impl
    from gpuplan.schema.project import Layout, ModelRef, Workload
    from gpuplan.units import GB

    arch = resolve_model(ModelRef(preset=c["model"])).arch
    w, _ = apply_framework(Workload.model_validate(c["workload"]), load_frameworks())
    old = bool(c.get("bitsandbytes")) and tuple(int(x) for x in c["bitsandbytes"].split(".")) < (0, 43, 2)
    m = estimate_memory(arch, count_params(arch), w, Layout(), 1, load_activation_table(), load_overheads(),
                        qlora_impl(w, old) if w.task == "qlora" else None)
    measured = c["measured_gib"] * GIB if "measured_gib" in c else c["measured_gb"] * GB
    return (m.peak_tensor_bytes - measured) / measured


FEATURE_CASES = _feature_cases()


@pytest.mark.parametrize("case", FEATURE_CASES, ids=[c["id"] for c in FEATURE_CASES])
def test_published_stack_feature_runs(case: dict) -> None:
    # torchtune's README tables (chunked CE, compile, checkpointing, optimizer in backward, offloading, 8-bit and
    # paged AdamW, packing) and LitGPT's config-hub table (QLoRA with bitsandbytes 0.42.0): torch's own peak
    limit = 0.15 if case["workload"].get("task") == "qlora" and case["id"].startswith("litgpt") else 0.20
    assert abs(_feature_error(case)) <= limit, case["quote"]


def test_published_stack_feature_runs_median() -> None:
    import statistics

    assert statistics.median(abs(_feature_error(c)) for c in FEATURE_CASES) <= 0.08
