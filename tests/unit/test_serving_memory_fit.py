"""Serving memory "fits" as an engine allocates it: the engine takes its share of each GPU, starts when the weights,
workspace, CUDA graphs and one request's KV cache fit it, admits the requests its KV cache holds and queues the
rest. `memory.fits` is `headroom_bytes >= 0`; the KV capacity is `inference.kv_cache_tokens`/`kv_cache_requests`;
a `kv-cache-full` warning says when the load keeps more in flight. The plan search applies the same rule. Also the
step cost as a sum of its kernels' rooflines (core/sizing/batching.py)."""

from __future__ import annotations

import math

import pytest

from gpuplan import api
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_activation_table, load_overheads, load_presets
from gpuplan.catalog.serving import load_serving
from gpuplan.core.search.shapes import inference_configs
from gpuplan.core.sizing.batching import StepCost
from gpuplan.core.sizing.engine_memory import (
    admitted_memory,
    estimate_serving_memory,
    serving_layout,
    serving_start_bytes,
)
from gpuplan.core.sizing.params import count_params
from gpuplan.schema.project import Layout, Workload
from gpuplan.units import GIB

SD = load_serving()
L70 = arch_from_hf_config(load_presets()["llama-3.1-70b"].config)
P70 = count_params(L70)
H100 = 79.6 * GIB


def _serving(gpu: str, gpus: int, tp: int, batch: int, context: int = 8192) -> dict:
    return {"model": {"preset": "llama-3.1-70b"},
            "workload": {"task": "inference", "batch_size": batch, "context_length": context, "output_tokens": 512,
                         "weights_dtype": "bf16"},
            "hardware": {"gpu": gpu, "gpus": gpus, "layout": {"tp": tp}}}


def test_a_load_beyond_the_kv_cache_fits_and_queues_with_a_warning() -> None:
    r = api.estimate(_serving("h100-sxm-80gb", 4, 4, 64))
    inf = r.inference
    assert inf is not None
    assert r.memory.fits is True and r.memory.headroom_bytes is not None and r.memory.headroom_bytes >= 0
    holds = inf.kv_cache_requests
    assert 40 < holds < 64  # the KV cache holds fewer than the 64 in flight
    # the breakdown holds what the engine admits: whole requests, less than one request's KV left over
    per_request = r.memory.kv_cache_bytes / math.floor(holds)
    assert r.memory.headroom_bytes < per_request
    notes = [n for n in r.notes if n.code == "kv-cache-full"]
    assert (len(notes) == 1 and notes[0].severity == "warning"
            and f"holds {math.floor(holds)} request" in notes[0].message)
    assert inf.concurrency == pytest.approx(64, rel=0.02)  # the rest wait in the queue


def test_a_load_the_kv_cache_holds_has_no_warning_and_its_own_kv() -> None:
    r = api.estimate(_serving("h100-sxm-80gb", 4, 4, 8))
    assert r.memory.fits is True and r.memory.headroom_bytes is not None
    assert not [n for n in r.notes if n.code == "kv-cache-full"]
    one = api.estimate(_serving("h100-sxm-80gb", 4, 4, 1)).memory.kv_cache_bytes
    assert r.memory.kv_cache_bytes == pytest.approx(8 * one, rel=1e-6)
    assert r.memory.headroom_bytes > 0


def test_an_engine_that_cannot_hold_one_request_does_not_fit() -> None:
    r = api.estimate(_serving("h100-sxm-80gb", 1, 1, 4))  # 141 GB of bf16 weights on one 80 GB GPU
    assert r.memory.fits is False and r.memory.headroom_bytes is not None and r.memory.headroom_bytes < 0
    assert not [n for n in r.notes if n.code == "kv-cache-full"]


def test_fits_is_headroom_not_negative() -> None:
    for gpus, tp, batch in ((2, 2, 64), (4, 4, 200), (8, 8, 16), (1, 1, 1)):
        m = api.estimate(_serving("h100-sxm-80gb", gpus, tp, batch)).memory
        assert m.fits == (m.headroom_bytes is not None and m.headroom_bytes >= 0)


def test_admitted_memory_caps_the_kv_at_the_requests_the_share_holds() -> None:
    oh = load_overheads()
    w = Workload(task="inference", batch_size=64, context_length=8192, output_tokens=512)
    cap = int(H100 * 0.9)
    full = estimate_serving_memory(L70, P70, w, Layout(tp=4), 4, oh, SD.engine)
    mem, holds = admitted_memory(L70, P70, w, Layout(tp=4), 4, oh, SD.engine, cap)
    assert full.device_bytes > cap >= mem.device_bytes
    assert 1 <= holds < 64
    start = serving_start_bytes(L70, P70, w, Layout(tp=4), 4, oh, SD.engine)
    assert start < mem.device_bytes <= cap


def test_estimate_layout_prefers_holding_the_load_else_the_smallest_that_starts() -> None:
    oh = load_overheads()
    usable = int(H100 * 0.9)
    w = Workload(task="inference", batch_size=64, context_length=8192, output_tokens=512)
    # on 8 GPUs tp 8 holds 64 requests of 8k; on 2, tp 2 only starts, and is what estimate takes
    assert serving_layout(L70, P70, w, 8, usable, oh, SD.engine) == Layout(tp=8)
    assert serving_layout(L70, P70, w, 2, usable, oh, SD.engine) == Layout(tp=2)


def test_the_search_judges_a_replica_by_whether_its_engine_starts() -> None:
    oh = load_overheads()
    w = Workload(task="inference", batch_size=256, context_length=8192, output_tokens=512)
    configs = inference_configs(L70, P70, w, 8, 8, load_activation_table(), oh, SD.engine)
    for c in configs:
        assert c.device_bytes == serving_start_bytes(L70, P70, c.workload, c.layout, c.layout.tp * c.layout.pp, oh,
                                                     SD.engine)
    tp2 = next(c for c in configs if c.layout == Layout(tp=2))
    assert tp2.device_bytes < int(H100 * 0.9)  # starts, though its KV cache holds far fewer than 64 of 8k


def test_a_step_is_the_sum_of_its_kernels_rooflines() -> None:
    # 1 ms of weights, 1 ms of KV cache, 5 ms of prefill matmuls: the matmuls do not hide the KV read
    c = StepCost(weights_s=1e-3, kv_s_per_token=1e-6, decode_flop_s=1e-6, prefill_flop_s=5e-3 / 4096)
    assert c.seconds(0.0, 4096.0, 1000.0, 0.0) == pytest.approx(5e-3 + 1e-3)
    # decoding alone: weights read, then the KV read
    assert c.seconds(10.0, 0.0, 1000.0, 0.0) == pytest.approx(1e-3 + 1e-3)
