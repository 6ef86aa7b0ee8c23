"""Prefix caching (workload.prefix_cache, issue #29) on a grid of built-in models, GPUs, layouts, lengths and
loads: a higher hit rate never lowers the capacity within the objectives nor the saturation rate, and never raises
the time to first token at the same load; a shared prefix never holds more KV cache than each request's own.

The comparison holds across chunk boundaries too: the engine counts the steps a prompt's prefill spreads over as a
continuous number (core/sizing/batching.py), so a hit rate that removes a chunk no longer costs a few per cent
(before, 8,180-token prompts of Llama 3.1 8B on one H100 had a mean TTFT of 0.353 s at 2 requests/s and 8,192-token
ones 0.339 s, and this test skipped such draws)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import load_overheads
from gpuplan.core.sizing.batching import solve_state
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.queueing import latency
from gpuplan.core.sizing.serving import build_replica, size_replicas
from gpuplan.core.sizing.serving_load import Replica
from gpuplan.core.sizing.serving_memory import estimate_inference
from gpuplan.schema.project import Layout, PrefixCache, Slo, Workload

from .test_latency_curve import GPUS, MODELS, SERVING, SM, _fits, arch  # the same serving cases

OVERHEADS = load_overheads()
#: the steady state is solved to 1e-7 of its step time (core/sizing/batching.py) and the queue amplifies that near
#: saturation: a hit rate of 1e-5 against none moved TTFT's mean 3.2e-6 up (Llama 3.1 8B, one H100, 8,192-token
#: prompts, seed 123), noise far under what the hit rate itself changes
TOL = 1e-5


def replica(model: str, gpu: str, tp: int, w: Workload) -> Replica:
    a = arch(model)
    return build_replica(a, count_params(a), w, Layout(tp=tp), builtin_catalog().gpus.rows[gpu], SM, SERVING, node=8,
                         reserved_bytes=None)


CASES = st.tuples(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from([1, 2, 4, 8]),
                  st.sampled_from([256, 2048, 8192, 32768]), st.sampled_from([16, 256, 1024]),
                  st.sampled_from([0.0, 0.5]), st.booleans())
SLOS = st.one_of(st.none(), st.builds(lambda tt, itl: Slo(ttft_s=tt, itl_s=itl), st.floats(0.1, 5.0),
                                      st.floats(0.01, 0.2)),
                 st.builds(lambda e2e: Slo(e2e_s=e2e), st.floats(2.0, 120.0)))


@settings(max_examples=80, deadline=None)
@given(CASES, st.floats(0.0, 0.95), st.floats(0.0, 0.95), st.floats(0.05, 0.95), SLOS)
def test_a_higher_hit_rate_never_lowers_capacity_nor_raises_ttft(case: tuple, h1: float, h2: float, load: float,
                                                                 slo: Slo | None) -> None:
    model, gpu, tp, prompt, out, spread, shared = case
    if not _fits(model, gpu, tp):
        return
    lo, hi = sorted((h1, h2))

    def workload(h: float) -> Workload:
        return Workload(task="inference", context_length=prompt, output_tokens=out, arrival_rate=1.0, slo=slo,
                        prompt_tokens_std=spread * prompt, prefix_cache=PrefixCache(hit_rate=h, shared=shared))

    r_lo, r_hi = replica(model, gpu, tp, workload(lo)), replica(model, gpu, tp, workload(hi))
    assert r_hi.saturation >= r_lo.saturation * (1 - 1e-4), (case, lo, hi)  # the bisection's tolerance
    cap_lo = size_replicas(r_lo, workload(lo), 1, SERVING).capacity.rate
    cap_hi = size_replicas(r_hi, workload(hi), 1, SERVING).capacity.rate
    assert cap_hi >= cap_lo * (1 - 5e-3), (case, lo, hi, slo)  # queueing.capacity's bisection stops within 0.5 %
    if r_lo.saturation <= 0:
        return
    rate = load * r_lo.saturation  # the same load on both: stable on the cheaper engine too
    a, b = latency(r_lo.engine, rate), latency(r_hi.engine, rate)
    assert b.ttft.mean <= a.ttft.mean * (1 + TOL), (case, lo, hi, a.state.chunks, b.state.chunks)
    for q in (0.5, 0.9, 0.99):
        assert b.ttft.quantile(q) <= a.ttft.quantile(q) * (1 + 1e-4) + 1e-9, (case, lo, hi, q)


def chunks(r: Replica, rate: float) -> int:
    return solve_state(r.engine, rate).chunks


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([512, 4096]), st.integers(2, 64), st.floats(0.05, 0.95))
def test_a_shared_prefix_is_held_once(model: str, prompt: int, batch: int, h: float) -> None:
    a, engine = arch(model), SERVING.engine
    base = Workload(task="inference", context_length=prompt, output_tokens=128, batch_size=batch)

    def kv(pc: PrefixCache | None) -> float:
        w = base.model_copy(update={"prefix_cache": pc})
        return estimate_inference(a, count_params(a), w, Layout(tp=1), 1, OVERHEADS, engine).breakdown.kv_cache_bytes

    own, shared, none = kv(PrefixCache(hit_rate=h, shared=False)), kv(PrefixCache(hit_rate=h)), kv(None)
    assert own == none  # each request's own earlier turns: held by each
    assert shared <= own
    cached = int(h * prompt) // engine.block_size_tokens * engine.block_size_tokens
    if cached:  # (batch - 1) copies of the prefix saved
        assert shared < own
        per_token = none / batch / (-(-(prompt + 128) // 16) * 16)
        assert own - shared == pytest.approx(per_token * cached * (batch - 1), rel=1e-9)
