"""The server builder's rules (data/server_rules.toml) -> `ServerRules`, one typed field per rule id.

Every rule row has `id`, `value`, `source` and `as_of`; `ServerRules.sources` keeps each rule's source so a
report can cite it. A bad file is a `CatalogError` naming the file, the rule id and, for a table, the key.
"""

from __future__ import annotations

import datetime
from functools import lru_cache
from importlib import resources
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpuplan.errors import CatalogError, suggest
from gpuplan.schema.hardware import Generation
from gpuplan.schema.project import Modality
from gpuplan.schema.server import HostMemoryType

PATH = "gpuplan/data/server_rules.toml"
MODALITIES: tuple[str, ...] = get_args(Modality)
GENERATIONS: tuple[str, ...] = get_args(Generation)
DIMM_MEMORY_TYPES: tuple[str, ...] = tuple(t for t in get_args(HostMemoryType) if t.startswith("DDR"))


def _complete(table: dict[str, Any], keys: tuple[str, ...], what: str) -> dict[str, Any]:
    missing = [k for k in keys if k not in table]
    extra = [k for k in table if k not in keys]
    if missing:
        raise ValueError(f"no value for {what} {missing[0]!r} (needs: {', '.join(keys)})")
    if extra:
        raise ValueError(f"unknown {what} {extra[0]!r} (allowed: {', '.join(keys)})")
    return table


class ServerRules(BaseModel):
    """The constants of `core.server.build_server`. Field names are the rule ids of data/server_rules.toml."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # CPU
    min_cpu_cores: int = Field(gt=0)
    #: host cores per GPU, by data modality
    cpu_cores_per_gpu: dict[str, float]
    # host memory
    ram_to_vram_ratio: float = Field(gt=0)
    #: with CPU offload, RAM kept for the page cache: this fraction of the ratio figure (or the dataset, if smaller)
    ram_data_cache_fraction: float = Field(ge=0, le=1)
    #: RDIMM sizes on sale, GB, by memory type (DDR4, DDR5)
    dimm_sizes_gb: dict[str, list[int]]
    dimms_per_channel_unknown: int = Field(ge=1, le=2)
    ram_round_gb_per_socket: int = Field(gt=0)
    # local NVMe
    checkpoints_kept: int = Field(ge=1)
    scratch_fraction: float = Field(ge=0)
    #: sequential read floor for training, GB/s per GPU, by modality
    nvme_read_gbs_per_gpu: dict[str, float]
    # network
    #: compute-fabric line rate per GPU for multi-node training, Gb/s, by GPU generation
    network_gbps_per_gpu: dict[str, int]
    storage_nic_gbps: int = Field(gt=0)
    storage_nics_multi_node: int = Field(ge=0)
    # power and cooling
    dimm_w: float = Field(ge=0)
    drive_w: float = Field(ge=0)
    nic_w: float = Field(ge=0)
    chassis_overhead_fraction: float = Field(ge=0, le=2)
    psu_headroom: float = Field(ge=1)
    psu_redundancy_production: float = Field(ge=1)
    btu_h_per_w: float = Field(gt=0)
    liquid_above_gpu_tdp_w: float = Field(gt=0)
    rack_power_typical_w: float = Field(gt=0)
    # which GPUs a platform takes
    baseboard_full_only: bool
    open_air_listed_only: bool
    # price
    server_overhead_price_factor: float = Field(ge=1)
    cluster_interconnect_price_fraction: float = Field(ge=0)
    #: rule id -> its source, and -> its date
    sources: dict[str, str] = Field(default_factory=dict)
    as_of: dict[str, datetime.date] = Field(default_factory=dict)

    @field_validator("cpu_cores_per_gpu", "nvme_read_gbs_per_gpu")
    @classmethod
    def _by_modality(cls, v: dict[str, float]) -> dict[str, float]:
        if any(x <= 0 for x in v.values()):
            raise ValueError("every value must be > 0")
        return _complete(v, MODALITIES, "modality")

    @field_validator("network_gbps_per_gpu")
    @classmethod
    def _by_generation(cls, v: dict[str, int]) -> dict[str, int]:
        if any(x <= 0 for x in v.values()):
            raise ValueError("every value must be > 0")
        return _complete(v, GENERATIONS, "generation")

    @field_validator("dimm_sizes_gb")
    @classmethod
    def _dimms(cls, v: dict[str, list[int]]) -> dict[str, list[int]]:
        for key, sizes in v.items():
            if not sizes or sizes != sorted(set(sizes)) or sizes[0] <= 0:
                raise ValueError(f"{key}: sizes must be positive, ascending and without repeats")
        return _complete(v, DIMM_MEMORY_TYPES, "memory type")


RULE_IDS: tuple[str, ...] = tuple(f for f in ServerRules.model_fields if f not in ("sources", "as_of"))


def parse_server_rules(text: str, path: str = PATH) -> ServerRules:
    """Rules from the text of a server_rules.toml; CatalogError naming the file, rule and key otherwise."""
    from gpuplan.catalog.loader import read_toml

    data = read_toml(text, path)
    rows = data.get("rule", [])
    if not isinstance(rows, list):
        raise CatalogError(path, "rule must be a list of rows ([[rule]] in TOML)", field="rule")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    dates: dict[str, datetime.date] = {}
    for i, row in enumerate(rows):
        rid = row.get("id", i + 1) if isinstance(row, dict) else i + 1
        if not isinstance(row, dict):
            raise CatalogError(path, "a rule must be a table of fields", row=rid)
        for key in ("id", "value", "source", "as_of"):
            if key not in row:
                raise CatalogError(path, f"missing {key}", row=rid, field=key)
        unknown = sorted(set(row) - {"id", "value", "source", "as_of", "notes"})
        if unknown:
            raise CatalogError(path, "unknown field (allowed: id, value, source, as_of, notes)", row=rid,
                               field=unknown[0])
        if rid not in RULE_IDS:
            hint = suggest(str(rid), RULE_IDS)
            raise CatalogError(path, "unknown rule id" + (f"; did you mean {hint[0]!r}?" if hint else ""), row=rid,
                               field="id")
        if rid in values:
            raise CatalogError(path, f"rule {rid!r} appears twice", row=rid, field="id")
        if not isinstance(row["source"], str) or not row["source"].strip():
            raise CatalogError(path, "source must be a non-empty string", row=rid, field="source")
        if not isinstance(row["as_of"], datetime.date) or isinstance(row["as_of"], datetime.datetime):
            raise CatalogError(path, "as_of must be a date (YYYY-MM-DD)", row=rid, field="as_of")
        if row["as_of"] > datetime.date.today():
            raise CatalogError(path, f"as_of {row['as_of']} is in the future", row=rid, field="as_of")
        values[rid] = row["value"]
        sources[rid] = row["source"]
        dates[rid] = row["as_of"]
    try:
        return ServerRules(**values, sources=sources, as_of=dates)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            raise CatalogError(path, f"no rule {loc[0]!r}", row=loc[0]) from None
        raise CatalogError(path, msg, row=loc[0], field=".".join(["value", *loc[1:]])) from None


@lru_cache(maxsize=1)
def load_server_rules() -> ServerRules:
    """The built-in server rules (data/server_rules.toml)."""
    text = resources.files("gpuplan.data").joinpath("server_rules.toml").read_text(encoding="utf-8")
    return parse_server_rules(text, PATH)


__all__ = ["ServerRules", "load_server_rules", "parse_server_rules"]
