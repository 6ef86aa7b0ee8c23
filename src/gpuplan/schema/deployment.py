"""A candidate's ways to get its servers (buy, managed hosting, cloud) with their costs over the horizon, the one
chosen, the growth steps priced in, and the action the verdict states. Part of `gpuplan plan`'s result
(schema/plan.py re-exports them). JSON keys carry their units."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)


class GrowthStep(_Out):
    """Servers added inside the horizon as the planned growth needs them (core/cost/growth.py), as one deployment
    option gets them: from `month` on, `upfront_cost` then `running_monthly`, less `residual_value` at the horizon
    (what owned servers fetch then)."""

    month: int
    servers: int
    upfront_cost: float
    running_monthly: float
    residual_value: float = 0.0
    #: what the step costs by the horizon: upfront + running x (horizon - month) - residual
    total_cost: float


class Deployment(_Out):
    """One way to get a configuration, and what it costs over the horizon (core/cost/tco.py)."""

    option: Literal["on-prem", "managed", "cloud"]
    provider: str
    #: total over the horizon / months
    monthly_cost: float
    total_cost: float
    #: the cost curve: upfront + running_monthly x month (the residual value returns at the horizon)
    upfront_cost: float
    running_monthly: float
    residual_value: float = 0.0
    cost_per_run: float | None = None
    cost_per_million_tokens: float | None = None
    currency: str
    #: months after which this option becomes cheaper than the other (None: never within the horizon's terms)
    breakeven_months_vs: dict[str, float | None] = Field(default_factory=dict)
    #: on-prem: the utilisation above which owning costs less than cloud GPUs on demand over the horizon
    breakeven_utilization: float | None = None
    #: cloud: the price per GPU-hour used
    price_per_gpu_hour: float | None = None
    #: what is rented, as it is quoted ("8 x Hetzner hetzner-gex130", "8 GPUs"); None for a purchase
    rented: str | None = None
    #: who quotes the price: the cloud providers whose median it is, the hosting provider (none for a purchase)
    providers: list[str] = Field(default_factory=list)
    #: servers the planned growth adds inside the horizon, already in total_cost (the cost curve steps at each)
    growth: list[GrowthStep] = Field(default_factory=list)
    #: a cloud cost's price group: commitment and provider classes of its quotes ("reserved-1y: 2 hyperscaler")
    price_group: str | None = None
    assumptions: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class DeploymentChoice(_Out):
    option: Literal["on-prem", "managed", "cloud"]
    provider: str
    total_cost: float
    monthly_cost: float
    currency: str
    reasons: list[str]
    #: the options the project asked for that no price list covers for this GPU ("managed: no ... price")
    gaps: list[str] = Field(default_factory=list)


class Action(_Out):
    """What the plan says to do, as its first line says it (core/verdict.py): buy the server or rent the GPUs,
    from whom, at what cost, and the runner-up way of getting them with why it lost."""

    verb: Literal["buy", "rent"]
    option: Literal["on-prem", "managed", "cloud"]
    #: what is bought or rented: the server ("1 x Dell PowerEdge XE9680 with 8 x NVIDIA H100 SXM 80GB"), the
    #: rented GPUs ("8 x NVIDIA H100 SXM 80GB") or the hosting offer ("8 x Hetzner hetzner-gex130")
    item: str
    #: from whom: "purchase", the cloud providers quoted, the hosting provider
    provider: str
    gpus: int
    #: the headline cost in `currency`, and what it is: the purchase price ("upfront"), a training run's cost
    #: ("per run") or the running cost of a service ("per month")
    cost: float
    cost_basis: Literal["upfront", "per run", "per month"]
    #: every cost of this way over the horizon (growth.horizon_months), as the deployment comparison counts it
    total_cost: float
    horizon_months: int
    currency: str
    #: the cheapest way of another kind, and why this one wins ("buying it: 29,327 EUR over 12 months; renting is
    #: cheaper from the start"); None when there is no other
    runner_up: str | None = None
    #: the sentence the reports print first
    text: str


__all__ = ["Action", "Deployment", "DeploymentChoice", "GrowthStep"]
