"""The speed model against published measurements (benchmarks/speed_cases.py: ../shared/validation/
measurements.yaml and benchmarks/speed_cases.yaml, each case with its source, quote and assumptions).

No tolerance here is ours: a measured speed must lie inside the model's own stated range, predicted x
[range_low, range_high], the 10th-90th percentile spread of measured/predicted on the calibration runs
(data/speed.toml, set by scripts/fit_speed.py). For a time (GPU-hours, runtime) the range inverts:
predicted / range_high <= measured <= predicted / range_low."""

from __future__ import annotations

import math
import re
import statistics
import sys
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import pytest

from gpuplan.catalog.loader import load_speed_model

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT.parent / "shared" / "validation" / "measurements.yaml"
if not MEASUREMENTS.exists():
    pytest.skip("../shared/validation/measurements.yaml is not available", allow_module_level=True)

sys.path.insert(0, str(ROOT / "benchmarks"))
import speed_cases  # noqa: E402

SM = load_speed_model()


@lru_cache(maxsize=1)
def cases() -> dict[str, Any]:
    return {c.id: c for c in speed_cases.load_cases()}


@cache
def predicted(case_id: str) -> float:
    return speed_cases.predict(cases()[case_id], SM)


def is_speed(metric: str) -> bool:
    return metric == "tokens_per_s_per_gpu"


def measured_over_predicted_speed(case_id: str) -> float:
    """measured / predicted as a speed (for a time, predicted / measured)."""
    c = cases()[case_id]
    p = predicted(case_id)
    return c.value / p if is_speed(c.metric) else p / c.value


# Well-pinned calibration runs: the source states the GPU count, the model, the batch and the throughput or
# GPU-hours, so little is left to assumption.
PINNED = {
    # LLaMA paper (Touvron et al. 2023, arXiv:2302.13971) Table 15: 1,022,362 A100-80GB GPU-hours for LLaMA-65B;
    # section 2.4: 2048 GPUs, ~380 tokens/s/GPU, 1.4T tokens in ~21 days (../shared/validation/measurements.yaml)
    "llama1-65b": "gpu_hours",
    # NVIDIA Megatron-Bridge Performance Summary (25.11 NeMo container, DGX-H100), row
    # "LLAMA3_8B | 8 | FP8-CS | 128 | 1 | 8192 | ... | 14451 | 744": 8 H100 SXM, global batch 128, seq 8192,
    # 14,451 tokens/s/GPU
    "megatron-bridge-h100-llama3-8b-fp8": "tokens_per_s_per_gpu",
    # NVIDIA/DeepLearningExamples PyTorch/LanguageModeling/BERT README, 'Fine-tuning NVIDIA DGX-1 With 32G'
    # (SQuAD): BERT-large, FP32, batch 8 on one V100-SXM2-32GB, 12 sequences/s x 384 tokens
    "dle-bert-large-squad-v100-fp32": "tokens_per_s_per_gpu",
    # QwenLM/Qwen README 'Profiling of Memory and Speed': Qwen-7B LoRA on one A100-SXM4-80GB, seq 8192, 8 sequences
    # per optimizer step, flash attention, gradient checkpointing: 21.3 s/iter = 3,076.8 tokens/s
    "qwen-7b-lora-a100-seq8192": "tokens_per_s_per_gpu",
    # pytorch/torchtune README 'Memory and training speed' (@0031bfb): Llama 3.1 8B full fine-tune on one
    # RTX 4090, "batch size 2 (without gradient accumulation), a dataset packed to sequence length 2048": 1,650 tokens/s
    "torchtune-llama31-8b-full-rtx4090": "tokens_per_s_per_gpu",
    # Narayanan et al. 2021 (arXiv:2104.04473) Table 1: a 529.6B GPT on 2,520 A100-80GB, tp 8 x pp 35, batch 2520,
    # 163 TFLOP/s per GPU by Eq. (3) (recomputation counted) = 37.9 tokens/s/GPU: pre-training at > 1,000 GPUs
    "megatron-gpt-529.6b-a100-2520": "tokens_per_s_per_gpu",
    # NVIDIA Megatron-Bridge Performance Summary (25.11, DGX-H100), row "LLAMA3_70B | 64 | FP8-CS | 128 | 1 | 8192 |
    # 0 | 4 | 8 | 1 | 5 | 1 | 64 | 1602 | 719": FP8 on 8 nodes, tp 4 x pp 8, 5 virtual stages
    "megatron-bridge-h100-llama3-70b-fp8-64gpu": "tokens_per_s_per_gpu",
}


