"""Latencies of an engine's requests at a load, from its steady state (core/sizing/batching.py). Pure.

Time to first token = the rest of the step running when the request arrives + its wait for prefill (M/G/1,
Pollaczek-Khinchine: λE[S²]/2(1-ρ); Kingman's approximation for constant arrivals) + the steps that prefill its
prompt. End-to-end = that + (output - 1) steps. Percentiles: the wait is 0 with probability 1 - ρ, else
exponential (exact for M/M/1, the usual approximation for M/G/1); the rest is normal (the step's residual, the
prompt and output length spread, the share of mixed steps a request decodes through); their sum's CDF is closed
form (an exponentially modified Gaussian), inverted by bisection. The inter-token latency of a request is its mean
time per output token after the first (vLLM's TPOT): normal around the mean step.

Loads: an arrival rate (open), or a closed population of users with a think time, or a fixed concurrency (a
closed population without think time), both solved for the arrival rate they make (λ = N / (think + e2e(λ))).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

from gpuplan.core.sizing.batching import (
    Engine,
    State,
    decode_steps,
    saturation_rate,
    saturation_state,
    solve_state,
    state_at,
)

PERCENTILES = (50, 90, 99)
_SQRT2 = math.sqrt(2)
_NORMAL = NormalDist()


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / _SQRT2)


def _mean(mu: float, p: float, theta: float) -> float:
    """The mean of a latency (Dist): its normal part's, and the wait's chance times its mean."""
    return mu + p * theta


def _shrink(f: float, f_before: float) -> float:
    """Anderson-Björck's weight for the end false position keeps: 1 - f / f_before, else Illinois' 1/2."""
    m = 1 - f / f_before if f_before and math.isfinite(f) else 0.5
    return m if m > 0 else 0.5


@dataclass(frozen=True, slots=True)
class Dist:
    """A latency: normal(mu, sigma) + a wait that is 0 with probability 1 - p, else exponential of mean theta."""

    mu: float
    sigma: float
    p: float = 0.0
    theta: float = 0.0

    @property
    def mean(self) -> float:
        return _mean(self.mu, self.p, self.theta)

    def cdf(self, t: float) -> float:
        s, th = self.sigma, self.theta
        if s <= 0:
            base = 1.0 if t >= self.mu else 0.0
            tail = (1 - math.exp(-(t - self.mu) / th)) if th > 0 and t >= self.mu else base
        else:
            z = (t - self.mu) / s
            base = _phi(z)
            if th <= 0 or s / th > 30:
                tail = _phi((t - self.mu - th) / s)
            else:
                expo = -(t - self.mu) / th + s * s / (2 * th * th)
                tail = base - (math.exp(expo) * _phi(z - s / th) if expo < 700 else 0.0)
        return (1 - self.p) * base + self.p * tail if self.p > 0 else base

    def bracket(self, q: float) -> tuple[float, float]:
        """Where `quantile` starts its bisection: (8 sigma below the mean, above it by 8 sigma and the wait's tail
        beyond q). A bracket: the wait adds at least 2 theta. (A rare wait, p below 1 - q, once made the tail term
        negative: with theta far above sigma the upper end fell below the mean, and a light load's percentiles came
        out below its mean latency, e.g. an E2E p90 of 1.72 s for a mean of 2.94 s with sigma 3 ms; issue #29's
        prefix-caching property test found it.)"""
        lo = max(self.mu - 8 * self.sigma, 0.0)
        hi = self.mu + 8 * self.sigma + (self.theta * (max(math.log(self.p / (1 - q)), 0.0) + 2)
                                         if self.p > 0 and self.theta > 0 else 0.0) + 1e-12
        return lo, hi

    def exceeds(self, t: float, q: float) -> bool:
        """Whether quantile(q) > t (t >= 0), from the CDF at t and just below it, without the bisection unless t
        lies within its tolerance of the answer. The bisection keeps cdf(lo) < q <= cdf(hi) once it moves an
        end, and the CDF grows with t, so: cdf(t) < q puts every upper end it keeps above t; cdf(u) >= q, u a
        tolerance below t, puts every lower end below u and the answer (within 1e-5 of the lower end, or 2^-48
        of the bracket after 48 halvings) below t."""
        lo, hi = self.bracket(q)
        if not lo < hi:  # no bracket: the bisection's own answer (see `bracket`)
            return self.quantile(q) > t
        if hi <= t:  # the answer is at most max(hi, 0)
            return False
        if self.cdf(t) < q:
            return True
        u = min(t * (1 - 2e-5), t - (hi - lo) * 2.0 ** -46)
        if lo < u and self.cdf(u) >= q:
            return False
        return self.quantile(q) > t  # t within the bisection's tolerance of the answer

    def quantile(self, q: float) -> float:
        """The time q (0-1) of requests stay within: the upper end of a bisection of the CDF, to 1e-5. The CDF is
        evaluated only at the halvings that fall between the two ends `straddle` finds (almost none): the others are
        decided by which side of it they fall."""
        lo, hi = self.bracket(q)
        a, b = self.straddle(q, lo, hi)
        for _ in range(48):
            mid = (lo + hi) / 2
            if mid < a or (mid < b and self.cdf(mid) < q):
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-5 * hi:
                break
        return max(hi, 0.0)

    def straddle(self, q: float, lo: float, hi: float) -> tuple[float, float]:
        """(a, b), a < b, with cdf(a) < q <= cdf(b), from the CDF's values at a few points: the secant method from
        the normal's quantile (exact without a wait; the wait's tail shifts it) to where the CDF crosses q, then a
        billionth either side of it. (-inf, inf) where it knows nothing (no spread, or no bracket)."""
        a, b = -math.inf, math.inf
        if self.sigma <= 0 or not lo < hi:
            return a, b
        t = self.mu + self.sigma * _NORMAL.inv_cdf(q)
        if self.p > 0 and self.theta > 0:
            t += self.theta * max(math.log(self.p / (1 - q)), 0.0)
        t0, f0 = math.nan, math.nan
        t1 = min(max(t, lo), hi)
        for k in range(16):
            f1 = self.cdf(t1) - q
            if f1 < 0:
                a = max(a, t1)
            else:
                b = min(b, t1)
            if b - a <= 2e-9 * b < math.inf or k == 15:
                break
            if k == 0:  # a second point toward the crossing
                t2 = t1 + (1e-9 * max(t1, self.sigma) if self.p <= 0 else 0.1 * (self.sigma + self.theta)) * (
                    1 if f1 < 0 else -1)
            elif abs(t1 - t0) <= 1e-12 * abs(t1):  # converged: a billionth to the side still unknown
                t2 = t1 * (1 + 1e-9) if f1 < 0 else t1 * (1 - 1e-9)
            elif f1 != f0:
                t2 = t1 - f1 * (t1 - t0) / (f1 - f0)
            else:
                break
            if not lo <= t2 <= hi:
                break
            t0, f0, t1 = t1, f1, t2
        return a, b


@dataclass(frozen=True, slots=True)
class Latency:
    """An engine's requests at one arrival rate: the state and the three latencies."""

    state: State
    ttft: Dist
    itl: Dist
    e2e: Dist

    @property
    def concurrency(self) -> float:
        """Mean requests in flight (Little's law)."""
        return self.state.rate * self.e2e.mean


