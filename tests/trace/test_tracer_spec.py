"""TraceSpec / TraceResult validation: pydantic only, runs without torch."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuplan.trace import TraceResult, TraceSpec

LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)


def test_spec_defaults_and_frozen() -> None:
    s = TraceSpec(config=LLAMA)
    assert (s.task, s.precision, s.optimizer, s.attention, s.weights_dtype) == (
        "full-finetune", "bf16-mixed", "adamw", "sdpa", "bf16")
    assert (s.lora_rank, s.lora_alpha, s.lora_targets, s.emulate_cuda) == (8, 16.0, None, True)
    with pytest.raises(ValidationError):
        s.precision = "fp32"  # type: ignore[misc]


@pytest.mark.parametrize("bad", [dict(precision="fp8"), dict(task="qlora"), dict(optimizer="adam"),
                                 dict(micro_batch_size=0), dict(attention="flash"), dict(unknown=1)])
def test_spec_rejects(bad: dict) -> None:
    with pytest.raises(ValidationError):
        TraceSpec(config=LLAMA, **bad)


def test_spec_needs_model_type() -> None:
    with pytest.raises(ValidationError):
        TraceSpec(config={"hidden_size": 64})


def test_result_split_must_sum_to_peak() -> None:
    kw = dict(parameters_bytes=1, gradients_bytes=2, optimizer_bytes=3, other_bytes=4, phase_peaks={},
              parameters=1, trainable_parameters=1, seconds=0.0)
    assert TraceResult(peak_bytes=10, **kw).peak_bytes == 10
    with pytest.raises(ValidationError):
        TraceResult(peak_bytes=11, **kw)
