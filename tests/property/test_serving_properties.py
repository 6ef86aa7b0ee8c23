"""Invariants of the serving model (core/sizing/serving.py over batching.py and queueing.py), on a grid of
built-in models (8B to 70B), GPUs (1 to 8, tensor parallel), loads (1 to 256 requests in flight, or an arrival
rate) and prompts (short and long): Little's law, ordered percentiles, latency that never falls with more load,
and a fixed batch_size giving the same figures as its equivalent arrival rate."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_presets, load_speed_model
from gpuplan.catalog.serving import load_serving
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.serving import estimate_inference_speed
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import InferenceSpeed

SM = load_speed_model()
MODELS = ["llama-3.1-8b", "qwen2.5-14b", "llama-3.1-70b"]
GPUS = ["h100-sxm-80gb", "a100-sxm-80gb", "l40s-48gb"]


@cache
def arch(name: str) -> ModelArch:
    return arch_from_hf_config(load_presets()[name].config)


def serve(model: str, gpu: str, tp: int, w: Workload, replicas: int = 1) -> InferenceSpeed:
    a = arch(model)
    r = estimate_inference_speed(a, count_params(a), w, Layout(tp=tp), tp * replicas, builtin_catalog().gpus.rows[gpu],
                                 SM, serving=load_serving())
    assert r.inference is not None
    return r.inference


CASES = st.tuples(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from([1, 2, 4, 8]),
                  st.sampled_from([256, 2048, 8192]), st.sampled_from([64, 512]))


def _fits(model: str, gpu: str, tp: int) -> bool:
    a = arch(model)
    return count_params(a).total * 2 / tp < builtin_catalog().gpus.rows[gpu].memory_gib * 2**30 * 0.8


@settings(max_examples=50, deadline=None)
@given(CASES, st.integers(1, 256), st.sampled_from([1, 2]))
def test_littles_law_and_ordered_percentiles(case: tuple[str, str, int, int, int], batch: int, replicas: int) -> None:
    model, gpu, tp, prompt, out = case
    if not _fits(model, gpu, tp) or tp * replicas > 8:
        return
    inf = serve(model, gpu, tp, Workload(task="inference", batch_size=batch, context_length=prompt,
                                         output_tokens=out), replicas)
    assert abs(inf.concurrency - inf.requests_per_s * inf.request_latency_s) <= 0.02 * inf.concurrency
    assert abs(inf.concurrency - batch * replicas) <= 0.02 * batch * replicas  # batch_size is per replica
    for p in (inf.ttft_s, inf.itl_s, inf.e2e_s):
        assert p is not None and 0 <= p.p50 <= p.p90 <= p.p99
    assert inf.aggregate_tokens_per_s == inf.requests_per_s * out


@settings(max_examples=40, deadline=None)
@given(CASES, st.floats(0.01, 0.9), st.floats(1.05, 3.0))
def test_more_load_never_lowers_latency(case: tuple[str, str, int, int, int], share: float, more: float) -> None:
    model, gpu, tp, prompt, out = case
    if not _fits(model, gpu, tp):
        return
    base = Workload(task="inference", context_length=prompt, output_tokens=out, arrival_rate=1e-3)
    cap = serve(model, gpu, tp, base)
    top = cap.capacity_requests_per_s or 0.0
    if top <= 0:
        return
    lo = serve(model, gpu, tp, base.model_copy(update={"arrival_rate": share * top}))
    hi = serve(model, gpu, tp, base.model_copy(update={"arrival_rate": min(share * more, 0.99) * top}))
    assert lo.ttft_s and hi.ttft_s and lo.itl_s and hi.itl_s and lo.e2e_s and hi.e2e_s
    for a, b in ((lo.request_latency_s, hi.request_latency_s), (lo.time_to_first_token_s, hi.time_to_first_token_s),
                 *((getattr(lo.ttft_s, q), getattr(hi.ttft_s, q)) for q in ("p50", "p90", "p99")),
                 *((getattr(lo.itl_s, q), getattr(hi.itl_s, q)) for q in ("p50", "p90", "p99")),
                 *((getattr(lo.e2e_s, q), getattr(hi.e2e_s, q)) for q in ("p50", "p90", "p99"))):
        assert b >= a * (1 - 1e-6)


@settings(max_examples=40, deadline=None)
@given(CASES, st.integers(1, 256))
def test_batch_size_equals_its_arrival_rate(case: tuple[str, str, int, int, int], batch: int) -> None:
    """A fixed concurrency is the arrival rate it makes; beyond what the engine holds (its saturation) the rest
    wait in front of it, which an open load at that rate does not (it would be unstable)."""
    model, gpu, tp, prompt, out = case
    if not _fits(model, gpu, tp):
        return
    w = Workload(task="inference", batch_size=batch, context_length=prompt, output_tokens=out)
    fixed = serve(model, gpu, tp, w)
    # a request arrives as one leaves: evenly spaced, `arrival: constant`
    rate = serve(model, gpu, tp, w.model_copy(update={"arrival_rate": fixed.requests_per_s, "arrival": "constant"}))
    assert rate.requests_per_s == pytest.approx(fixed.requests_per_s, rel=1e-6)
    queue = fixed.time_to_first_token_s - rate.time_to_first_token_s
    # saturated: the same engine, with a queue in front of it (not saturated, the two states agree to the open
    # load's fixed point, 1e-7: the closed load's is exact, batching.state_at)
    if queue > 1e-6 * fixed.time_to_first_token_s:
        assert fixed.request_latency_s - rate.request_latency_s == pytest.approx(queue, rel=1e-6)
        assert fixed.itl_s == rate.itl_s
        return
    assert rate.request_latency_s == pytest.approx(fixed.request_latency_s, rel=0.01)
    assert rate.concurrency == pytest.approx(fixed.concurrency, rel=0.01)
    for a, b in ((rate.ttft_s, fixed.ttft_s), (rate.itl_s, fixed.itl_s), (rate.e2e_s, fixed.e2e_s)):
        assert a is not None and b is not None
        assert (a.p50, a.p90, a.p99) == pytest.approx((b.p50, b.p90, b.p99), rel=0.01)


def test_every_builtin_serving_example_holds_littles_law() -> None:
    from importlib import resources

    import yaml

    from gpuplan import api

    names = [p.name for p in resources.files("gpuplan.examples").iterdir() if p.name.endswith(".yaml")]
    served = 0
    for name in names:
        project = yaml.safe_load(resources.files("gpuplan.examples").joinpath(name).read_text())
        if project["workload"]["task"] != "inference":
            continue
        inf = api.estimate(project).inference
        assert inf is not None and inf.ttft_s is not None and inf.e2e_s is not None and inf.itl_s is not None
        assert abs(inf.concurrency - inf.requests_per_s * inf.request_latency_s) <= 0.02 * inf.concurrency, name
        for p in (inf.ttft_s, inf.itl_s, inf.e2e_s):
            assert 0 <= p.p50 <= p.p90 <= p.p99, name
        served += 1
    assert served >= 1
