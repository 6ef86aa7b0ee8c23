"""Everything a plan is computed from besides the project: the hardware catalog, the prices, the speed and memory
assumptions, the server rules and the exchange rates, loaded once by `gpuplan.api` (built-in files plus the
user's --catalog and --prices) and handed to the pure core. Nothing in it depends on the date: the date a plan is
made for is the plan's own input (`core.advise.plan`'s `as_of`), so one loaded bundle serves plans of any date."""

from dataclasses import dataclass

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
    #: 1 USD in each currency (data/fx.toml)
    fx: dict[str, float]
    #: what a host must support, by GPU generation and by platform need (data/host_support.toml)
    host_support: dict[str, str]
    platform_needs: dict[str, str]
    #: the serving engine's facts (data/serving.toml): serving plans and estimates need them
    serving: ServingData | None = None


__all__ = ["Bundle"]
