"""Prefix caching (issue #29, workload.prefix_cache): cached prompt tokens skip prefill. Golden: vLLM's V1 prefix
caching pull request (https://github.com/vllm-project/vllm/pull/9668, comaniac's benchmark comment of 2024-10-24):
neuralmagic/Meta-Llama-3-8B-Instruct-FP8 on one L40S, benchmarks/benchmark_prefix_caching.py over 200 ShareGPT
prompts of 256-512 tokens each sent twice (400 requests, 10 output tokens each, the script's default), all at once
(offline): 8.56 s without the cache, 4.86 s with it at a 49 % hit rate, 1.76x the throughput. The prompts averaged
380 tokens (17,777 input tokens/s x 8.56 s / 400 requests). The engine here is the same model (Llama 3.1 8B's
architecture, fp8 weights) on the catalog's L40S, saturated: its throughput at 0 and 0.49 hit rate."""

from __future__ import annotations

import pytest

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_presets, load_speed_model
from gpuplan.catalog.serving import load_serving
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.serving import build_replica
from gpuplan.schema.project import Layout, PrefixCache, Workload

#: without and with the cache (seconds for the same 400 requests): vLLM PR #9668
PUBLISHED_S = (8.56, 4.86)
HIT_RATE = 0.49
PROMPT, OUTPUT = 380, 10


def _saturation(hit_rate: float) -> float:
    arch = arch_from_hf_config(load_presets()["llama-3.1-8b"].config)
    w = Workload(task="inference", weights_dtype="fp8", context_length=PROMPT, output_tokens=OUTPUT, arrival_rate=1.0,
                 prefix_cache=PrefixCache(hit_rate=hit_rate, shared=False) if hit_rate else None)
    rep = build_replica(arch, count_params(arch), w, Layout(tp=1), builtin_catalog().gpus.rows["l40s-48gb"],
                        load_speed_model(), load_serving(), node=1, reserved_bytes=None)
    return rep.saturation


def test_prefix_caching_speeds_up_a_prefill_bound_batch_as_vllm_measured() -> None:
    published = PUBLISHED_S[0] / PUBLISHED_S[1]
    modelled = _saturation(HIT_RATE) / _saturation(0.0)
    assert published == pytest.approx(1.761, abs=1e-3)
    assert modelled > 1  # the direction
    assert modelled == pytest.approx(published, rel=0.15)  # and the size: 1.79x in the model


def test_no_hit_is_no_cache() -> None:
    assert _saturation(0.0) == pytest.approx(_saturation(1e-12), rel=1e-6)