def test_leave_one_source_out_groups_cover_every_calibration_run() -> None:
    """benchmarks/speed_accuracy.py --loo predicts each source's runs with a model fitted without them: every
    calibration run has a source id, and no source is the whole set."""
    groups = {speed_cases.source_group(c) for c in cases().values() if c.calibration}
    assert len(groups) >= 10
    for c in cases().values():
        assert speed_cases.source_group(c), c.id


@pytest.mark.parametrize("case_id", list(PINNED))
def test_pinned_case_lies_in_the_stated_range(case_id: str) -> None:
    assert case_id in cases(), f"{case_id} is no longer a case in benchmarks/speed_cases.py"
    c = cases()[case_id]
    assert c.calibration and c.metric == PINNED[case_id]
    p = predicted(case_id)
    lo, hi = SM.params.range_low, SM.params.range_high
    if is_speed(c.metric):
        low, high = p * lo, p * hi
    else:
        low, high = p / hi, p / lo
    assert low <= c.value <= high, (
        f"{case_id}: measured {c.value:,.4g} {c.metric} outside the stated range {low:,.4g}-{high:,.4g} "
        f"(predicted {p:,.4g}; measured/predicted speed {measured_over_predicted_speed(case_id):.3f}, "
        f"range {lo}-{hi}; source: {c.source})")


def _percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q
    a, b = math.floor(k), math.ceil(k)
    return s[a] + (s[b] - s[a]) * (k - a)


def test_stated_range_is_the_calibration_spread() -> None:
    """data/speed.toml says range_low/high are the 10th/90th percentiles of measured/predicted speed on the
    calibration runs: hold the constants to their own source (to the 4 digits they are written with)."""
    calib = [cid for cid, c in cases().items() if c.calibration]
    ratios = [measured_over_predicted_speed(cid) for cid in calib]
    assert _percentile(ratios, 0.1) == pytest.approx(SM.params.range_low, rel=1e-3)
    assert _percentile(ratios, 0.9) == pytest.approx(SM.params.range_high, rel=1e-3)
    for key in ("range_low", "range_high"):
        m = re.search(r"on the (\d+) calibration runs", SM.sources[key])
        assert m and int(m.group(1)) == len(calib), SM.sources[key]


def _median_abs_error(pick: Any, rule: Any) -> float:
    return statistics.median(abs(rule(c) - c.value) / c.value for c in cases().values() if pick(c))


def test_gpuplan_beats_the_naive_rule_on_fine_tuning() -> None:
    """The issue's bar: on the fine-tuning calibration runs, gpuplan's median absolute error is below the naive
    6 x parameters x tokens at 40% of the dense peak (speed_cases.naive)."""
    def pick(c: Any) -> bool:
        return c.group == "finetune" and c.calibration

    assert sum(map(pick, cases().values())) >= 10
    ours = _median_abs_error(pick, lambda c: predicted(c.id))
    naive = _median_abs_error(pick, speed_cases.naive)
    assert ours < naive, f"gpuplan median |error| {ours:.1%} vs naive {naive:.1%} on fine-tuning"


def test_gpuplan_beats_the_naive_rule_on_all_calibration_runs() -> None:
    def pick(c: Any) -> bool:
        return bool(c.calibration)

    ours = _median_abs_error(pick, lambda c: predicted(c.id))
    naive = _median_abs_error(pick, speed_cases.naive)
    assert ours < naive, f"gpuplan median |error| {ours:.1%} vs naive {naive:.1%} on all calibration runs"


def test_every_case_has_a_source_and_a_positive_prediction() -> None:
    assert len(cases()) >= 40
    for cid, c in cases().items():
        assert c.source, cid
        assert c.value > 0 and predicted(cid) > 0 and math.isfinite(predicted(cid)), cid
