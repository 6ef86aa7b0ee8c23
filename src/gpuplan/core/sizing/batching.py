"""The steady state of a continuous-batching serving engine (vLLM's V1 scheduler), analytically. Pure.

Each engine step runs every decoding request one token and fills the rest of a token budget
(`max_num_batched_tokens`) with prefill chunks of waiting requests, first come first served, up to
`max_num_seqs` requests and the KV blocks allocated. A step's time is the sum of its kernels' rooflines: the linear
layers (the weights read, or their FLOPs) and the attention (the KV cache of its requests read, or its FLOPs),
plus the kernels' floor (CUDA-graph replay) and the tensor-parallel all-reduces (`StepCost`).

At an arrival rate λ (per engine), with x the mean step time: λx requests arrive per step, each decodes for
D = output - 1 steps after the step that prefills its last chunk, so d = λxD requests decode in a mean step
(Little's law in steps) and λxP prompt tokens are prefilled per step. A fraction m of steps carry prefill
(Poisson arrivals: 1 - exp(-λx·chunks), at least the share of the budget prefill takes), the others decode
only, and x = (1 - m)·t(decode) + m·t(mixed) is solved as a fixed point. Queueing for prefill is M/G/1
(core/sizing/queueing.py). gpuplan.core.sizing.serving_sim simulates the same engine request by request;
tests/unit/test_serving_sim.py holds the two within a few per cent on a grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from gpuplan.core.sizing.serving_step import StepCost


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine (a replica, or one of its pipeline's virtual engines) and the requests it serves."""

    cost: StepCost
    #: token budget per step, requests per step, KV cache tokens allocated, tokens per KV block
    budget: int
    max_seqs: int
    kv_tokens: float
    block: int = 16
    #: mean prompt and output tokens, and their spread (standard deviations)
    prompt: float = 512.0
    output: float = 256.0
    prompt_std: float = 0.0
    output_std: float = 0.0
    poisson: bool = True
    #: mean prompt tokens of a request found in the prefix cache (they skip prefill; their KV is attended), and
    #: whether the requests in flight share them (their blocks held once, `cached` tokens in all) or each holds its own
    cached: float = 0.0
    cached_shared: bool = False
    #: speculative decoding (core/sizing/speculative.py): tokens drafted per decoding request and step, tokens a
    #: verification step emits per request, and one draft pass's cost (None: n-gram, or no speculation)
    spec_k: int = 0
    accepted: float = 1.0
    draft: StepCost | None = None
    #: its hash, made once: an engine keys several caches (its saturation, its capacity, a search's timings)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((
            self.cost, self.budget, self.max_seqs, self.kv_tokens, self.block, self.prompt, self.output,
            self.prompt_std, self.output_std, self.poisson, self.cached, self.cached_shared, self.spec_k,
            self.accepted, self.draft)))

    def step(self, decodes: float, prefill: float, kv_tokens: float, pairs: float) -> float:
        """Seconds of a step of `decodes` decoding requests and `prefill` prompt tokens (StepCost.seconds). With
        speculation, each decoding request first drafts `spec_k` tokens (that many passes of the draft), then the
        target verifies its spec_k + 1 tokens in the step: its linear layers see them all, its attention reads the
        request's KV cache once for the spec_k + 1 queries (spec_k more attention pairs over its context each)."""
        k = self.spec_k
        if not k or decodes <= 0:
            return self.cost.seconds(decodes, prefill, kv_tokens, pairs)
        ctx = self.prompt + self.output / 2
        t = self.cost.seconds(decodes * (k + 1), prefill, kv_tokens, pairs + k * decodes * ctx)
        if self.draft is not None:
            t += k * self.draft.seconds(decodes, 0.0, decodes * ctx, decodes * ctx)
        return t

    @property
    def fresh(self) -> float:
        """Prompt tokens a request prefills: those not found in the prefix cache."""
        return self.prompt - self.cached

    @property
    def held(self) -> float:
        """Prompt tokens whose KV cache a request holds itself (a shared cached prefix is held once, apart)."""
        return self.prompt - self.cached if self.cached_shared else self.prompt

    @property
    def shared_tokens(self) -> float:
        """KV cache tokens held once for the requests in flight: the shared cached prefix (0 when none)."""
        return self.cached if self.cached_shared else 0.0

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True, slots=True)
class State:
    """The engine at arrival rate `rate`: mean step time and its parts, occupancy, and whether it is stable."""

    rate: float
    stable: bool
    bound: str  # what makes it unstable or caps it: "", "budget", "max-num-seqs", "kv-cache", "step"
    step_s: float = 0.0
    decode_s: float = 0.0
    mixed_s: float = 0.0
    mixed_share: float = 0.0
    decodes: float = 0.0
    chunks: int = 1
    #: prefill: the budget's share it takes; M/G/1 service time mean and second moment per request
    prefill_load: float = 0.0
    service_s: float = 0.0
    service_s2: float = 0.0
    kv_used_tokens: float = 0.0
    running: float = 0.0
    #: the steps a prompt's prefill spreads over, continuous (fresh prompt tokens / the budget left, at least 1):
    #: the scheduler packs prompts back to back, so a prompt shares its first and last steps with others
    prefill_steps: float = 1.0
    #: a request's own prefill: its chunks back to back, each beside the running decodes (at least)
    own_prefill_s: float = 0.0


