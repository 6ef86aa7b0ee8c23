"""What the cost model reads (core/cost/tco.py): how a configuration is used over the horizon (`Usage`), the
hardware (`Config`) and the resolved assumptions with their sources (`Assumptions`: the project's `deployment`
values over data/tco.toml's, every money one in the plan's currency). Pure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Usage(BaseModel):
    """How the configuration is used over the horizon."""

    model_config = ConfigDict(frozen=True)

    horizon_months: int
    production: bool
    serving: bool
    #: fraction of the time the servers are busy
    utilization: float
    #: training: wall hours of one run on this configuration (None for serving)
    run_hours: float | None = None
    #: serving: tokens generated per second at the planned load
    tokens_per_s: float | None = None
    #: bytes kept on cloud storage (dataset, checkpoints)
    storage_bytes: float = 0.0
    #: serving: the servers the planned growth adds, (month, servers) in month order (core/cost/growth.py)
    additions: tuple[tuple[int, int], ...] = ()
    #: serving: the load over the horizon on average against the planned load (the tokens served grow with it)
    load_mean: float = 1.0
    #: how the growth is described in the deployments' assumptions
    growth_note: str | None = None
    #: the cloud commitments the project allows (deployment.price_groups.commitments); empty: every one
    cloud_kinds: tuple[str, ...] = ()


class Config(BaseModel):
    """The hardware: what the plan recommends."""

    model_config = ConfigDict(frozen=True)

    gpu_id: str
    gpus_per_server: int
    servers: int
    price: float | None  # purchase of all servers, in the output currency
    power_w: float  # per server, at full load
    #: GPUs that must share one machine (a training server's GPUs, a serving replica's tp x pp); None: all of a
    #: server's. A cloud quote for a smaller instance does not price this configuration
    together: int | None = None


class Assumptions(BaseModel):
    """Resolved cost-model inputs (project values over the defaults), with where each came from."""

    model_config = ConfigDict(frozen=True)

    values: dict[str, float]
    sources: dict[str, str]

    def get(self, key: str) -> float:
        return self.values[key]

    def cite(self, key: str, fmt: str = "{:g}") -> str:
        return f"{key} {fmt.format(self.values[key])} ({self.sources[key]})"


#: the cost model's inputs: (project key in `deployment`, data/tco.toml id, default when the data has no row); the
#: money ones are in the plan's currency (the price book is converted into it, data ids keep their "usd")
INPUTS: list[tuple[str, str | None, float]] = [
    ("pue", "pue", 1.0),
    ("electricity_per_kwh", "electricity_usd_per_kwh", 0.0),
    ("average_draw_fraction", "average_draw_fraction", 1.0),
    ("idle_draw_fraction", "idle_draw_fraction", 0.0),
    ("depreciation_years", "depreciation_years", 5.0),
    ("residual_value_fraction", "residual_value_fraction", 0.0),
    ("install_fraction", "install_fraction", 0.0),
    ("support_fraction_per_year", "support_fraction_per_year", 0.0),
    ("colocation_per_kw_month", "colocation_usd_per_kw_month", 0.0),
    ("staff_fte_per_server", "staff_fte_per_server", 0.0),
    ("staff_cost_per_fte_year", "staff_usd_per_fte_year", 0.0),
    ("spare_fraction_production", "spare_fraction_production", 0.0),
    ("cloud_storage_per_tb_month", "cloud_storage_usd_per_tb_month", 0.0),
]


def resolve_assumptions(overrides: dict[str, float | None], data: dict[str, tuple[float, str]],
                        production: bool) -> Assumptions:
    """Project values over the data's defaults, both in the plan's currency; a value the data lacks counts as its
    neutral default and says so. `data`: id -> (value, source)."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for key, data_id, neutral in INPUTS:
        if overrides.get(key) is not None:
            values[key], sources[key] = float(overrides[key]), "project file"  # type: ignore[arg-type]
        elif data_id in data:
            values[key], sources[key] = data[data_id]
        else:
            values[key], sources[key] = neutral, "no default in data/tco.toml: not counted"
    util_id = "utilization_production" if production else "utilization_experiment"
    if overrides.get("utilization") is not None:
        values["utilization"], sources["utilization"] = float(overrides["utilization"]), "project file"  # type: ignore[arg-type]
    elif util_id in data:
        values["utilization"], sources["utilization"] = data[util_id]
    else:
        values["utilization"], sources["utilization"] = (0.7 if production else 0.15), "no default in data/tco.toml"
    return Assumptions(values=values, sources=sources)


__all__ = ["INPUTS", "Assumptions", "Config", "Usage", "resolve_assumptions"]
