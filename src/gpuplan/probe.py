"""Describe a machine for `gpuplan check`: probe this one (CPU, RAM, disks and, through NVML, NVIDIA GPUs), or
read an offer's server file. The I/O half of the audit; `gpuplan.core.audit.checks` judges what these return.

Probing reads /proc/cpuinfo, psutil and NVML (nvidia-ml-py); it writes nothing, except the opt-in disk read
test (`disk_test=True`), which writes one temporary file and deletes it. Without an NVIDIA driver or GPU the
machine has no GPUs and a note says so: probing never fails for that.
"""

from __future__ import annotations

import datetime
import os
import platform
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, model_validator

from gpuplan.catalog.hardware import Catalog, builtin_catalog
from gpuplan.catalog.loader import read_structured, translate_validation_error
from gpuplan.core.audit.machine import Disk, MachineGpu, MachineSpec, match_gpu
from gpuplan.errors import InputError, UnknownNameError
from gpuplan.units import GIB, MIB

NO_GPU_NOTE = "no NVIDIA GPU or driver found"
#: the disk read test's file: large enough to pass a drive's own cache, small enough to take seconds
DISK_TEST_BYTES = 256 * MIB
#: file systems that are not disks
_NOT_DISKS = {"squashfs", "tmpfs", "devtmpfs", "overlay", "iso9660", "ramfs", "nsfs", "autofs"}


# ------------------------------------------------------------------------------------------------- probing

def probe_machine(disk_test: bool = False, *, test_dir: str | Path | None = None,
                  test_bytes: int = DISK_TEST_BYTES, catalog: Catalog | None = None,
                  nvml: Any = None) -> MachineSpec:
    """This machine: CPU model and cores, RAM, mounted disks (and their read rate with `disk_test`, in `test_dir`,
    by default the temporary folder), NVIDIA GPUs matched to `catalog` (the built-in one by default). `nvml`
    stands in for the pynvml module (tests: NVML cannot run without the driver)."""
    notes: list[str] = []
    model, sockets = _cpu_model()
    cores = psutil.cpu_count(logical=False)
    threads = psutil.cpu_count(logical=True)
    if not cores:
        cores = threads or os.cpu_count() or 1
        notes.append("physical core count not available: logical CPUs counted as cores")
    disks = _disks()
    if disk_test:
        folder = Path(test_dir or tempfile.gettempdir())
        try:
            disks, note = _read_test(disks, folder, test_bytes)
        except OSError as exc:
            note = f"disk read test in {folder} failed: {exc.strerror or exc}"
        notes.append(note)
    gpus, driver, gpu_notes = _probe_gpus(catalog or builtin_catalog(), nvml)
    notes += gpu_notes
    notes.append("network not probed")
    when = datetime.datetime.now().isoformat(timespec="minutes")
    return MachineSpec(source=f"this machine ({socket.gethostname()}), probed {when}",
                       cpu_model=f"{sockets} x {model}" if model and sockets > 1 else model, cpu_cores=cores,
                       cpu_threads=threads, ram_bytes=psutil.virtual_memory().total, disks=disks, gpus=gpus,
                       gpu_driver=driver, notes=notes)