def decode_steps(e: Engine) -> float:
    """Steps a request decodes for after its first token: output - 1, over the tokens a step emits with speculation."""
    d = (e.output - 1.0) / e.accepted
    return 0.0 if 0.0 > d else d  # max(d, 0.0)


#: a step at a load: (t_decode, t_mixed, mixed share, decodes per step, chunks, prefill load, bound, prefill steps)
_Parts = tuple[float, float, float, float, int, float, str, float]


def _step_parts(e: Engine, arrivals: float) -> _Parts:
    """(t_decode, t_mixed, mixed share, decodes per step, chunks, prefill load, bound) when `arrivals` requests
    arrive in a mean step (λx): the step is a function of that alone."""
    d = arrivals * decode_steps(e)
    budget_left = e.budget - d
    if budget_left <= 0:
        return 0.0, 0.0, 0.0, d, 1, 1.0, "budget", 1.0
    fresh, cached = e.fresh, e.cached
    per_step = arrivals * fresh
    load = per_step / budget_left
    # the steps a prompt's prefill takes: whole steps for the request's own chunks (`chunks`), and, for how many steps
    # carry prefill and what a chunk reads, the continuous count fresh / budget (`k`): the scheduler packs the
    # waiting prompts back to back into each step's budget (first come first served), so a prompt's tokens share
    # steps with the next one's and the prefill load changes smoothly with the prompt's length, not by a whole
    # step at each multiple of the budget (an 8,180-token prompt was timed slower than an 8,192-token one)
    chunks = max(math.ceil(fresh / budget_left), 1)
    k = max(fresh / budget_left, 1.0)
    spread = 1 - math.exp(-arrivals * k) if e.poisson else min(1.0, arrivals * k)
    m = min(max(load, spread), 1.0)
    ctx = e.prompt + e.output / 2
    kv = d * ctx
    c_m = per_step / m if m > 0 else 0.0
    # each fresh prompt token attends to the tokens before it, the cached prefix's too: (P² - C²) / 2 pairs
    pairs_m = arrivals * (e.prompt * e.prompt - cached * cached) / 2 / m if m > 0 else 0.0
    t_d = e.step(d, 0.0, kv, kv)
    # a prefill chunk reads its request's context once: the cached prefix and (chunks + 1) / 2 chunks of the rest
    t_m = e.step(d, c_m, kv + c_m * (k + 1) / 2 + arrivals / m * cached, kv + pairs_m) if m > 0 else t_d
    return t_d, t_m, m, d, chunks, load, "", k


def state_at(e: Engine, arrivals: float) -> State | None:
    """The steady state in which `arrivals` requests arrive in a mean step: the step time x that load makes, at
    the rate arrivals / x, a fixed point by construction (None: past the token budget, or no arrivals). A closed
    load is solved over this (core/sizing/queueing.closed_rate), one step time per trial, no fixed point to
    iterate at each."""
    if arrivals <= 0:
        return None
    parts = _step_parts(e, arrivals)
    if parts[6] or parts[5] >= 1.0:
        return None
    t_d, t_m, m = parts[0], parts[1], parts[2]
    x = (1 - m) * t_d + m * t_m
    return _state(e, arrivals / x, x, parts)


