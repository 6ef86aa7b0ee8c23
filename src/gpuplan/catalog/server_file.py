"""A machine described in a server file (`gpuplan check --server FILE`, `gpuplan plan --have FILE`): an offer's or
a machine's CPU, RAM, disks and GPUs in YAML or JSON, read into the `MachineSpec` the audit judges
(gpuplan.core.audit.checks). The probe of this machine is gpuplan.cli.probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, model_validator

from gpuplan.catalog.hardware import Catalog, builtin_catalog
from gpuplan.catalog.loader import read_structured, translate_validation_error
from gpuplan.core.audit.machine import Disk, MachineGpu, MachineSpec, match_gpu
from gpuplan.errors import InputError, UnknownNameError
from gpuplan.units import GIB


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ServerDisk(_Section):
    mount: str = Field(min_length=1)
    #: capacity in TB as drives are sold (decimal)
    size_tb: PositiveFloat
    free_tb: float | None = Field(None, ge=0)
    read_gb_s: PositiveFloat | None = None


class ServerGpu(_Section):
    """GPUs of one kind: a catalog id (the rest from the catalog row), or a name and memory_gib."""

    catalog_id: str | None = None
    name: str | None = None
    count: PositiveInt = 1
    memory_gib: PositiveFloat | None = None
    ecc: bool | None = None
    power_limit_w: PositiveFloat | None = None
    pcie_gen: int | None = Field(None, ge=1, le=6)
    pcie_width: int | None = Field(None, ge=1, le=32)
    nvlink_links: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _named(self) -> ServerGpu:
        if self.catalog_id is None and self.name is None:
            raise ValueError("give catalog_id (see `gpuplan catalog gpus`) or name and memory_gib")
        return self


class ServerFile(_Section):
    """The server file of `gpuplan check --server`: units in the key names."""

    name: str | None = None
    cpu_model: str | None = None
    #: physical cores, all sockets
    cpu_cores: PositiveInt
    cpu_threads: PositiveInt | None = None
    #: GB as DIMMs are sold (binary: 2048 is 2 TiB)
    ram_gb: PositiveFloat
    disks: list[ServerDisk] = Field(default_factory=list)
    gpus: list[ServerGpu] = Field(default_factory=list)
    notes: str | None = None


def read_server_file(path: str | Path, catalog: Catalog | None = None) -> MachineSpec:
    """A server file (YAML or JSON) as a machine; InputError naming the file and the field otherwise."""
    p = Path(path)
    return parse_server(read_structured(p), str(p), catalog or builtin_catalog())


def parse_server(data: Any, source: str, catalog: Catalog) -> MachineSpec:
    if not isinstance(data, dict):
        raise InputError([], "a server file is a mapping of keys (cpu_cores, ram_gb, disks, gpus, ...)",
                         source=source)
    try:
        spec = ServerFile.model_validate(data)
    except ValidationError as exc:
        # a misspelt key explains the "is required" that comes with it: report it first
        extra = next((e for e in exc.errors() if e["type"] == "extra_forbidden"), None)
        if extra is not None:
            exc = ValidationError.from_exception_data(exc.title, [
                {"type": "extra_forbidden", "loc": extra["loc"], "input": extra["input"]}])
        raise translate_validation_error(exc, source, root=ServerFile) from None
    notes: list[str] = [spec.notes] if spec.notes else []
    gpus: list[MachineGpu] = []
    for i, entry in enumerate(spec.gpus):
        row = None
        if entry.catalog_id is not None:
            row = next((g for g in catalog.gpus.rows.values() if entry.catalog_id.lower() in
                        (g.id, *(a.lower() for a in g.aliases))), None)
            if row is None:
                raise UnknownNameError(["gpus", i, "catalog_id"], "gpu", entry.catalog_id, list(catalog.gpus.rows),
                                       source=source)
        elif entry.name is not None:
            found = match_gpu(entry.name, None if entry.memory_gib is None else int(entry.memory_gib * GIB),
                              catalog.gpus.rows.values())
            row = catalog.gpus.rows[found] if found else None
        if row is None and entry.memory_gib is None:
            raise InputError(["gpus", i, "memory_gib"], f"is required: {entry.name!r} matches no catalog GPU (give "
                             "catalog_id, or memory_gib)", source=source)
        taken = [k for k in ("memory_gib", "ecc", "power_limit_w", "pcie_gen", "pcie_width")
                 if getattr(entry, k) is None and row is not None]
        if row is not None and taken:
            notes.append(f"gpus[{i}]: {', '.join(taken)} from the catalog row {row.id} (datasheet), not the offer")
        gpu = MachineGpu(
            name=entry.name or (row.name if row else "GPU"), catalog_id=row.id if row else None,
            memory_bytes=int((entry.memory_gib or (row.memory_gib if row else 0)) * GIB),
            ecc=entry.ecc if entry.ecc is not None or row is None else row.ecc,
            power_limit_w=entry.power_limit_w or (row.tdp_w if row else None),
            pcie_gen=entry.pcie_gen or (row.interconnect.pcie_gen if row else None),
            pcie_width=entry.pcie_width or (row.interconnect.pcie_lanes if row else None),
            nvlink_links=entry.nvlink_links)
        gpus += [gpu] * entry.count
    disks = [Disk(mount=d.mount, total_bytes=int(d.size_tb * 1e12),
                  free_bytes=None if d.free_tb is None else int(d.free_tb * 1e12), read_gb_s=d.read_gb_s)
             for d in spec.disks]
    if not disks:
        notes.append("no disks given: disk capacity and read rate not checked")
    return MachineSpec(source=source + (f" ({spec.name})" if spec.name else ""), cpu_model=spec.cpu_model,
                       cpu_cores=spec.cpu_cores, cpu_threads=spec.cpu_threads, ram_bytes=int(spec.ram_gb * GIB),
                       disks=disks, gpus=gpus, notes=notes)


__all__ = ["ServerDisk", "ServerFile", "ServerGpu", "parse_server", "read_server_file"]