def _drift_var(e: Engine, s: State, window: float) -> float:
    """Variance of the mean step time over a request's lifetime (`window` seconds) from the load it sees: the
    arrivals in a lifetime are Poisson (relative spread about 1/sqrt(1 + λ·window)) and the step time follows the
    load with elasticity g / (1 - g), g = (x - x_idle) / x the share of the step the load adds. Constant arrivals:
    none."""
    if not e.poisson or s.rate <= 0 or s.step_s <= 0 or window <= 0:
        return 0.0
    idle = e.cost.seconds(0.0, 0.0, 0.0, 0.0)
    # the secant from no load of the step time's elasticity u G'(u) / G(u) (x = G(λx)): exact for a step time linear
    # in the load, and never falling as the load grows (the tangent jumps where the chunk count or the all-reduce
    # algorithm changes)
    gain = max(s.step_s - idle, 0.0) / s.step_s
    rel = gain / (1 - gain) / math.sqrt(1 + s.rate * window)  # (1 +: a lifetime with no other arrival adds none)
    return (rel * s.step_s) ** 2


def _terms(e: Engine, s: State, rate: float) -> tuple[float, float, float, float, float]:
    """(the mean rest of the step a request arrives in, its variance; the chance it waits for prefill and the mean
    of that wait; its own prefill) at state `s`: what every latency is made of."""
    x, m = s.step_s, s.mixed_share
    ex2 = (1 - m) * s.decode_s ** 2 + m * s.mixed_s ** 2
    ex3 = (1 - m) * s.decode_s ** 3 + m * s.mixed_s ** 3
    resid = ex2 / (2 * x) if x > 0 else 0.0
    resid_var = max(ex3 / (3 * x) - resid ** 2, 0.0) if x > 0 else 0.0
    rho = s.prefill_load
    if rho > 0 and s.service_s > 0:
        if e.poisson:
            wait = rate * s.service_s2 / (2 * (1 - rho))
        else:  # Kingman: no arrival spread, the service spread from the prompt lengths
            cs2 = max(s.service_s2 / s.service_s ** 2 - 1, 0.0)
            wait = rho / (1 - rho) * s.service_s * cs2 / 2
        p_wait, theta = rho, wait / rho
    else:
        p_wait = theta = 0.0
    return resid, resid_var, p_wait, theta, s.own_prefill_s or s.prefill_steps * s.mixed_s


