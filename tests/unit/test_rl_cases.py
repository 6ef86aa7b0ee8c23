"""The published GRPO step times (benchmarks/rl_cases.yaml, issue #31): every row carries its source pinned to a
commit, its date and its measurement, describes a project gpuplan accepts, and gets a finite step time."""

from __future__ import annotations

import datetime
import importlib.util
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "rl_accuracy.py"
spec = importlib.util.spec_from_file_location("rl_accuracy", BENCH)
assert spec is not None and spec.loader is not None
rl = importlib.util.module_from_spec(spec)
sys.modules["rl_accuracy"] = rl
spec.loader.exec_module(rl)
CASES = rl.load_cases()


def test_at_least_eight_rows_from_two_frameworks() -> None:
    assert len(CASES) >= 8 and len({c["framework"] for c in CASES}) >= 2


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_each_row_is_sourced_dated_and_runs(case: dict) -> None:  # type: ignore[type-arg]
    assert "/blob/" in case["source"] and len(case["source"].split("/blob/")[1].split("/")[0]) == 40
    assert isinstance(case["as_of"], datetime.date)
    assert case["lengths"] in ("cap", "mean") and case["measured"]["step_s"] > 0
    if case["lengths"] == "mean":  # the mean sequence gpuplan is given is the published one
        g = case["grpo"]
        assert g["prompt_length"] + g["mean_response_length"] == case["published_mean_sequence"]
    p = rl.predict(case)
    assert math.isfinite(p["step_s"]) and p["step_s"] > p["rollout_s"] > 0
