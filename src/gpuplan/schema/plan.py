"""What `gpuplan plan` returns: candidate servers for a project, the recommendation, what was rejected and
why, and the decision checklist. JSON keys carry their units."""

import datetime
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from gpuplan.schema.defaults import MEMORY_HEADROOM
from gpuplan.schema.deployment import Action, Deployment, DeploymentChoice, GrowthStep  # re-exported
from gpuplan.schema.estimate import Note
from gpuplan.schema.fit import FitLimit, FitResult  # here before their own module: importers keep working
from gpuplan.schema.framework import TrainingStack
from gpuplan.schema.owned import HaveKind, HaveOption, HaveResult, HaveWay
from gpuplan.schema.result import MemoryOut
from gpuplan.schema.serving import LatencyCurve
from gpuplan.schema.speed import InferenceSpeed, TimeEstimate

Verdict = Literal["pass", "warn", "fail", "not evaluated"]


class _Out(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)


class ServerNeeds(_Out):
    """What one server must carry, from the project and the candidate (inputs of `core.server.build_server`)."""

    gpu_id: str
    gpus_per_server: int
    servers: int
    #: text | image | audio | video | tabular (workload's data pipeline)
    modality: str
    purpose: Literal["experiment", "production"]
    #: bytes of the dataset on local NVMe (each server keeps a copy)
    dataset_bytes: float
    #: bytes of one checkpoint (weights + optimizer state) of the whole model, and of the weights alone
    checkpoint_bytes: float
    weights_bytes: float
    #: host RAM the layout's CPU offload needs on this server
    offload_bytes: float = 0.0
    #: bytes per second the server's GPUs consume from storage during training (0 for inference)
    data_read_bytes_per_s: float = 0.0
    #: tensor parallelism spans GPUs (needs a fast GPU-to-GPU link)
    tensor_parallel: int = 1
    #: the training is data-parallel across servers (needs a cluster network)
    multi_node: bool = False
    #: the server serves a model (its RAM follows the serving data path, not 2x VRAM)
    serving: bool = False


class ServerSpec(_Out):
    """One balanced server; every figure comes with the rule and inputs that produced it in `reasons`."""

    platform_id: str
    platform_name: str
    gpu_id: str
    gpus: int
    cpu_id: str
    cpu_model: str
    cpu_sockets: int
    cpu_cores: int
    ram_bytes: int
    storage_bytes: int
    drive_id: str
    drives: int
    storage_read_gb_s: float
    nic_id: str | None
    nics: int
    network_gbit_s: float
    pcie_lanes_needed: int
    pcie_lanes_available: int
    power_w: float
    psu_w: float | None
    cooling_btu_h: float
    cooling: str
    rack_units: int | None
    fixed: bool = False  #: an appliance as the vendor ships it (CPU, RAM, drives, NICs: the vendor's; issue 28)
    #: purchase price estimate of the server (all servers of the candidate, the cluster network's share included), in
    #: `currency` (the plan's); None when a GPU price is not in the catalog
    price: float | None = None
    currency: str = "USD"
    #: the same in USD (PlanResult.usd_rate)
    price_usd: float | None = None
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class CandidateLayout(_Out):
    """How a candidate runs the workload on its GPUs. Training fills dp, gradient_checkpointing and the batch sizes;
    serving fills replicas and batch_per_replica; the JSON leaves out the fields that do not apply (None)."""

    zero: int = 0
    tp: int = 1
    pp: int = 1
    offload: str = "none"
    #: training: data-parallel degree (GPUs / (tp x pp))
    dp: int | None = None
    gradient_checkpointing: bool | None = None
    micro_batch_size: int | None = None
    #: sequences per optimizer step (0: not set)
    global_batch_size: int | None = None
    #: serving: model copies (GPUs / tp), and concurrent requests each one holds
    replicas: int | None = None
    batch_per_replica: int | None = None

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return {k: v for k, v in handler(self).items() if v is not None}

    @property
    def serving(self) -> bool:
        return self.replicas is not None

    def __getitem__(self, key: str) -> int | str | bool:
        """`layout["tp"]`, as when the layout was a dict (Python API code written against it keeps working);
        a field that does not apply raises KeyError, as a missing key did."""
        value = getattr(self, key, None) if key in type(self).model_fields else None
        if value is None:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]


