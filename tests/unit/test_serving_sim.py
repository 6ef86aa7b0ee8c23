"""The analytic steady state of the continuous-batching engine (core/sizing/batching.py, queueing.py) against a
discrete-event simulation of the same engine (core/sizing/serving_sim.py) on a grid of cases: an 8B-class model on
one H100-class GPU, short and medium prompts, 30 % and 60 % of the saturation rate, Poisson arrivals."""

from __future__ import annotations

import pytest

from gpuplan.core.sizing.batching import Engine, StepCost, saturation_rate
from gpuplan.core.sizing.queueing import latency
from gpuplan.core.sizing.serving_sim import Rng, percentile, simulate

#: per-GPU rates of Llama-3.1-8B in bf16 on an H100 SXM (weights 16 GB at 2.7 TB/s, 128 KiB of KV per token)
COST = StepCost(weights_s=6e-3, kv_s_per_token=4.9e-8, decode_flop_s=1.9e-5, prefill_flop_s=1.9e-5,
                attn_s_per_pair=7e-10, fixed_s=2.1e-3)
GRID = [(512, 128, 0, 0, 0.3), (512, 128, 0, 0, 0.6), (2048, 256, 500, 100, 0.3), (2048, 256, 500, 100, 0.6),
        (1024, 64, 200, 20, 0.6), (256, 512, 0, 100, 0.6)]


def _mean(v: list[float]) -> float:
    return sum(v) / len(v)


@pytest.mark.parametrize("prompt,output,p_sd,o_sd,load", GRID)
def test_analytic_equals_simulation(prompt: int, output: int, p_sd: int, o_sd: int, load: float) -> None:
    e = Engine(cost=COST, budget=8192, max_seqs=1024, kv_tokens=400_000, prompt=prompt, output=output,
               prompt_std=p_sd, output_std=o_sd)
    rate = load * saturation_rate(e)
    lat = latency(e, rate)
    sim = simulate(e, rate=rate, requests=1200, seed=7)
    assert sim.preemptions == 0
    # throughput and the mean times: within a few per cent
    assert sim.rate == pytest.approx(rate, rel=0.08)
    assert lat.e2e.mean == pytest.approx(_mean(sim.e2e), rel=0.08)
    assert lat.itl.mean == pytest.approx(_mean(sim.itl), rel=0.08)
    assert lat.concurrency == pytest.approx(sim.concurrency, rel=0.15)
    # the first token is short and noisy: within 20 %, or a step
    assert abs(lat.ttft.mean - _mean(sim.ttft)) <= max(0.2 * _mean(sim.ttft), lat.state.step_s)
    # the end-to-end percentiles
    for q in (50, 90):
        assert lat.e2e.quantile(q / 100) == pytest.approx(percentile(sim.e2e, q), rel=0.12), q


def test_simulation_preempts_when_the_kv_cache_runs_out() -> None:
    e = Engine(cost=COST, budget=8192, max_seqs=1024, kv_tokens=6_000, prompt=512, output=512)
    sim = simulate(e, rate=20.0, requests=300, seed=3)
    assert sim.preemptions > 0
    assert not latency(e, 20.0).state.stable or saturation_rate(e) < 20.0


def test_rng_is_seeded_and_uniform() -> None:
    a, b = Rng(5), Rng(5)
    xs = [a.random() for _ in range(2000)]
    assert xs == [b.random() for _ in range(2000)]
    assert 0.47 < _mean(xs) < 0.53 and min(xs) >= 0 and max(xs) < 1


CLOSED = [(512, 128, 16, 0.0), (2048, 256, 32, 0.0), (512, 128, 64, 0.0), (512, 128, 64, 2.0), (2048, 256, 64, 5.0)]


@pytest.mark.parametrize("prompt,output,users,think", CLOSED)
def test_closed_loads_equal_simulation(prompt: int, output: int, users: int, think: float) -> None:
    """A fixed concurrency (users who do not think: evenly spaced arrivals) and users who think (Poisson): the
    arrival rate they make and their latencies, against the simulation of the same users (30 % length spread)."""
    from gpuplan.core.sizing.queueing import closed_rate

    e = Engine(cost=COST, budget=8192, max_seqs=1024, kv_tokens=400_000, prompt=prompt, output=output,
               prompt_std=0.3 * prompt, output_std=0.3 * output, poisson=think > 0)
    load = closed_rate(e, users, think)
    rate = load.rate
    lat = latency(e, rate, load.state, queued_s=load.queued_s)
    sim = simulate(e, users=users, think_s=think, requests=1200, seed=5)
    assert rate == pytest.approx(sim.rate, rel=0.1)
    assert lat.e2e.mean == pytest.approx(_mean(sim.e2e), rel=0.08)
    assert lat.itl.mean == pytest.approx(_mean(sim.itl), rel=0.08)
    assert lat.e2e.quantile(0.9) == pytest.approx(percentile(sim.e2e, 90), rel=0.1)


@pytest.mark.parametrize("poisson", [True, False])
def test_tensor_parallel_and_constant_arrivals_equal_simulation(poisson: bool) -> None:
    """A 70B-class replica at tp 4 (weights and KV per GPU, 160 all-reduces a step) at 50 % of saturation."""
    from dataclasses import replace

    from gpuplan.core.sizing.tp_comm import AllReduce

    ar = AllReduce(tp=4, kind="nvlink", latency=8.2e-6, per_byte=3.05e-11, nccl_latency=2.5e-5,
                   ring_per_byte=1.5 / 360e9)
    cost = replace(COST, weights_s=13e-3, kv_s_per_token=3e-8, decode_flop_s=4.6e-8 * 4, prefill_flop_s=4.6e-8 * 4,
                   allreduces=160, allreduce_bytes_per_token=8192 * 2, allreduce=ar)
    e = Engine(cost=cost, budget=8192, max_seqs=1024, kv_tokens=300_000, prompt=1024, output=256,
               prompt_std=300, output_std=60, poisson=poisson)
    rate = 0.5 * saturation_rate(e)
    lat = latency(e, rate)
    sim = simulate(e, rate=rate, requests=1000, seed=11)
    assert lat.e2e.mean == pytest.approx(_mean(sim.e2e), rel=0.08)
    assert lat.itl.mean == pytest.approx(_mean(sim.itl), rel=0.08)
    assert lat.e2e.quantile(0.9) == pytest.approx(percentile(sim.e2e, 90), rel=0.12)
