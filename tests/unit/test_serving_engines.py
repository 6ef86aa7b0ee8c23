"""workload.engine (issue 29): the engine's memory and scheduling semantics. `transformers` is Hugging Face
generate(): the whole batch prefilled at once and a full KV cache per sequence whatever the sliding window (checked
byte for byte against exact traces in tests/trace/test_estimate_vs_trace.py, the `engine transformers` cases);
`sglang` and `tensorrt-llm` are refused with their sourced pools; every serving estimate states the memory to hold
the load's requests in flight and the least on which the engine starts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import api
from gpuplan.catalog.serving import load_serving
from gpuplan.core.sizing.engines import engine_defaults
from gpuplan.errors import InputError
from gpuplan.units import GIB


def _project(engine: str | None, batch: int = 8, context: int = 32768, **workload: object) -> dict:
    w: dict[str, object] = {"task": "inference", "batch_size": batch, "context_length": context, "output_tokens": 1,
                            **workload}
    if engine is not None:
        w["engine"] = engine
    return {"model": {"preset": "mistral-7b"}, "workload": w, "hardware": {"gpu": "h200-sxm-141gb", "gpus": 1}}


def test_generate_keeps_every_token_and_prefills_the_whole_batch() -> None:
    """The issue's case: Mistral-7B, 8 x 32k. vLLM's estimate caps the sliding-window cache at 4,096 tokens and
    prefills 8,192 tokens per step (18.9 GiB); generate() keeps all 32,768 tokens of every layer and prefills the
    262,144 tokens at once with the explicit sliding-window mask (the trace: 76.51 GiB)."""
    vllm = api.estimate(_project(None)).memory
    hf = api.estimate(_project("transformers")).memory
    assert vllm.peak_tensor_bytes / GIB == pytest.approx(18.9, abs=0.1)
    assert hf.peak_tensor_bytes / GIB == pytest.approx(76.51, rel=0.02)
    # K and V, 32 layers, 8 KV heads of 128, bf16, every prompt token (+ the one output token) of every sequence
    assert hf.kv_cache_bytes == pytest.approx(2 * 32 * 8 * (32768 + 1) * 8 * 128 * 2, rel=1e-6)
    assert vllm.kv_cache_bytes < hf.kv_cache_bytes / 7  # the window's 4,096 tokens (in 16-token blocks)


def test_the_engine_is_named_in_the_figures_and_the_assumptions() -> None:
    inf = api.estimate(_project("transformers")).inference
    assert inf is not None and inf.engine == "transformers"
    assert inf.max_num_batched_tokens == 8 * 32768 and inf.max_num_seqs == 8
    assert "generate()" in inf.assumptions[0]
    default = api.estimate(_project(None)).inference
    assert default is not None and default.engine == "vllm" and default.max_num_batched_tokens == 8192


def test_both_memory_figures_are_stated() -> None:
    """In flight: every request the load keeps per replica held at once; start: one request."""
    m = api.estimate(_project("transformers")).memory
    assert m.in_flight_requests == 8
    assert m.in_flight_bytes is not None and m.start_bytes is not None
    assert m.start_bytes < m.in_flight_bytes
    one = api.estimate(_project("transformers", batch=1)).memory
    assert one.in_flight_bytes == m.start_bytes == one.start_bytes  # a batch of one is the least it starts on
    # vLLM with more requests in flight than its KV cache holds: the in-flight figure is above what it holds
    r = api.estimate({"model": {"preset": "llama-3.1-70b"},
                      "workload": {"task": "inference", "batch_size": 64, "context_length": 8192,
                                   "output_tokens": 512},
                      "hardware": {"gpu": "h100-sxm-80gb", "gpus": 4, "layout": {"tp": 4}}})
    assert r.memory.in_flight_bytes is not None and r.memory.start_bytes is not None
    assert r.memory.start_bytes < r.memory.device_bytes < r.memory.in_flight_bytes


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 16), st.integers(1, 16), st.sampled_from([512, 4096, 8192]))
def test_in_flight_memory_grows_with_the_batch_and_start_memory_does_not(a: int, b: int, context: int) -> None:
    lo, hi = sorted((a, b))
    m_lo = api.estimate(_project("transformers", batch=lo, context=context)).memory
    m_hi = api.estimate(_project("transformers", batch=hi, context=context)).memory
    assert m_lo.in_flight_bytes is not None and m_hi.in_flight_bytes is not None
    assert m_lo.in_flight_bytes <= m_hi.in_flight_bytes
    assert m_lo.start_bytes == m_hi.start_bytes


@pytest.mark.parametrize("engine,words", [("sglang", "mem-fraction-static"),
                                          ("tensorrt-llm", "free_gpu_memory_fraction")])
def test_engines_not_modelled_are_refused_with_their_source(engine: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        api.estimate(_project(engine))
    msg = str(err.value)
    assert "workload.engine" in msg and "not modelled yet" in msg and words in msg and "source:" in msg


@pytest.mark.parametrize("key,value", [("arrival_rate", 2.0), ("users", 10), ("prefill_tokens", 8192)])
def test_generate_refuses_what_it_does_not_do(key: str, value: object) -> None:
    with pytest.raises(InputError) as err:
        api.estimate(_project("transformers", batch=1, **{key: value}))
    assert f"workload.{key}" in str(err.value) and "generate()" in str(err.value)


def test_a_training_project_refuses_an_engine() -> None:
    with pytest.raises(InputError) as err:
        api.estimate({"model": {"preset": "mistral-7b"}, "workload": {"task": "full-finetune", "engine": "vllm"}})
    assert "workload.engine" in str(err.value)


def test_engine_defaults_change_only_what_the_row_says() -> None:
    sd = load_serving()
    hf = engine_defaults(sd, "transformers")
    assert hf.id == "transformers" and hf.paged is False and hf.gpu_memory_utilization == 1.0
    assert hf.cuda_graph_gib == 0.0 and hf.block_size_tokens == 1
    assert hf.max_num_seqs_large == sd.engine.max_num_seqs_large  # left out of the row: vLLM's
    assert engine_defaults(sd, None) is sd.engine and engine_defaults(sd, "vllm") is sd.engine
    for row in sd.engines.values():
        assert row.source and row.as_of
