"""What the project's planned growth asks of a candidate inside the horizon (issue #27: growth is planned, not only
checked), as arithmetic over its sized figures. Pure.

- A service: its load grows linearly from the planned load now to growth.users_scale x it at the horizon's end. The
  replicas a load needs are linear in it (core/sizing/serving_load.replica_demand), so the grown load needs
  `replica_demand` x the load's factor; servers are added at the start of the month in which the load outgrows the
  replicas in place (`serving_additions`), and each deployment option prices them from then on (core/cost/tco.py).
- A training run: the grown model on the grown data takes about (grown parameters / parameters) x growth.data_scale
  times one run's compute (`training_work`): that is the work the horizon's cost counts, and its time on the same
  servers is checked against the deadline (core/checklist.py).
"""

from __future__ import annotations

import math

from gpuplan.schema.plan import CandidateLayout
from gpuplan.schema.speed import InferenceSpeed


def load_at(month: float, users_scale: float, horizon_months: int) -> float:
    """The load at `month` against the planned load: linear from 1 now to `users_scale` at the horizon's end."""
    return 1.0 + (users_scale - 1.0) * min(max(month, 0.0), horizon_months) / horizon_months


def mean_load(users_scale: float) -> float:
    """The load over the whole horizon, on average, against the planned load (linear growth)."""
    return (1.0 + users_scale) / 2


def servers_for(replicas: int, layout: CandidateLayout, gpus_per_server: int) -> int:
    """The servers of `gpus_per_server` GPUs that hold `replicas` of a tp x pp layout (a replica spanning servers
    takes whole servers)."""
    mp = layout.tp * layout.pp
    if mp <= gpus_per_server:
        return math.ceil(replicas / (gpus_per_server // mp))
    return replicas * math.ceil(mp / gpus_per_server)


def serving_additions(inf: InferenceSpeed | None, layout: CandidateLayout, gpus_per_server: int, servers: int,
                      users_scale: float, horizon_months: int) -> list[tuple[int, int]]:
    """(month, servers added then), in month order: the servers a service's grown load needs beyond the `servers`
    planned, each added at the start of the month whose load (at its end) the servers in place no longer serve
    within the objectives. Empty when the load does not grow or the planned servers hold the grown load."""
    if inf is None or inf.replica_demand is None or users_scale <= 1.0:
        return []
    have = servers
    out: list[tuple[int, int]] = []
    for month in range(horizon_months):
        need = servers_for(max(math.ceil(inf.replica_demand * load_at(month + 1, users_scale, horizon_months) - 1e-9),
                               1), layout, gpus_per_server)
        if need > have:
            out.append((month, need - have))
            have = need
    return out


def grown_requests(inf: InferenceSpeed | None, users_scale: float) -> int | None:
    """The requests a replica keeps in flight at the grown load, for a service timed under users or an arrival rate:
    the concurrency found x users_scale, over the replicas the grown load needs (`replica_demand` x users_scale, at
    least those planned); None for a fixed batch or without a serving result."""
    if inf is None or inf.load == "batch_size" or inf.replicas < 1:
        return None
    scale = max(users_scale, 1.0)
    demand = inf.replica_demand if inf.replica_demand is not None else float(inf.replicas)
    replicas = max(inf.replicas, math.ceil(demand * scale - 1e-9))
    return max(math.ceil(inf.concurrency * scale / replicas - 1e-9), 1)


def grown_servers(inf: InferenceSpeed | None, layout: CandidateLayout, gpus_per_server: int, servers: int,
                  users_scale: float) -> int:
    """The servers the load grown `users_scale` times needs (at least the planned ones)."""
    if inf is None or inf.replica_demand is None:
        return servers
    need = max(math.ceil(inf.replica_demand * users_scale - 1e-9), 1)
    return max(servers, servers_for(need, layout, gpus_per_server))


def when_added(month: int) -> str:
    """When a growth step's servers come, in words: "at once (the first month's load needs it)" (month 0: get it
    with the rest), else "after 15 months"."""
    if month <= 0:
        return "at once (the first month's load needs it)"
    return f"after {month} month{'s' if month != 1 else ''}"


def planned_work(model_scale: float, data_scale: float) -> float:
    """`training_work` when the parameters are not known (a model known by its trace): the scales' product."""
    return max(1.0, model_scale) * max(1.0, data_scale)


def training_work(parameters: int, grown_parameters: int, data_scale: float) -> float:
    """The compute of the grown run (the model grown to `grown_parameters`, on `data_scale` x the data) against one
    run of the project as planned: training compute scales with parameters x tokens."""
    ratio = grown_parameters / parameters if parameters > 0 else 1.0
    return max(1.0, ratio) * max(1.0, data_scale)


__all__ = ["grown_requests", "grown_servers", "load_at", "mean_load", "planned_work", "serving_additions",
           "servers_for", "training_work", "when_added"]
