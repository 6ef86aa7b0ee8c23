"""The serving model's solvers, held to what they replace: an objective checked from the CDF decides as the
bisected percentile does (Dist.exceeds)."""

from __future__ import annotations

import pytest

from gpuplan.core.sizing.queueing import Dist

def _dists() -> list[Dist]:
    out = []
    for mu in (0.02, 0.5, 3.0):
        for sd in (0.0, 1e-4, 0.01, 0.3):
            for p in (0.0, 1e-9, 0.05, 0.5, 0.95):
                for th in (0.0, 0.1, 2.0):
                    out.append(Dist(mu, sd * mu, p, th * mu))
    return out


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_exceeds_decides_as_the_bisected_quantile(q: float) -> None:
    """On targets far from, near (within the bisection's 1e-5) and at its answer; including the distributions whose
    bisection starts without a bracket (a rare long wait: it answers 0)."""
    checked = 0
    for d in _dists():
        got = d.quantile(q)
        for t in (0.0, 1e-6, 0.5 * d.mu, d.mu, 2 * d.mu + 1.0):
            assert d.exceeds(t, q) == (got > t), (d, q, t)
        for k in range(-40, 41):
            t = max(got, 1e-9) * (1 + k * 1e-6)
            assert d.exceeds(t, q) == (got > t), (d, q, t)
            checked += 1
    assert checked > 10_000


def test_a_rare_long_wait_keeps_the_bisections_answer() -> None:
    d = Dist(mu=0.5, sigma=0.01, p=1e-9, theta=0.3)
    lo, hi = d.bracket(0.9)
    assert hi < lo and d.quantile(0.9) == 0.0  # the old bisection's answer, which the search's decisions saw
    assert not d.exceeds(0.1, 0.9)