def solve_state(e: Engine, rate: float, near: State | None = None) -> State:
    """The engine's steady state at `rate` requests/s (a fixed point of the mean step time), bracketed by doubling
    from the idle step, or from `near`, a stable state at a nearby rate (the step time grows with the rate: a
    bisection over rates brackets each from the last in a step or two)."""
    t0 = e.cost.seconds(0.0, 0.0, 0.0, 0.0)
    if rate <= 0:
        return State(rate=0.0, stable=True, bound="", step_s=t0, decode_s=t0, mixed_s=t0, chunks=1)

    def gap(x: float) -> tuple[float, _Parts]:
        parts = _step_parts(e, rate * x)
        if parts[6] or parts[5] >= 1.0:
            return math.inf, parts
        t_d, t_m, m = parts[0], parts[1], parts[2]
        return (1 - m) * t_d + m * t_m - x, parts

    start = _from_near(gap, t0, rate, near) if near is not None else None
    if start is not None:
        lo, glo, hi, g, parts = start
    else:
        lo = hi = t0
        g, parts = gap(hi)
        if math.isinf(g):
            return State(rate=rate, stable=False, bound=parts[6] or "budget")
        while 0 < g < math.inf:  # the step time grows with the batch it carries: bracket where it stops growing
            lo, hi = hi, hi * 2
            g, parts = gap(hi)
            if hi > 1e6 * t0:
                return State(rate=rate, stable=False, bound="step")
        glo, _ = gap(lo) if lo != hi else (g, parts)
    found = g <= 0
    side = 0
    for _ in range(80):  # Illinois false position where the bracket is finite, bisection past the budget
        if hi - lo <= 1e-7 * hi:
            break
        if found and glo > 0 and g < 0:
            mid = (lo * g - hi * glo) / (g - glo)
            if not lo < mid < hi:
                mid = (lo + hi) / 2
        else:
            mid = (lo + hi) / 2
        gm, pm = gap(mid)
        if 0 < gm < math.inf:
            lo, glo = mid, gm
            if side == 1:
                g /= 2
            side = 1
        else:
            hi = mid
            if gm <= 0:
                found, g, parts = True, gm, pm
                if side == -1:
                    glo /= 2
                side = -1
                if gm > -1e-9 * mid:
                    break
            else:
                found = False
    if not found:
        return State(rate=rate, stable=False, bound=parts[6] or "budget")
    return _state(e, rate, hi, parts)


def _from_near(gap: Callable[[float], tuple[float, _Parts]], t0: float, rate: float,
               near: State) -> tuple[float, float, float, float, _Parts] | None:
    """(lo, gap there, hi, gap there, hi's parts) around the fixed point at `rate` from `near`'s step time, which
    bounds it below at a higher rate and above at a lower one; None when `near` does not serve (then doubling)."""
    x0 = near.step_s
    if not (near.stable and near.rate > 0 and x0 > t0):
        return None
    if rate >= near.rate:  # step up from x0
        lo = x0
        glo, _ = gap(lo)
        if not 0 < glo < math.inf:
            return None
        grow = min(rate / near.rate - 1.0, 1.0) + 1e-3
        while True:
            hi = lo * (1 + grow)
            g, parts = gap(hi)
            if not 0 < g < math.inf:
                return lo, glo, hi, g, parts
            if hi > 1e6 * t0:
                return None
            lo, glo, grow = hi, g, grow * 4
    hi = x0  # step down from x0, to the idle step at most (where the gap is never negative)
    g, parts = gap(hi)
    if not g <= 0:
        return None
    shrink = min(near.rate / rate - 1.0, 1.0) + 1e-3
    while True:
        lo = max(hi / (1 + shrink), t0)
        glo, plo = gap(lo)
        if 0 < glo < math.inf or lo == t0:
            return lo, glo, hi, g, parts
        hi, g, parts, shrink = lo, glo, plo, shrink * 4


