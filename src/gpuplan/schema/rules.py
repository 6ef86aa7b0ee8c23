"""The server builder's rules as data (`ServerRules`, one typed field per rule id of data/server_rules.toml).
Reading and checking the file is `gpuplan.catalog.server_rules`'s work; this module holds only the type."""

import datetime
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuplan.schema.hardware import Generation
from gpuplan.schema.project import Modality
from gpuplan.schema.server import HostMemoryType

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

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    # CPU
    min_cpu_cores: int = Field(gt=0)
    #: host cores per GPU, by data modality
    cpu_cores_per_gpu: dict[str, float]
    # host memory
    ram_to_vram_ratio: float = Field(gt=0)
    #: with CPU offload, RAM kept for the page cache: this fraction of the ratio figure (or the dataset, if smaller)
    ram_data_cache_fraction: float = Field(ge=0, le=1)
    #: serving: RAM for the checkpoint in the page cache (x the weights), the engine's CPU swap space per GPU (GB)
    #: and the operating system and engine processes (GB); RAM >= 2x VRAM stays the training floor
    ram_serving_checkpoint_factor: float = Field(ge=0, le=4)
    ram_serving_swap_gb_per_gpu: float = Field(ge=0, le=1024)
    ram_serving_base_gb: float = Field(ge=0, le=4096)
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
    #: the most tower servers a production deployment is built of (towers have no rack mounting, redundant power or
    #: out-of-band management)
    production_tower_max_servers: int = Field(default=1, ge=0)
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


__all__ = ["DIMM_MEMORY_TYPES", "GENERATIONS", "MODALITIES", "ServerRules"]
