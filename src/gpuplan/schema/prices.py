"""Price lists and cost assumptions for the deployment comparison (issue: deployment options and TCO).

Prices are in their own currency (`currency`); a plan converts them into its own once, with the dated rates of
data/fx.toml (gpuplan.catalog.currency). Every row has `source` and `as_of`; a price older than six months is
flagged in the output.
"""

import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.schema.hardware import Currency, DataRow

CloudKind = Literal["on-demand", "spot", "reserved-1y", "reserved-3y"]


class _Row(DataRow):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    source: str = Field(min_length=1)
    as_of: datetime.date
    notes: str | None = None


class CloudPrice(_Row):
    """A cloud or GPU-rental price per GPU-hour: shared, virtualised capacity billed by use."""

    gpu_id: str
    provider: str = Field(min_length=1)
    kind: CloudKind = "on-demand"
    price_per_gpu_hour: float = Field(gt=0, lt=200)
    currency: Currency = "USD"
    #: the provider is a hyperscaler (AWS, Azure, GCP, Oracle) or a specialist GPU cloud / marketplace
    tier: Literal["hyperscaler", "specialist", "marketplace"] = "specialist"
    #: how finely usage is billed, seconds (1: per second, 60: per minute, 3600: per hour; None: not sourced)
    billing_increment_s: int | None = Field(None, gt=0, le=86_400)
    #: the least time billed per instance (node) each time it starts, hours (1/60: one minute; None: not sourced)
    minimum_billed_hours: float | None = Field(None, gt=0, le=8_784)
    #: where the two billing fields come from (the price's `source` may not state them)
    billing_source: str | None = Field(None, min_length=1)
    #: GPUs in the instance this quote is for (8 for an 8-GPU server, 1 for a single-GPU VM), as its source or the
    #: cited instance table states it; None: not stated. A plan prices a server from a quote only where one instance
    #: holds the GPUs that must share a machine (issue 28)
    instance_gpus: int | None = Field(None, ge=1, le=72)


class HostingOffer(_Row):
    """A dedicated server rented by the month, owned and maintained by the provider (managed hosting)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    provider: str = Field(min_length=1)
    gpu_id: str
    gpus: int = Field(gt=0, le=72)
    monthly: float = Field(gt=0)
    setup: float = Field(0.0, ge=0)
    currency: Currency = "USD"
    #: minimum commitment, months (1: monthly)
    min_months: int = Field(1, ge=1, le=60)
    #: what the fee includes, in the provider's words: power, bandwidth, support hours, OS/CUDA, replacement SLA
    includes: list[str] = Field(default_factory=list)
    #: hardware replacement or response time the provider commits to, hours (None: not stated)
    sla_hours: float | None = Field(None, gt=0)
    #: how a partial month after the minimum term is billed, seconds (3600: hourly up to the monthly fee;
    #: None: whole months or not sourced)
    billing_increment_s: int | None = Field(None, gt=0, le=2_678_400)
    #: where `billing_increment_s` comes from (the price's `source` may not state it)
    billing_source: str | None = Field(None, min_length=1)


class ClusterOffer(_Row):
    """A provider's multi-node GPU cluster (data/clusters.toml): several servers on an RDMA fabric, what a training
    run across servers needs. A cloud price prices a configuration spanning servers only when its provider offers
    the GPU as such a cluster (core/cost/clusters.py)."""

    provider: str = Field(min_length=1)
    #: the price rows' `provider` names it covers: a row matches when its provider starts with one of them
    price_providers: list[str] = Field(min_length=1)
    #: the GPUs offered as clusters (empty: none found, said in `source`)
    gpu_ids: list[str] = Field(default_factory=list)
    fabric: str = Field(min_length=1)
    #: the largest cluster the source states, GPUs (0: not stated)
    max_gpus: int = Field(0, ge=0)
    #: rentable without a contract (false where the source says contract, sales or a limit increase, or nothing)
    self_serve: bool = False

    def covers(self, gpu_id: str, provider: str, gpus: int = 0) -> bool:
        """Whether a price row of `provider` for `gpu_id` is this cluster offer's, for a cluster of `gpus` GPUs
        (0: any size): one larger than the offer's stated largest (`max_gpus`) is not."""
        return (gpu_id in self.gpu_ids and any(provider.startswith(p) for p in self.price_providers)
                and (self.max_gpus == 0 or gpus <= self.max_gpus))


class Assumption(_Row):
    """A default of the cost model (PUE, electricity price, staff cost...), overridable in the project file."""

    id: str
    value: float
    unit: str = Field(min_length=1)


__all__ = ["Assumption", "CloudKind", "CloudPrice", "ClusterOffer", "Currency", "HostingOffer", "PriceBook"]


class PriceBook(BaseModel):
    """Every price row gpuplan plans with: the built-in lists and the user's (--prices), and the cost assumptions."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    cloud: list[CloudPrice]
    hosting: list[HostingOffer]
    assumptions: dict[str, Assumption]
    user_files: tuple[str, ...] = ()
    #: the providers' multi-node cluster offers (data/clusters.toml and the user's `cluster` rows)
    clusters: list[ClusterOffer] = Field(default_factory=list)