def _state(e: Engine, rate: float, x: float, parts: _Parts) -> State:
    t_d, t_m, m, d, chunks, _, _, k = parts
    # the prefill server (M/G/1): a request's prompt takes prompt / budget-left of a full-budget step
    budget_left = e.budget - d
    kv = d * (e.prompt + e.output / 2)
    fresh, cached = e.fresh, e.cached
    # a full budget of fresh prompt tokens, each attending to the cached prefix and half its own prompt's rest
    full = e.step(d, budget_left, kv + budget_left * (k + 1) / 2 + cached,
                          kv + budget_left * (cached + fresh / 2))
    per_token = full / budget_left
    s1 = fresh * per_token
    # the prompt's spread in proportion to the share prefilled (the hit rate is a share of each prompt's tokens)
    fresh_std = e.prompt_std * fresh / e.prompt if e.prompt > 0 else 0.0
    s2 = (fresh ** 2 + fresh_std ** 2) * per_token ** 2
    rho = rate * s1
    prefilling = rate * k * t_m
    running = d + prefilling
    held = e.held  # a shared cached prefix is held once (`shared`), the rest by each request
    kv_used = (d * (held + e.output / 2 + e.block / 2) + prefilling * (held - fresh / 2 + e.block / 2)
               + e.shared_tokens)
    bound = ""
    if rho >= 1:
        bound = "budget"
    elif running + 2 * math.sqrt(running) > e.max_seqs:
        bound = "max-num-seqs"
    elif kv_used + 2 * math.sqrt(max(running, 1.0)) * (held + e.output / 2) > e.kv_tokens:
        bound = "kv-cache"
    return State(rate=rate, stable=not bound, bound=bound, step_s=x, decode_s=t_d, mixed_s=t_m, mixed_share=m,
                 decodes=d, chunks=chunks, prefill_steps=k, prefill_load=min(rho, 1.0), service_s=s1, service_s2=s2,
                 kv_used_tokens=kv_used, running=running,
                 own_prefill_s=max(k * t_m, _own_chunks_s(e, d, kv, budget_left)))


def _own_chunks_s(e: Engine, d: float, kv: float, budget_left: float) -> float:
    """One request's prompt prefilled in chunks of what the budget leaves beside `d` decodes (reading `kv` tokens of
    their cache): full chunks, then the rest; each chunk reads its context so far. Grows with the prompt."""
    if budget_left <= 0 or e.fresh / budget_left > 64:
        return 0.0  # very long prompts: the mean mixed step per chunk stands (the caller takes the larger)
    total, done = 0.0, e.cached  # the cached prefix is read, not prefilled
    while done < e.prompt:
        c = min(budget_left, e.prompt - done)
        total += e.step(d, c, kv + done + c, kv + c * (done + c / 2))
        done += c
    return total


@lru_cache(maxsize=4096)
def interned(e: Engine) -> Engine:
    """The first engine seen equal to `e` (memoized), its step cost interned too (`interned_cost`): the caches an
    engine keys (its saturation, capacity, a search's timings) then find it by identity, not field by field."""
    return e


@lru_cache(maxsize=4096)
def interned_cost(c: StepCost) -> StepCost:
    """The first step cost seen equal to `c` (memoized): see `interned`."""
    return c


@lru_cache(maxsize=4096)
def saturation_rate(e: Engine) -> float:
    """The highest arrival rate the engine is stable at (requests/s), by bisection (memoized: the search asks
    for the same engine on every server count)."""
    t0 = e.cost.seconds(0.0, 0.0, 0.0, 0.0)
    hi = 1.0 / (t0 * max(decode_steps(e), 1.0)) * e.budget  # more than the budget could ever decode
    lo = 0.0
    below = solve_state(e, 1e-9)  # the last stable state, which brackets the next one
    if not below.stable:
        return 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        s = solve_state(e, mid, below)
        if s.stable:
            lo, below = mid, s
        else:
            hi = mid
        if hi - lo <= 1e-3 * hi:
            break
    return lo


@lru_cache(maxsize=4096)
def saturation_state(e: Engine) -> State:
    """The steady state just below the saturation rate (1 - 1e-6 of it), where a closed load that asks for more
    runs (memoized with it: every load on the engine starts from it)."""
    return solve_state(e, saturation_rate(e) * (1 - 1e-6))


__all__ = ["Engine", "State", "StepCost", "decode_steps", "interned", "interned_cost", "saturation_rate",
           "saturation_state", "solve_state", "state_at"]
