"""Speculative decoding (issue #29, workload.speculative), modelled from the mechanism (core/sizing/speculative.py):
the draft's passes and the target's verification of k + 1 tokens per request in each step, (output - 1) / accepted
steps per request. Golden: DeepSeek-V3's own MTP module, "the acceptance rate of the second token prediction ranges
between 85% and 90%", which "enables the model to significantly improve decoding speed, delivering 1.8 times TPS"
(DeepSeek-V3 Technical Report, arXiv 2412.19437, section 5.4.3); data/serving.toml's mtp_acceptance_rate is the
85 % end. The report does not state the batch or hardware of the 1.8x: checked here at small batches on one 8 x
H200 server in FP8, where its deployment's decode runs bound by reading the weights, as the mechanism needs."""

from __future__ import annotations

import pytest

from gpuplan import api
from gpuplan.errors import InputError


def _dsv3(batch: int, speculative: dict | None) -> object:
    w: dict[str, object] = {"task": "inference", "batch_size": batch, "context_length": 1024, "output_tokens": 512,
                            "weights_dtype": "fp8", "kv_cache_dtype": "fp8"}
    if speculative is not None:
        w["speculative"] = speculative
    return api.estimate({"model": {"preset": "deepseek-v3"}, "workload": w,
                         "hardware": {"gpu": "h200-sxm-141gb", "gpus": 8, "layout": {"tp": 8}}})


@pytest.mark.parametrize("batch", [1, 8])
def test_deepseek_v3_mtp_gives_its_published_speedup(batch: int) -> None:
    plain, mtp = _dsv3(batch, None).inference, _dsv3(batch, {"method": "mtp"}).inference
    speedup = mtp.aggregate_tokens_per_s / plain.aggregate_tokens_per_s
    assert speedup == pytest.approx(1.8, rel=0.1), speedup
    assert mtp.itl_s.p50 < plain.itl_s.p50 / 1.6  # about 1.85 tokens per step, each step a little dearer
    assert "1.85 emitted per step" in mtp.assumptions[0]


def test_the_draft_is_in_memory() -> None:
    """DeepSeek-V3's MTP module (one MoE layer and its projection, about 11.5 B parameters, fp8 over 8 GPUs) and its
    latent KV cache of one layer more."""
    plain, mtp = _dsv3(8, None).memory, _dsv3(8, {"method": "mtp"}).memory
    extra = mtp.weights_bytes - plain.weights_bytes
    assert 1.2e9 < extra < 1.6e9  # ~11.5e9 bytes / 8
    assert mtp.kv_cache_bytes == pytest.approx(plain.kv_cache_bytes * 62 / 61, rel=0.01)


def _llama(batch: int, speculative: dict | None) -> object:
    w: dict[str, object] = {"task": "inference", "batch_size": batch, "context_length": 512, "output_tokens": 256}
    if speculative is not None:
        w["speculative"] = speculative
    return api.estimate({"model": {"preset": "llama-3.1-8b"}, "workload": w,
                         "hardware": {"gpu": "h100-sxm-80gb", "gpus": 1}}).inference


def test_speculation_helps_less_as_the_batch_grows() -> None:
    """The mechanism: at batch 1 the k + 1 verified tokens ride on the weights' read; at batch 256 the matmuls are
    compute-bound and pay for them (EAGLE-3 paper, arXiv 2503.01840: 'a 1.38x throughput improvement at a batch size
    of 64' in SGLang against a larger one at batch 1; the acceptance of those runs is not published, so the sizes are
    not checked here)."""
    spec = {"method": "eagle3", "draft_tokens": 3, "acceptance_length": 3.0}
    gains = [_llama(b, spec).aggregate_tokens_per_s / _llama(b, None).aggregate_tokens_per_s for b in (1, 16, 256)]
    assert gains[0] > gains[1] > gains[2]
    assert 2.3 < gains[0] < 3.0  # near the 3 tokens a step emits, less the head's passes


def test_what_has_no_published_default_is_asked_for() -> None:
    with pytest.raises(InputError) as err:
        _llama(1, {"method": "eagle3", "draft_tokens": 3})
    assert "acceptance" in str(err.value) and "workload.speculative" in str(err.value)
    with pytest.raises(InputError) as err:
        _llama(1, {"method": "ngram", "acceptance_length": 2.0})
    assert "draft_tokens" in str(err.value)
    with pytest.raises(InputError) as err:
        _llama(1, {"method": "mtp"})  # Llama 3.1 has no MTP modules
    assert "multi-token prediction" in str(err.value)
