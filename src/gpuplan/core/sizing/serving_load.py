"""A serving replica under the project's load (core/sizing/serving.py builds its engine): the capacity one virtual
engine has within the objectives and the replicas the whole load needs at it (`size_load`), then the requests/s it
serves and their latencies (`time_load`). Each a function of the engine, the load and the objectives alone, so a
search keeps them by engine (core/search/serving_shapes.py) and solves each steady state once: the closed load's
state comes with its rate (queueing.closed_rate), the latencies at the capacity with it (queueing.capacity). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.core.sizing.batching import Engine
from gpuplan.core.sizing.queueing import Capacity, Latency, Load, Targets, capacity, closed_rate, latency
from gpuplan.schema.project import Workload


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica's engine (each of its `pp` pipeline virtual engines serves 1/pp of its requests)."""

    engine: Engine
    pp: int
    saturation: float  # requests/s one virtual engine is stable up to

    @property
    def saturation_rate(self) -> float:
        return self.saturation * self.pp


def replica_load(rep: Replica, w: Workload, replicas: int) -> tuple[str, Load]:
    """(where the load comes from, one virtual engine's share of it: the requests/s it serves, the wait in front of
    it of a closed load beyond what it sustains, and its steady state when a closed load solved it)."""
    sat = rep.saturation * (1 - 1e-6)
    if w.arrival_rate is not None:
        return "arrival_rate", Load(rate=min(w.arrival_rate / replicas / rep.pp, sat), queued_s=0.0, state=None)
    if w.users is not None:
        return "users", closed_rate(rep.engine, w.users / replicas / rep.pp, w.think_time_s or 0.0, rep.saturation)
    return "batch_size", closed_rate(rep.engine, w.batch_size / rep.pp, 0.0, rep.saturation)


def replica_demand(w: Workload, cap_rate: float, at_cap: Latency | None, per_replica_now: int,
                   headroom: float) -> float | None:
    """The replicas the project's whole load needs at `cap_rate` requests/s each (`at_cap`: the latencies there), with
    the headroom, before rounding up: linear in the load (arrival rate, users or concurrency), so a load grown by a
    factor needs this x the factor."""
    if cap_rate <= 0 or at_cap is None:
        return None
    if w.arrival_rate is not None:
        return w.arrival_rate * (1 + headroom) / cap_rate
    if w.users is not None:
        per_user = (w.think_time_s or 0.0) + at_cap.e2e.mean
        return w.users * (1 + headroom) / (cap_rate * per_user)
    conc = cap_rate * at_cap.e2e.mean
    return w.batch_size * per_replica_now * (1 + headroom) / conc if conc > 0 else None


def replicas_needed(w: Workload, cap_rate: float, at_cap: Latency | None, per_replica_now: int,
                    headroom: float) -> int | None:
    """Replicas the project's whole load needs at `cap_rate` requests/s each (`at_cap`: the latencies there), with
    the headroom."""
    return whole_replicas(replica_demand(w, cap_rate, at_cap, per_replica_now, headroom))


def whole_replicas(demand: float | None) -> int | None:
    """A replica demand rounded up to whole replicas, at least one."""
    return None if demand is None else max(math.ceil(demand - 1e-9), 1)


@dataclass(frozen=True, slots=True)
class Sizing:
    """`replicas` of a replica under the objectives: one virtual engine's capacity within them and the replicas the
    project's load needs at it (what a search ranks layouts by first)."""

    rep: Replica
    replicas: int
    capacity: Capacity
    replicas_needed: int | None
    #: the replicas the load needs before rounding up (serving_load.replica_demand)
    demand: float | None = None

    @property
    def capacity_per_replica(self) -> float:
        return self.capacity.rate * self.rep.pp

    @property
    def capacity_requests_per_s(self) -> float:
        return self.capacity_per_replica * self.replicas

    @property
    def kv_cache_requests(self) -> float:
        e = self.rep.engine
        return max(e.kv_tokens - e.shared_tokens, 0.0) * self.rep.pp / (e.held + e.output)


@dataclass(frozen=True, slots=True)
class Timing:
    """A sized layout under the project's load: where the load comes from ("arrival_rate", "users", "batch_size"),
    the requests/s one virtual engine serves and their latencies there (what the full result is built from)."""

    sizing: Sizing
    load: str
    rate: float
    now: Latency

    @property
    def request_latency_s(self) -> float:
        return self.now.e2e.mean


def size_load(rep: Replica, w: Workload, replicas: int, targets: Targets, max_utilization: float,
              headroom: float) -> Sizing:
    """`replicas` of `rep`: one virtual engine's capacity within `targets` (`max_utilization` of its saturation
    without any) and the replicas the project's load needs at it with `headroom`."""
    cap = capacity(rep.engine, targets, max_utilization, rep.saturation)
    demand = replica_demand(w, cap.rate * rep.pp, cap.at, replicas, headroom)
    return Sizing(rep=rep, replicas=replicas, capacity=cap, replicas_needed=whole_replicas(demand), demand=demand)


def time_load(sz: Sizing, w: Workload) -> Timing:
    """The sized replicas under the project's load."""
    load, at = replica_load(sz.rep, w, sz.replicas)
    now = latency(sz.rep.engine, at.rate, at.state, queued_s=at.queued_s)
    return Timing(sizing=sz, load=load, rate=at.rate, now=now)


__all__ = ["Replica", "Sizing", "Timing", "replica_demand", "replica_load", "replicas_needed", "size_load", "time_load",
           "whole_replicas"]