class Evidence(_Out):
    """How well a candidate's numbers are known: its speed (calibrated on published runs of its GPU generation, or
    extrapolated from a prior) and its price (how many quotes of which kind, how old). A candidate whose evidence
    is not adequate is recommended only when no adequate one qualifies (core/search/evidence.py)."""

    #: calibrated: published runs of the GPU's generation fit the speed model; extrapolated: a prior only; measured:
    #: `gpuplan calibrate` measured this GPU's throughput on the user's machine (its row's `measured_here`)
    speed: Literal["calibrated", "extrapolated", "measured"]
    #: quoted: a price quote (cloud or managed) younger than six months; dated: older quotes from two providers
    #: or more, or a purchase price with its source; thin: one old quote, or none
    price: Literal["quoted", "dated", "thin"]
    #: price quotes in the price lists for this GPU, by kind (purchase, managed, cloud on-demand, reserved-1y, ...)
    quotes: dict[str, int] = Field(default_factory=dict)
    #: providers quoting it (cloud and managed)
    providers: int = 0
    newest_quote: datetime.date | None = None
    adequate: bool
    reasons: list[str] = Field(default_factory=list)


class Candidate(_Out):
    gpu_id: str
    gpu_name: str
    gpus_per_server: int
    servers: int
    layout: CandidateLayout
    memory: MemoryOut
    #: training: as in `estimate`
    time: TimeEstimate | None = None
    #: inference: as in `estimate`
    inference: InferenceSpeed | None = None
    #: inference: latency against load, from a light load to beyond the capacity (core/sizing/latency_curve.py)
    latency_curve: LatencyCurve | None = None
    server: ServerSpec
    fits: bool
    #: fits with the growth the project plans (growth.model_scale, context_scale, users_scale)
    fits_with_growth: bool
    #: the device total after growth, per GPU
    grown_device_bytes: int
    #: training: the layout the grown model is run as on the same GPUs, when the candidate's own (today's fastest)
    #: does not hold it (`grown_device_bytes` is then that layout's); None: the candidate's own layout
    grown_layout: CandidateLayout | None = None
    #: what the project keeps on storage: the dataset and the kept checkpoints (cloud storage is billed on it)
    storage_need_bytes: float = 0.0
    #: purchase price of all servers, in `currency` (the plan's; None when a price is missing)
    price: float | None = None
    #: renting the same GPUs: for the run (training) or over growth.horizon_months (inference), in `currency`
    rent: float | None = None
    #: the cheaper of the two, in `currency`, and which ("buy" or "rent"): what the budget and the cost objective use
    cost: float | None = None
    cost_basis: Literal["buy", "rent"] | None = None
    currency: str = "USD"
    #: price, rent and cost in USD (PlanResult.usd_rate)
    price_usd: float | None = None
    rent_usd: float | None = None
    cost_usd: float | None = None
    #: training: wall hours of the run (of 1e9 tokens when the project gives no length)
    time_hours: float | None
    #: inference: seconds a request takes, prompt to last token
    request_latency_s: float | None = None
    #: lower is better, by the objective
    score: float
    pareto: bool = False
    reasons: list[str] = Field(default_factory=list)
    #: the ways to get this configuration, cheapest total first (filled for the shown candidates)
    deployments: list[Deployment] = Field(default_factory=list)
    #: the option chosen among them, with reasons
    deployment: DeploymentChoice | None = None
    #: what to do: buy or rent, what, from whom, at what cost (None when no price list covers it)
    action: Action | None = None
    #: how well its speed and price are known
    evidence: Evidence | None = None
    #: training: the framework and kernels the candidate is timed on and its exports launch (issue #30)
    stack: TrainingStack | None = None


#: why a GPU type or server shape was not kept, for programs (the `reason` says it for people)
RejectCode = Literal["datacenter-only", "consumer-in-production", "no-platform", "no-fit", "no-fit-after-growth",
                     "no-server", "deadline", "latency", "over-budget", "no-price"]


