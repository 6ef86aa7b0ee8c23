"""What a search is given (`SearchInputs`: the project, its model and every catalog and assumption, loaded once by
the shell) and what it returns (`SearchOutput`). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from gpuplan.core.search.candidate import Pick
from gpuplan.core.server.common import Needs
from gpuplan.schema.catalog import Catalog
from gpuplan.schema.estimate import ActivationTable, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import Candidate, Evidence, GrowthRow, PlanStats, Rejected, ServerSpec
from gpuplan.schema.project import Project
from gpuplan.schema.serving import ServingData
from gpuplan.schema.speed import SpeedModel


@dataclass
class SearchInputs:
    project: Project
    arch: ModelArch  # None for a traced model (search_traced)
    grown_arch: ModelArch
    catalog: Catalog
    speed: SpeedModel
    table: ActivationTable
    overheads: Overheads
    #: builds the server around a candidate: (spec or None, reason); `reasons=False`: the figures alone
    build_server: Callable[..., tuple[ServerSpec | None, str | None]]
    #: what the search compares of that server: (built, price or None, reason when not built)
    server_price: Callable[[Needs], tuple[bool, float | None, str | None]]
    #: the plan's currency (the budget's): every amount the search reads and writes is in it
    currency: str = "USD"
    #: reference rental price per GPU-hour, by GPU id
    rent_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    #: the rental price per GPU-hour of a configuration, (GPU id, GPUs sharing a machine, GPUs on one fabric across
    #: servers, 0: none) -> the median its deployments price (core/cost/clusters.rent_rate), None: not rented;
    #: None here: the medians above
    rent_at: Callable[[str, int, int], float | None] | None = None
    #: checkpoints a run keeps (data/server_rules.toml)
    checkpoints_kept: int = 3
    notes: list[Note] = field(default_factory=list)
    #: seconds on a monotonic clock (time.perf_counter in the shells): what stats.search_seconds is measured with
    clock: Callable[[], float] = lambda: 0.0
    #: how well each GPU's speed and price are known (core/search/evidence.py); none: every GPU counts as adequate
    evidence: dict[str, Evidence] = field(default_factory=dict)
    #: the serving engine's facts (data/serving.toml); serving searches need them
    serving: ServingData | None = None


#: what a search ranks: its light records (`Pick`, core/search/explore.py) or full candidates (a traced model's)
K = TypeVar("K", Pick, Candidate)


class SearchOutput(NamedTuple, Generic[K]):
    #: ranked, best first; full results for the first `top` (all when None)
    candidates: list[Candidate]
    rejected: list[Rejected]
    stats: PlanStats
    #: the first `growth_top` candidates at x1, x1.5 and x2 the planned model size (core/search/growth.py)
    growth_view: list[GrowthRow]
    #: every kept candidate, ranked, as the light records the ranking read (gpu_id, gpus_per_server, servers,
    #: time_hours, cost, ...): what the FAQ compares across all of them
    ranked: list[K]
    #: the full Candidate of any of `ranked` (the first `top` are in `candidates` already)
    materialize: Callable[[K], Candidate]
    #: the growth rows of any of `ranked` (those past `growth_top` a plan shows when others fall over its budget)
    grow: Callable[[list[K]], list[GrowthRow]] = lambda ks: []


__all__ = ["SearchInputs", "SearchOutput"]
