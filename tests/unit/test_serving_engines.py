"""workload.engine (issue 29): the engine's memory and scheduling semantics. `transformers` is Hugging Face
generate(): the whole batch prefilled at once and a full KV cache per sequence whatever the sliding window (checked
byte for byte against exact traces in tests/trace/test_estimate_vs_trace.py, the `engine transformers` cases);
`sglang` sizes its KV cache as mem_fraction_static of the GPU less the weights (its reserve for activations and CUDA
graphs from its chunked-prefill size), `tensorrt-llm` as free_gpu_memory_fraction of the memory the weights and the
step's buffers leave; every serving estimate states the memory to hold the load's requests in flight and the least
on which the engine starts."""

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


def _served(engine: str, gpu: str = "h100-sxm-80gb", **workload: object) -> tuple[object, object]:
    r = api.estimate({"model": {"preset": "llama-3.1-8b"},
                      "workload": {"task": "inference", "batch_size": 16, "context_length": 2048, "output_tokens": 256,
                                   "engine": engine, **workload},
                      "hardware": {"gpu": gpu, "gpus": 1}})
    return r.memory, r.inference


#: bytes of KV cache per token of Llama 3.1 8B in bf16: K and V, 32 layers, 8 KV heads of 128
KV_TOKEN = 2 * 32 * 8 * 128 * 2


def test_sglang_fills_mem_fraction_static_of_the_gpu_with_weights_and_kv() -> None:
    """SGLang on an H100 (79.6 GiB, 81,510 MiB) at tp 1 (server_args._handle_gpu_memory_settings): chunked prefill
    8192, CUDA graphs up to batch 256, reserve 512 + 8192 x 1.5 + 256 x 2 + 1/8 x 1024 = 13,440 MiB, so
    mem_fraction_static = (81,510 - 13,440) / 81,510 = 0.835; its KV cache is that share of the GPU less the weights
    and the CUDA context."""
    m, inf = _served("sglang")
    gpu = 81510.4 * 2**20
    outside = m.device_bytes - m.reserved_bytes
    kv_bytes = (81510.4 - 13440) / 81510.4 * gpu - m.weights_bytes - outside
    assert inf.kv_cache_tokens * KV_TOKEN == pytest.approx(kv_bytes, rel=1e-3)
    assert inf.max_num_batched_tokens == 8192 and inf.max_num_seqs == 2048 and inf.engine == "sglang"
    # the project's gpu_memory_utilization is SGLang's --mem-fraction-static itself
    _, inf80 = _served("sglang", gpu_memory_utilization=0.8)
    assert inf80.kv_cache_tokens * KV_TOKEN == pytest.approx(0.8 * gpu - m.weights_bytes - outside, rel=1e-3)


def test_tensorrt_llm_gives_its_kv_cache_a_fraction_of_the_free_memory() -> None:
    """free_gpu_memory_fraction 0.9 of what the weights and the step's buffers (8,192 tokens) leave."""
    m, inf = _served("tensorrt-llm")
    vllm, _ = _served("vllm")
    non_kv = vllm.device_bytes - vllm.kv_cache_bytes  # the same weights, buffers at 8,192 tokens, graphs, context
    assert inf.kv_cache_tokens * KV_TOKEN == pytest.approx(0.9 * (81510.4 * 2**20 - non_kv), rel=2e-3)
    assert inf.max_num_batched_tokens == 8192 and inf.max_num_seqs == 2048 and inf.engine == "tensorrt-llm"
    # the memory it leaves free is counted: the device total at a full cache is the whole GPU
    assert m.fits and m.headroom_bytes is not None and m.headroom_bytes >= 0


@pytest.mark.parametrize("gpu,budget", [("l40s-48gb", 4096), ("h100-sxm-80gb", 8192), ("h200-sxm-141gb", 8192),
                                        ("b200-180gb", 16384)])
def test_sglang_chunked_prefill_follows_the_gpu_memory(gpu: str, budget: int) -> None:
    """server_args: chunked_prefill_size 4096 under 60 GiB, 8192 under 160 GiB, 16384 above; the timing uses it."""
    m, inf = _served("sglang", gpu)
    assert inf.max_num_batched_tokens == budget
    _, fixed = _served("sglang", gpu, prefill_tokens=2048)  # the project's budget wins (--chunked-prefill-size)
    assert fixed.max_num_batched_tokens == 2048


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["sglang", "tensorrt-llm"]), st.integers(1, 512))
def test_the_engines_kv_cache_does_not_depend_on_the_load(engine: str, batch: int) -> None:
    """The pool is sized at start: what the KV cache holds does not follow the requests in flight (SGLang's reserve
    covers the step's buffers; TensorRT-LLM's free memory is taken beside buffers that grow a little with a small
    batch's prefill and its logits, as vLLM's), and the engine holds no more than the GPU."""
    _, a = _served(engine, batch_size=batch)
    _, b = _served(engine, batch_size=1)
    m, _ = _served(engine, batch_size=batch)
    if engine == "sglang":
        assert a.kv_cache_tokens == b.kv_cache_tokens
    else:
        assert a.kv_cache_tokens == pytest.approx(b.kv_cache_tokens, rel=0.02)
    assert max(m.device_bytes, m.load_device_bytes) <= 81510.4 * 2**20


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
    sg, trt = engine_defaults(sd, "sglang"), engine_defaults(sd, "tensorrt-llm")
    assert sg.pool == "static" and [t.chunked_prefill_tokens for t in sg.gpu_tiers] == [2048, 2048, 4096, 8192, 16384]
    assert trt.pool == "free" and trt.gpu_memory_utilization == 0.9 and trt.block_size_tokens == 32
    assert sd.engine.pool == "share"


@pytest.mark.parametrize("engine,command", [
    ("sglang", "python -m sglang.launch_server --model-path MODEL_ID --tp-size"),
    ("tensorrt-llm", "trtllm-serve MODEL_ID --tp_size")])
def test_exports_that_run_vllm_refuse_another_engine_and_give_its_command(engine: str, command: str) -> None:
    from gpuplan.core.export.common import engine_command
    from gpuplan.core.export.kubernetes import check_serving
    from gpuplan.schema.plan import Candidate
    from gpuplan.schema.project import Project

    project = Project.model_validate({"name": "svc", "model": {"preset": "llama-3.1-8b"},
                                      "workload": {"task": "inference", "engine": engine, "batch_size": 8,
                                                   "context_length": 2048, "output_tokens": 256}})
    plan = api.plan(project.model_dump(mode="json", exclude_none=True))
    c = plan.candidates[0]
    assert isinstance(c, Candidate)
    line = engine_command(project.workload, c, "MODEL_ID")
    assert line is not None and line.startswith(command) and "2304" in line  # the context: prompt + output
    with pytest.raises(InputError) as err:
        check_serving(project, c, "kserve and lws manifests")
    assert "run vLLM" in str(err.value) and command in str(err.value)