class Rejected(_Out):
    gpu_id: str
    gpus_per_server: int
    servers: int
    reason: str
    code: RejectCode
    #: over-budget: what it would cost, in the plan's currency, as the reason says (left out of the JSON otherwise)
    cost: float | None = None

    @model_serializer(mode="wrap")
    def _drop_no_cost(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        if out.get("cost", 0) is None:
            del out["cost"]
        return out


class ChecklistItem(_Out):
    item: str
    verdict: Verdict
    reasons: list[str]


class FaqAnswer(_Out):
    question: str
    answer: str
    reasons: list[str] = Field(default_factory=list)


class PlanStats(_Out):
    candidates_evaluated: int
    search_seconds: float
    gpu_types: int
    #: the cost objective counts costs up to this much (in the plan's currency) above the cheapest as the cheapest:
    #: 1% of the budget
    same_cost: float = 0.0
    #: candidates that qualified (the plan shows the first `top` of them)
    candidates_kept: int = 0
    #: the lowest `cost` among them (those with adequate evidence, when any has): what the cost objective's 10%
    #: buckets count from (with same_cost), in the plan's currency
    cheapest_cost: float | None = None
    #: the same two in USD (PlanResult.usd_rate)
    same_cost_usd: float = 0.0
    cheapest_cost_usd: float | None = None


class GrowthRow(_Out):
    """One shown candidate's layout with a larger model: the growth view (core/search/growth.py)."""

    gpu_id: str
    gpus_per_server: int
    servers: int
    #: model size against the plan: 1.0 is the project as planned (growth.model_scale, context_scale and
    #: users_scale applied: the candidate's grown_device_bytes), 1.5 and 2.0 a model that much deeper again
    factor: float
    #: model size against the project's model today (growth.model_scale x factor)
    model_scale: float
    #: parameters of the model at this size
    parameters: int
    #: peak memory per GPU of the candidate's layout with the model at this size
    device_bytes: int
    #: the GPU's memory less the headroom (PlanResult.headroom)
    usable_bytes: int
    fits: bool
    #: the fewest GPUs of this type, among the server shapes the search tried for it, on which the least-memory
    #: layouts fit at this size; None when none of those shapes holds it
    min_gpus: int | None = None


class PlanResult(_Out):
    project: str
    objective: Literal["cost", "time", "balanced"]
    recommendation: Candidate | None
    candidates: list[Candidate]
    rejected: list[Rejected]
    checklist: list[ChecklistItem]
    faq: list[FaqAnswer] = Field(default_factory=list)
    stats: PlanStats
    notes: list[Note] = Field(default_factory=list)
    #: the fraction of each GPU's memory kept free (constraints.memory_headroom or --headroom): usable VRAM is
    #: VRAM x (1 - headroom)
    headroom: float = MEMORY_HEADROOM
    #: the shown candidates at x1 (as planned), x1.5 and x2 model size (empty for a traced model)
    growth_view: list[GrowthRow] = Field(default_factory=list)
    #: the currency every amount of the plan is in (the budget's, else USD): the catalog and the price lists are
    #: converted into it once (gpuplan.catalog.currency); `usd_rate` is 1 USD in it (data/fx.toml), with which the
    #: `*_usd` figures are stated
    currency: str = "USD"
    usd_rate: float = 1.0
    #: the date the plan is made for (`--as-of`, default the day it runs): quotes older than six months on it are
    #: flagged and count as weaker evidence
    as_of: datetime.date | None = None
    #: `plan --have` / `--this-machine`: the server the team has, first (left out of the JSON without it)
    have: HaveResult | None = None

    @model_serializer(mode="wrap")
    def _drop_no_have(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        if out.get("have", 0) is None:
            del out["have"]
        return out


__all__ = ["Action", "Candidate", "CandidateLayout", "ChecklistItem", "Deployment", "DeploymentChoice", "Evidence",
           "FaqAnswer", "GrowthRow", "GrowthStep", "HaveKind", "HaveOption", "HaveResult", "HaveWay", "PlanResult",
           "PlanStats", "RejectCode", "Rejected", "ServerNeeds", "ServerSpec", "TrainingStack", "Verdict"]
__all__ += ["FitLimit", "FitResult"]
