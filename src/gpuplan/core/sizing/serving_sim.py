"""A small discrete-event simulation of a vLLM-like continuous-batching engine, request by request: what the
analytic steady state (core/sizing/batching.py, queueing.py) is checked against (tests/unit/test_serving_sim.py).
Not used by the estimate or the search. Pure and deterministic: its own seeded generator (SplitMix64).

Each step: every running request is scheduled first (a decode token, or the next chunk of its prompt), then
waiting requests are admitted first come first served while the token budget, `max_num_seqs` and the KV blocks
allow; a running request that cannot get a new KV block preempts the most recently admitted one, which returns
to the head of the queue and recomputes its tokens (vLLM's recompute preemption). A step lasts
`StepCost.seconds` of what it scheduled; a request's first token comes at the end of the step that prefills its
last prompt token, each later token one step after the one before.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from gpuplan.core.sizing.batching import Engine


class Rng:
    """SplitMix64: a seeded stream of floats in [0, 1)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def random(self) -> float:
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return ((z ^ (z >> 31)) >> 11) / float(1 << 53)

    def exponential(self, mean: float) -> float:
        return -math.log(1.0 - self.random()) * mean

    def normal(self, mean: float, sd: float) -> float:
        if sd <= 0:
            return mean
        u1, u2 = 1.0 - self.random(), self.random()
        return mean + sd * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)


@dataclass(slots=True)
class _Req:
    arrival: float
    prompt: int
    output: int
    user: int = -1
    done: int = 0  # tokens of prompt (+ generated, after a preemption) computed
    generated: int = 0
    blocks: int = 0
    first: float = -1.0
    finish: float = -1.0

    @property
    def decoding(self) -> bool:
        """Past its prompt: each step computes its last token (the KV cache of the earlier ones is there)."""
        return self.generated > 0 and self.done == self.prompt + self.generated - 1

    @property
    def need(self) -> int:
        """Tokens to compute before the next output token: the prompt, and the generated ones after a preemption."""
        return self.prompt + self.generated


@dataclass(slots=True)
class SimResult:
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    #: requests per second served, mean requests in flight (time average), preemptions
    rate: float = 0.0
    concurrency: float = 0.0
    preemptions: int = 0


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile q (0-100) of `values`."""
    s = sorted(values)
    return s[min(max(math.ceil(q / 100 * len(s)) - 1, 0), len(s) - 1)] if s else 0.0


def _length(rng: Rng, mean: float, sd: float) -> int:
    return max(round(rng.normal(mean, sd)), 1)


def _schedule(e: Engine, running: list[_Req], waiting: deque[_Req], free: list[int],
              res: SimResult) -> list[tuple[_Req, int]]:
    """This step's (request, tokens) in vLLM's order; updates KV blocks, preempting when they run out."""
    budget, out = e.budget, []
    i = 0
    while i < len(running) and budget > 0:
        r = running[i]
        n = min(r.need - r.done, budget)
        want = math.ceil((r.done + n) / e.block) - r.blocks
        while want > free[0] and len(running) - 1 > i:  # preempt the newest running request
            victim = running.pop()
            free[0] += victim.blocks
            victim.blocks, victim.done = 0, 0
            waiting.appendleft(victim)
            res.preemptions += 1
        if want > free[0]:
            break
        free[0] -= want
        r.blocks += want
        out.append((r, n))
        budget -= n
        i += 1
    while waiting and budget > 0 and len(running) < e.max_seqs:
        r = waiting[0]
        n = min(r.need - r.done, budget)
        want = math.ceil((r.done + n) / e.block) - r.blocks
        if want > free[0]:
            break
        waiting.popleft()
        free[0] -= want
        r.blocks += want
        running.append(r)
        out.append((r, n))
        budget -= n
    return out


def _step_seconds(e: Engine, batch: list[tuple[_Req, int]]) -> float:
    decodes = prefill = kv = pairs = 0.0
    for r, n in batch:
        if r.decoding:
            decodes += 1
            kv += r.done + 1
            pairs += r.done + 1
        else:
            prefill += n
            kv += r.done + n
            pairs += n * (r.done + n / 2)
    return e.cost.seconds(decodes, prefill, kv, pairs)


def simulate(e: Engine, *, rate: float = 0.0, users: int = 0, think_s: float = 0.0, requests: int = 2000,
             seed: int = 1, warmup: float = 0.1) -> SimResult:
    """Serve `requests` requests arriving at `rate` per second (Poisson, or evenly spaced when not
    `e.poisson`), or from `users` users each thinking `think_s` (exponential) between an answer and its next
    request. Statistics skip the first `warmup` share of requests."""
    rng = Rng(seed)
    res = SimResult()
    total_blocks = int(e.kv_tokens // e.block)
    free = [total_blocks]
    waiting: deque[_Req] = deque()
    running: list[_Req] = []
    pending: list[_Req] = []  # future arrivals, in order
    made = 0

    def make(at: float, user: int = -1) -> _Req:
        nonlocal made
        made += 1
        return _Req(arrival=at, prompt=_length(rng, e.prompt, e.prompt_std),
                    output=_length(rng, e.output, e.output_std), user=user)

    if users:
        for u in range(users):
            pending.append(make(rng.exponential(think_s) if think_s > 0 else 0.0, u))
        pending.sort(key=lambda r: r.arrival)
    else:
        t = 0.0
        for _ in range(requests):
            t += rng.exponential(1 / rate) if e.poisson else 1 / rate
            pending.append(make(t))
    pending.reverse()  # pop() takes the earliest
    finished: list[_Req] = []
    now = 0.0
    while len(finished) < requests:
        while pending and pending[-1].arrival <= now:
            waiting.append(pending.pop())
        if not running and not waiting:
            if not pending:
                break
            now = pending[-1].arrival
            continue
        batch = _schedule(e, running, waiting, free, res)
        if not batch:
            raise ValueError("a request does not fit the KV cache at all")
        now += _step_seconds(e, batch)
        for r, n in batch:
            r.done += n
            if r.done < r.need:
                continue
            r.generated += 1
            if r.first < 0:
                r.first = now
            if r.generated >= r.output:
                r.finish = now
                running.remove(r)
                free[0] += r.blocks
                finished.append(r)
                if users and made < requests + users:
                    nxt = make(now + (rng.exponential(think_s) if think_s > 0 else 0.0), r.user)
                    pending.append(nxt)
                    pending.sort(key=lambda q: -q.arrival)
    return _summarize(finished, warmup, res)


def _summarize(finished: list[_Req], warmup: float, res: SimResult) -> SimResult:
    finished.sort(key=lambda r: r.arrival)
    kept = finished[int(len(finished) * warmup):]
    if not kept:
        return res
    for r in kept:
        res.ttft.append(r.first - r.arrival)
        res.e2e.append(r.finish - r.arrival)
        if r.output > 1:
            res.itl.append((r.finish - r.first) / (r.output - 1))
    span = kept[-1].arrival - kept[0].arrival
    res.rate = (len(kept) - 1) / span if span > 0 else 0.0
    res.concurrency = res.rate * sum(res.e2e) / len(res.e2e)
    return res


__all__ = ["Rng", "SimResult", "percentile", "simulate"]