def latency(e: Engine, rate: float, state: State | None = None, queued_s: float = 0.0) -> Latency:
    """The latencies of `e`'s requests at `rate` requests/s (a stable rate: see batching.saturation_rate).
    `queued_s`: a wait before the engine admits a request (a closed load beyond what it holds)."""
    s = state or solve_state(e, rate)
    x, m = s.step_s, s.mixed_share
    resid, resid_var, p_wait, theta, own = _terms(e, s, rate)
    own_sd = own * e.prompt_std / e.prompt if e.prompt > 0 else 0.0
    ttft = Dist(queued_s + resid + own, math.sqrt(resid_var + own_sd ** 2), p_wait, theta)
    dsteps = decode_steps(e)
    # mixed steps come in runs of `chunks` (one prompt's chunks back to back): the count a request decodes through
    # is a Poisson count of arrivals times the run length
    step_var = m * (1 - m) * s.prefill_steps * (s.mixed_s - s.decode_s) ** 2
    drift = _drift_var(e, s, dsteps * x + own)
    per = e.accepted  # tokens a step emits per request (speculative decoding; 1 without)
    itl = Dist(x / per if dsteps > 0 else 0.0, math.sqrt(step_var / dsteps + drift) / per if dsteps > 0 else 0.0)
    e2e_var = resid_var + own_sd ** 2 + (e.output_std * x / per) ** 2 + dsteps * step_var + dsteps ** 2 * drift
    e2e = Dist(queued_s + resid + own + dsteps * x, math.sqrt(e2e_var), p_wait, theta)
    return Latency(state=s, ttft=ttft, itl=itl, e2e=e2e)


def mean_e2e(e: Engine, s: State) -> float:
    """latency(e, s.rate, s).e2e.mean (no wait before admission) without the spreads: what a closed load's rate
    is solved with."""
    resid, _, p_wait, theta, own = _terms(e, s, s.rate)
    return _mean(0.0 + resid + own + decode_steps(e) * s.step_s, p_wait, theta)


@dataclass(frozen=True, slots=True)
class Load:
    """An engine under a closed load: the arrival rate it serves, the wait in front of it (the users beyond what
    it sustains) and its steady state there (None: it serves nothing)."""

    rate: float
    queued_s: float
    state: State | None


def _excess(e: Engine, s: State, users: float, think_s: float) -> float:
    """Requests in the loop at `s` beyond `users`: λ (think + e2e(λ)) - N, growing with the load."""
    return s.rate * (think_s + mean_e2e(e, s)) - users


