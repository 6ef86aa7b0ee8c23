"""Everything a plan is computed from besides the project: the hardware catalog, the prices, the speed and memory
assumptions, the server rules and the exchange rates, loaded once by `gpuplan.api` (built-in files plus the
user's --catalog and --prices) and handed to the pure core. Nothing in it depends on the date: the date a plan is
made for is the plan's own input (`core.advise.plan`'s `as_of`), so one loaded bundle serves plans of any date.

Every amount in a bundle is in one currency, `currency`: the files' own figures (USD, or the currency a quote
states) until `gpuplan.catalog.currency.in_currency` converts it for a plan, once, with the dated rates of
data/fx.toml. The core computes in the bundle's currency and never reads a rate."""

import datetime
from dataclasses import dataclass, field

from gpuplan.schema.catalog import Catalog
from gpuplan.schema.estimate import ActivationTable, Overheads
from gpuplan.schema.prices import PriceBook
from gpuplan.schema.rules import ServerRules
from gpuplan.schema.serving import ServingData
from gpuplan.schema.speed import SpeedModel


@dataclass(frozen=True, eq=False)
class Bundle:
    catalog: Catalog
    prices: PriceBook
    speed: SpeedModel
    table: ActivationTable
    overheads: Overheads
    rules: ServerRules
    #: 1 USD in each currency (data/fx.toml): what gpuplan.catalog.currency converts with; the core never reads it
    fx: dict[str, float]
    #: what a host must support, by GPU generation and by platform need (data/host_support.toml)
    host_support: dict[str, str]
    platform_needs: dict[str, str]
    #: the serving engine's facts (data/serving.toml): serving plans and estimates need them
    serving: ServingData | None = None
    #: the date of each rate of `fx`
    fx_as_of: dict[str, datetime.date] = field(default_factory=dict)
    #: the currency every amount of the bundle is in; None: as the files give them (USD, and each quote's own
    #: currency), before gpuplan.catalog.currency.in_currency converts them for a plan
    currency: str | None = None
    #: how the amounts were converted, for the deployments' assumptions ("amounts in EUR: 1 USD = 0.9239 EUR
    #: (data/fx.toml, 2024-12-31)"); None when nothing was converted
    conversion: str | None = None


__all__ = ["Bundle"]