def _cpu_model() -> tuple[str | None, int]:
    """The CPU's model name and its socket count (Linux /proc/cpuinfo; elsewhere what `platform` knows)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or platform.machine() or None, 1
    names = [ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")]
    sockets = {ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("physical id")}
    return (names[0] if names else platform.processor() or platform.machine() or None), max(len(sockets), 1)


def _disks() -> list[Disk]:
    """Mounted block devices, one entry per device (the first mount point psutil lists)."""
    out: list[Disk] = []
    seen: set[str] = set()
    for part in psutil.disk_partitions(all=False):
        if part.fstype in _NOT_DISKS or part.device.startswith("/dev/loop") or part.device in seen:
            continue
        try:
            usage = psutil.disk_usage(part.mountpoint)
        except OSError:
            continue
        seen.add(part.device)
        out.append(Disk(mount=part.mountpoint, device=part.device, total_bytes=usage.total, free_bytes=usage.free))
    return out


def _read_test(disks: list[Disk], folder: Path, size: int) -> tuple[list[Disk], str]:
    """Write `size` bytes to a temporary file in `folder`, drop it from the page cache and time reading it back;
    the rate goes to the disk that holds `folder`. The file is deleted whatever happens."""
    chunk = 4 * MIB
    fd, name = tempfile.mkstemp(prefix="gpuplan-disk-test-", dir=folder)
    try:
        block = os.urandom(chunk)  # random: compression or deduplication cannot shrink it
        with os.fdopen(fd, "wb", buffering=0) as f:
            for _ in range(max(size // chunk, 1)):
                f.write(block)
            os.fsync(f.fileno())
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        read = 0
        start = time.perf_counter()
        with open(name, "rb", buffering=0) as f:
            while data := f.read(chunk):
                read += len(data)
        rate = read / 1e9 / max(time.perf_counter() - start, 1e-9)
    finally:
        os.unlink(name)
    # the file system that holds the folder (all of them, tmpfs too), and the listed disk that is it
    real = os.path.realpath(folder)
    mount = max((p for p in psutil.disk_partitions(all=True)
                 if real == p.mountpoint or real.startswith(p.mountpoint.rstrip("/") + "/")),
                key=lambda p: len(p.mountpoint), default=None)
    holder = next((d for d in disks if mount is not None and d.mount == mount.mountpoint), None)
    note = (f"disk read test: {read / MIB:,.0f} MiB read back from {folder} at {rate:,.2f} GB/s, after dropping it "
            "from the page cache; caches below the OS (RAID controller, a VM's host) can still inflate it")
    if holder is None:
        return disks, note + f"; {folder} is on no listed disk (tmpfs?), so no disk gets the rate"
    return [d.model_copy(update={"read_gb_s": rate}) if d is holder else d for d in disks], note


def _probe_gpus(catalog: Catalog, nvml: Any = None) -> tuple[list[MachineGpu], str | None, list[str]]:
    """NVIDIA GPUs through NVML, each matched to the catalog; ([], None, [note]) without a driver or GPU."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return [], None, [f"{NO_GPU_NOTE}: nvidia-ml-py is not installed"]
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return [], None, [f"{NO_GPU_NOTE} (NVML: {exc})"]
    try:
        driver = _text(_nv(nvml, nvml.nvmlSystemGetDriverVersion))
        count = _nv(nvml, nvml.nvmlDeviceGetCount) or 0
        rows = list(catalog.gpus.rows.values())
        gpus = [_gpu(nvml, nvml.nvmlDeviceGetHandleByIndex(i), rows) for i in range(count)]
    finally:
        _nv(nvml, nvml.nvmlShutdown)
    notes = [] if gpus else [f"{NO_GPU_NOTE}: the NVIDIA driver {driver or ''} sees no GPU"]
    for i, g in enumerate(gpus):
        if g.catalog_id is None:
            notes.append(f"GPU {i} {g.name!r} matches no catalog row: judged by its memory alone, speed not estimated")
    return gpus, driver, notes


def _gpu(nvml: Any, h: Any, rows: list[Any]) -> MachineGpu:
    name = _text(nvml.nvmlDeviceGetName(h)) or "unknown NVIDIA GPU"
    memory = int(nvml.nvmlDeviceGetMemoryInfo(h).total)
    try:
        current, _pending = nvml.nvmlDeviceGetEccMode(h)
        ecc: bool | None = current == nvml.NVML_FEATURE_ENABLED
    except nvml.NVMLError_NotSupported:
        ecc = False  # the GPU has no ECC (GeForce)
    except nvml.NVMLError:
        ecc = None
    limit_mw = _nv(nvml, nvml.nvmlDeviceGetEnforcedPowerLimit, h)
    links = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _nv(nvml, nvml.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            break  # no NVLink, or no more links
        links += state == nvml.NVML_FEATURE_ENABLED
    return MachineGpu(name=name, catalog_id=match_gpu(name, memory, rows), memory_bytes=memory, ecc=ecc,
                      power_limit_w=limit_mw / 1000 if limit_mw else None,
                      pcie_gen=_nv(nvml, nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                      pcie_width=_nv(nvml, nvml.nvmlDeviceGetMaxPcieLinkWidth, h), nvlink_links=links)


def _nv(nvml: Any, fn: Any, *args: Any) -> Any:
    """An NVML query, None when the GPU or driver does not support it."""
    try:
        return fn(*args)
    except nvml.NVMLError:
        return None


def _text(v: str | bytes | None) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


# --------------------------------------------------------------------------------------------- server files

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


__all__ = ["NO_GPU_NOTE", "ServerDisk", "ServerFile", "ServerGpu", "parse_server", "probe_machine",
           "read_server_file"]
