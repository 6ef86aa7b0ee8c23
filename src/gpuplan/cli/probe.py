"""Describe this machine for `gpuplan check --this-machine` and `gpuplan plan --this-machine`: its CPU, RAM, disks
and, through NVML, NVIDIA GPUs. The I/O half of the audit beside the commands that use it; an offer's server file is
read by gpuplan.catalog.server_file, and `gpuplan.core.audit.checks` judges what both return.

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

from gpuplan.catalog.hardware import Catalog, builtin_catalog
from gpuplan.core.audit.machine import Disk, MachineGpu, MachineSpec, match_gpu
from gpuplan.units import MIB

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
            import pynvml
        except ImportError:
            return [], None, [f"{NO_GPU_NOTE}: nvidia-ml-py is not installed"]
        nvml = pynvml
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


__all__ = ["DISK_TEST_BYTES", "NO_GPU_NOTE", "probe_machine"]
