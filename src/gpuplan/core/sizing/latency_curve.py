"""Latency against load (issue #29): a serving configuration's time to first token, inter-token latency and
end-to-end time at p50 and p90 (and the objectives' percentile) as the arrival rate rises from a light load to
beyond its capacity within the objectives. The same model the plan's figures come from: each point is
queueing.latency at that rate on the replica's engine, the rate shared evenly by the replicas (as the plan shares
its load), with the arrivals the project's load makes. Pure.

The rates: `POINTS` evenly spaced up to a top a quarter beyond the larger of the planned load and the capacity
(within 99 % of the rate the engine saturates at, where the waits grow without bound), with the planned load and
the capacity themselves among them, so the curve passes through the plan's own figures."""

from __future__ import annotations

from gpuplan.core.sizing.queueing import Dist, latency
from gpuplan.core.sizing.serving_load import Timing
from gpuplan.schema.serving import LatencyCurve, LatencyPoint, Objectives

#: evenly spaced rates on the curve (the planned load and the capacity are added to them)
POINTS = 24
#: the top rate drawn: this much beyond the larger of the planned load and the capacity
BEYOND = 1.25
#: and at most this share of the saturation rate
NEAR_SATURATION = 0.99


def curve_rates(planned: float, capacity: float, saturation: float, points: int = POINTS) -> list[float]:
    """The arrival rates of one virtual engine the curve is drawn at, ascending: `points` evenly spaced up to the
    top (BEYOND the larger of `planned` and `capacity`, below NEAR_SATURATION x `saturation`), with `planned` and
    `capacity` among them when the engine is stable there."""
    if saturation <= 0:
        return []
    ceiling = saturation * NEAR_SATURATION
    top = min(max(planned, capacity) * BEYOND, ceiling) if max(planned, capacity) > 0 else ceiling
    rates = {top * i / points for i in range(1, points)} | {top}
    rates |= {r for r in (planned, capacity) if 0 < r <= ceiling}
    return sorted(rates)


def _quantiles(d: Dist, percentiles: list[int]) -> dict[str, float]:
    """The percentiles of `d` by name, each at least the one below it (as the plan's Percentiles are)."""
    out: dict[str, float] = {}
    below = 0.0
    for q in percentiles:
        below = max(below, d.quantile(q / 100))
        out[f"p{q}"] = below
    return out


def latency_curve(t: Timing, obj: Objectives | None, points: int = POINTS) -> LatencyCurve:
    """The curve of the timed configuration `t` (its replicas sized under the objectives `obj`)."""
    sz = t.sizing
    rep = sz.rep
    e = rep.engine
    engines = sz.replicas * rep.pp  # the virtual engines the deployment's load is shared by
    cap = max(sz.capacity.rate, 0.0)
    pcts = sorted({50, 90} | ({obj.percentile} if obj is not None else set()))
    pts = []
    for r in curve_rates(t.rate, cap, rep.saturation, points):
        lat = latency(e, r)
        pts.append(LatencyPoint(requests_per_s=r * engines, ttft_s=_quantiles(lat.ttft, pcts),
                                itl_s=_quantiles(lat.itl, pcts), e2e_s=_quantiles(lat.e2e, pcts)))
    return LatencyCurve(percentiles=pcts, points=pts, planned_requests_per_s=t.rate * engines,
                        capacity_requests_per_s=cap * engines if cap > 0 else None,
                        saturation_requests_per_s=rep.saturation * engines, replicas=sz.replicas,
                        arrival="poisson" if e.poisson else "constant", objectives=obj)


__all__ = ["BEYOND", "NEAR_SATURATION", "POINTS", "curve_rates", "latency_curve"]
