"""The machine an audit judges (`gpuplan check`): its GPUs, disks, CPU and RAM as `gpuplan.cli.probe` probes them or a
server file gives them; which catalog row a driver-reported GPU is; which GPUs one job runs on and with what
layout. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.schema.hardware import Gpu
from gpuplan.schema.project import Hardware, Layout, Project
from gpuplan.units import GIB

#: a driver-reported memory within this fraction of a catalog row's names that row
MEMORY_MATCH_TOLERANCE = 0.10


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Disk(_Frozen):
    """A mounted volume."""

    mount: str
    device: str | None = None
    total_bytes: int = Field(ge=0)
    #: None: not known (an offer)
    free_bytes: int | None = Field(None, ge=0)
    #: sequential read, GB/s (decimal): measured by `--disk-test`, or given in a server file
    read_gb_s: float | None = Field(None, gt=0)


class MachineGpu(_Frozen):
    """One GPU as the driver reports it (or a server file describes it)."""

    name: str
    #: the catalog row (data/gpus.toml) it is, matched by name and memory; None when none matches
    catalog_id: str | None = None
    memory_bytes: int = Field(gt=0)
    #: None: unknown
    ecc: bool | None = None
    power_limit_w: float | None = Field(None, gt=0)
    #: the best link the GPU and its slot can train to (NVML's max link), not the current one, which drops at idle
    pcie_gen: int | None = Field(None, ge=1, le=6)
    pcie_width: int | None = Field(None, ge=1, le=32)
    #: active NVLink links of this GPU; None: unknown
    nvlink_links: int | None = Field(None, ge=0)


class MachineSpec(_Frozen):
    """A machine: probed (`probe_machine`) or read from a server file (`read_server_file`)."""

    #: "this machine (HOST), probed DATE" or the server file's path
    source: str
    cpu_model: str | None = None
    #: physical cores, all sockets
    cpu_cores: int = Field(ge=1)
    cpu_threads: int | None = Field(None, ge=1)
    ram_bytes: int = Field(gt=0)
    disks: list[Disk] = Field(default_factory=list)
    gpus: list[MachineGpu] = Field(default_factory=list)
    gpu_driver: str | None = None
    #: what could not be probed, and where figures come from
    notes: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------------------------ matching and layouts

_FORM_TOKENS = {"sxm", "sxm2", "sxm4", "sxm5", "pcie", "nvl", "server"}
_MEMORY_TOKEN = re.compile(r"^\d+gb$")


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}


def match_gpu(name: str, memory_bytes: int | None, rows: Iterable[Gpu]) -> str | None:
    """The catalog id of a GPU from the name its driver reports and its memory: an exact id, name or alias
    first; else the rows whose model tokens all appear in the name ("NVIDIA H100 80GB HBM3" has h100), narrowed
    by form factor (PCIe, NVL, SXM or HBM in the name; neither: the SXM row) and then by the closest memory
    (within 10%). None when nothing matches: the GPU is then judged by its memory alone."""
    rows = list(rows)
    key = name.strip().lower()
    for g in rows:
        if key in (g.id, g.name.lower(), *(a.lower() for a in g.aliases)):
            return g.id
    have = _tokens(name)
    found: list[tuple[int, Gpu]] = []
    for g in rows:
        family = [t for t in g.id.split("-") if t not in _FORM_TOKENS and not _MEMORY_TOKEN.match(t)]
        if family and set(family) <= have:
            found.append((len(family), g))
    if not found:
        return None
    most = max(n for n, _ in found)
    cands = [g for n, g in found if n == most]
    if "pcie" in have:
        form = [g for g in cands if g.form_factor == "pcie" and "nvl" not in g.id.split("-")]
    elif "nvl" in have:
        form = [g for g in cands if "nvl" in g.id.split("-")]
    else:
        form = [g for g in cands if g.form_factor != "pcie"]
    cands = form or cands
    if memory_bytes is None:
        return cands[0].id if len(cands) == 1 else None
    best = min(cands, key=lambda g: abs(g.memory_gib * GIB - memory_bytes))
    if abs(best.memory_gib * GIB - memory_bytes) > MEMORY_MATCH_TOLERANCE * memory_bytes:
        return None
    return best.id


def job_gpus(machine: MachineSpec) -> list[MachineGpu]:
    """The GPUs one job runs on: the largest group of one kind (ties: the larger memory); [] without a GPU."""
    groups: dict[str, list[MachineGpu]] = {}
    for g in machine.gpus:
        groups.setdefault(g.catalog_id or g.name, []).append(g)
    if not groups:
        return []
    return max(groups.values(), key=lambda gs: (len(gs), min(g.memory_bytes for g in gs)))


def layout_for(project: Project, n: int) -> Layout | None:
    """The layout the project runs with on `n` GPUs: its own when `n` is a multiple of its tp x pp; else for
    training ZeRO-3 over the GPUs (FSDP, as `gpuplan fit` takes), one GPU plain. None for inference without a
    usable layout: the command then tries tensor-parallel degrees 1, 2, 4, 8 for the first that fits."""
    hw = project.hardware
    if hw is not None and n % (hw.layout.tp * hw.layout.pp) == 0:
        return hw.layout
    if project.workload.task == "inference":
        return None if n > 1 else Layout()
    return Layout(zero=3) if n > 1 else Layout()


def on_machine(project: Project, gpu_id: str | None, n: int, layout: Layout) -> Project:
    """The project on `n` GPUs with `layout`; inference spreads its concurrent requests over the replicas."""
    update: dict[str, object] = {"hardware": Hardware(gpu=gpu_id, gpus=n, layout=layout)}
    w = project.workload
    replicas = max(n // (layout.tp * layout.pp), 1)
    if w.task == "inference" and replicas > 1:
        update["workload"] = w.model_copy(update={"batch_size": math.ceil(w.batch_size / replicas)})
    return project.model_copy(update=update)


__all__ = ["MEMORY_MATCH_TOLERANCE", "Disk", "MachineGpu", "MachineSpec", "job_gpus", "layout_for", "match_gpu",
           "on_machine"]
