"""DPO's memory (issue #31) against the exact trace of the same step (benchmarks/dpo_trace_cases.py): the policy on
both sequences of each pair, the reference's forward without grad, TRL's loss over the log-probabilities."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from dpo_trace_cases import dpo_cases
from trace_validation import compare, estimate_case, trace_case

pytestmark = pytest.mark.trace
CASES = {c.name: c for c in dpo_cases()}


@pytest.mark.parametrize("name", list(CASES))
def test_dpo_step_within_12_percent(name: str) -> None:
    c = compare(CASES[name])
    assert abs(c.error) <= 0.12, (
        f"{name}: estimate {c.estimate_bytes / 2**30:.2f} GiB vs trace {c.trace_bytes / 2**30:.2f} GiB "
        f"({100 * c.error:+.1f}%); phases estimate {c.estimate_phases} trace {c.trace_phases}")


def test_the_reference_copy_is_what_the_trace_holds() -> None:
    """The traced frozen reference (weights live beside the policy's) is the estimate's reference part, to the
    512-byte block per tensor."""
    held = CASES["dpo llama3-8b/4L full amp b1 s512"]
    pre = CASES["dpo llama3-8b/4L full precomputed amp b1 s512"]
    traced = trace_case(held).parameters_bytes - trace_case(pre).parameters_bytes
    est = estimate_case(held)
    assert est.breakdown.reference_bytes > 0 and estimate_case(pre).breakdown.reference_bytes == 0
    assert traced == pytest.approx(est.breakdown.reference_bytes, rel=0.001)