def closed_rate(e: Engine, users: float, think_s: float, sat: float | None = None) -> Load:
    """The arrival rate `users` requests in a loop make, each the next `think_s` after its answer (λ = N / (think
    + e2e(λ))), and the state there. When they would ask for more than the engine sustains: its saturation rate,
    and the rest of them wait in front of it (Little's law: N / λ - think - e2e).

    Solved over the arrivals per step a = λx (batching.state_at), where each trial is one step time, not a fixed
    point: false position (Anderson-Björck) from no load to the saturation rate's a, to 1e-9 of the users."""
    top = saturation_rate(e) if sat is None else sat
    if top <= 0:
        return Load(rate=0.0, queued_s=0.0, state=None)
    hi = top * (1 - 1e-6)
    near = saturation_state(e)
    s_hi = near if near.rate == hi else solve_state(e, hi)
    short = _excess(e, s_hi, users, think_s)
    if short < 0 or s_hi.step_s <= 0:
        return Load(rate=hi, queued_s=max(-short / hi, 0.0), state=s_hi)
    lo, f_lo, a_hi, f_hi, side = 0.0, -users, hi * s_hi.step_s, short, 0
    for _ in range(100):
        a = (lo * f_hi - a_hi * f_lo) / (f_hi - f_lo)
        if not lo < a < a_hi:
            a = (lo + a_hi) / 2
        s = state_at(e, a)
        f = math.inf if s is None else _excess(e, s, users, think_s)
        if s is not None and abs(f) <= 1e-9 * users:
            return Load(rate=s.rate, queued_s=0.0, state=s)
        if f < 0:
            if side == 1:  # the same end twice: shrink the other's weight
                f_hi *= _shrink(f, f_lo)
            lo, f_lo, side = a, f, 1
        else:
            if side == -1:
                f_lo *= _shrink(f, f_hi)
            a_hi, f_hi, side = a, f, -1
        if a_hi - lo <= 1e-13 * a_hi:
            break
    mid = state_at(e, (lo + a_hi) / 2)
    return Load(rate=mid.rate, queued_s=0.0, state=mid) if mid is not None else Load(rate=hi, queued_s=0.0,
                                                                                         state=s_hi)


@dataclass(frozen=True, slots=True)
class Targets:
    """Objectives: each a time the `percentile` (0-100) of requests stay within, None when unconstrained."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None
    percentile: float = 90.0

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.itl_s, self.e2e_s))

    def missed(self, lat: Latency) -> str | None:
        """The first objective `lat` misses ("ttft", "itl", "e2e"), or None."""
        q = self.percentile / 100
        for name, target, dist in (("ttft", self.ttft_s, lat.ttft), ("itl", self.itl_s, lat.itl),
                                   ("e2e", self.e2e_s, lat.e2e)):
            if target is not None and dist.exceeds(target, q):
                return name
        return None


@dataclass(frozen=True, slots=True)
class Capacity:
    """The highest arrival rate within the objectives, what bounds it, and the latencies there (None at 0)."""

    rate: float
    bound: str
    at: Latency | None


@lru_cache(maxsize=4096)
def capacity(e: Engine, targets: Targets, max_utilization: float, sat: float | None = None) -> Capacity:
    """The highest arrival rate within the objectives: without objectives, `max_utilization` of the saturation
    rate. Latency grows with the rate, so the objectives are checked by bisection."""
    top = saturation_rate(e) if sat is None else sat
    if top <= 0:
        return Capacity(0.0, solve_state(e, 1e-9).bound or "kv-cache", None)
    if not targets.any:
        cap = top * max_utilization
        return Capacity(cap, solve_state(e, top * 1.0001).bound or "compute", latency(e, cap) if cap > 0 else None)
    hi = top * (1 - 1e-4)
    light = latency(e, 1e-9 * top)
    first = targets.missed(light)
    if first is not None:
        return Capacity(0.0, first, None)
    at_hi = latency(e, hi)
    bound = targets.missed(at_hi)
    if bound is None:
        return Capacity(hi, solve_state(e, top * 1.0001).bound or "compute", at_hi)
    lo, below = 0.0, light.state  # the last rate within them, whose state brackets the next one's
    for _ in range(40):
        mid = (lo + hi) / 2
        at = latency(e, mid, solve_state(e, mid, below))
        why = targets.missed(at)
        if why is None:
            lo, below = mid, at.state
        else:
            hi, bound = mid, why
        if hi - lo <= 5e-3 * hi:
            break
    return Capacity(lo, bound, latency(e, lo) if lo > 0 else None)  # as any caller solves it at that rate


__all__ = ["PERCENTILES", "Capacity", "Dist", "Latency", "Load", "Targets", "capacity", "closed_rate", "latency"]
