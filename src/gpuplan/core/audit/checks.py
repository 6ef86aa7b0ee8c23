"""Audit a machine the user has, or is offered, for one project (`gpuplan check`): does the job fit, which
part is the bottleneck, what to change.

Pure: the machine (`gpuplan.probe` probes it or reads a server file), the project's memory and speed estimate on
that machine's GPUs (`gpuplan.api.estimate`, called by the command), the server rules and the catalog go in;
checklist items with the numbers behind them come out. The host checks use the same rules as the server
builder (core/server/builder.py, data/server_rules.toml), so an audited machine and a proposed one are judged alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from gpuplan.schema.hardware import Gpu
from gpuplan.schema.plan import ChecklistItem, Verdict
from gpuplan.schema.project import Hardware, Layout, Project
from gpuplan.schema.result import EstimateResult
from gpuplan.units import GB, GIB

if TYPE_CHECKING:
    from gpuplan.catalog.hardware import Catalog
    from gpuplan.catalog.server_rules import ServerRules

CHECKLIST = ("VRAM validated", "System synergy", "Bottleneck", "What to change")
#: psutil reports the RAM the kernel may use, a few percent below what is installed (firmware, kernel reserve)
RAM_REPORTED_FRACTION = 0.95
#: a driver-reported memory within this fraction of a catalog row's names that row
MEMORY_MATCH_TOLERANCE = 0.10
#: PCIe payload bandwidth per lane and direction, GB/s, by generation (PCI-SIG: 2.5, 5, 8, 16, 32, 64 GT/s)
PCIE_LANE_GB_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
#: pre-tokenized text on disk when the project gives no dataset size per sample (uint32 token ids; as plan does)
BYTES_PER_TOKEN_DEFAULT = 4.0


# ------------------------------------------------------------------------------------------------ the machine

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


class Alternative(_Frozen):
    """A change to the project or the machine, and the peak memory per GPU it gives (the command estimates it)."""

    change: str
    #: needs hardware the machine lacks (more GPUs of its kind)
    needs_hardware: bool = False
    gpus: int
    device_bytes: int
    #: filled by `audit`: the result fits the machine's GPU with the headroom
    fits: bool | None = None


class AuditResult(_Frozen):
    project: str
    machine: MachineSpec
    #: the GPUs the job runs on: catalog id (else the driver's name) and count; None and 0 without a GPU
    gpu: str | None
    gpus: int
    layout: dict[str, int | str]
    #: peak memory the job needs per GPU, and what the machine's GPU offers after the headroom
    device_bytes: int
    usable_bytes: int | None
    fits: bool
    #: one line: "fits", "fits, with warnings: ...", "does not fit: ..."
    verdict: str
    checklist: list[ChecklistItem]
    alternatives: list[Alternative] = Field(default_factory=list)
    #: the estimate behind the numbers (without a GPU: for the project's own hardware section)
    estimate: EstimateResult
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


# ----------------------------------------------------------------------------------------------- the audit

def _gib(n: float) -> str:
    return f"{n / GIB:,.1f} GiB"


def _gb(n: float) -> str:
    """RAM in GB as DIMMs are sold (binary)."""
    return f"{n / GIB:,.0f} GB"


def _size(n: float) -> str:
    """Disk sizes, decimal as drives are sold."""
    return f"{n / 1e12:,.2f} TB" if n >= 1e12 else f"{n / 1e9:,.1f} GB"


def _rate(gb_s: float) -> str:
    return (f"{gb_s:,.2f} GB/s" if gb_s >= 0.1 else f"{gb_s * 1e3:,.1f} MB/s" if gb_s >= 1e-4
            else f"{gb_s * 1e6:,.1f} kB/s")


def _hours(h: float) -> str:
    return f"{h * 60:,.0f} min" if h < 1 else f"{h:,.1f} h" if h < 48 else f"{h / 24:,.1f} days"


@dataclass(frozen=True)
class _Check:
    """One host part: its line with numbers, its verdict, have/need (the bottleneck is the smallest), the fix."""

    part: str
    verdict: Verdict
    text: str
    ratio: float | None = None
    fix: str | None = None


_ORDER = {"fail": 3, "warn": 2, "pass": 1, "not evaluated": 0}


def _worst(verdicts: Iterable[Verdict]) -> Verdict:
    vs = [v for v in verdicts if v != "not evaluated"]
    return max(vs, key=_ORDER.__getitem__) if vs else "not evaluated"


def _bigger_gpus(need: float, headroom: float, catalog: Catalog, production: bool) -> list[str]:
    """The three smallest catalog GPUs (by memory; datacenter parts for production) that hold `need` bytes per
    GPU with the headroom."""
    fit = sorted((g for g in catalog.gpus.rows.values() if g.memory_gib * GIB * (1 - headroom) >= need
                  and (g.market_class == "datacenter" or not production)), key=lambda g: (g.memory_gib, g.id))
    out: list[str] = []
    sizes: set[float] = set()
    for g in fit:
        if g.memory_gib not in sizes:
            sizes.add(g.memory_gib)
            out.append(g.id)
    return out[:3]


def _checkpoint_bytes(project: Project, est: EstimateResult) -> tuple[float, float]:
    """(one checkpoint, the weights): weights in 16 bits + 12 bytes of fp32 master weights and Adam moments per
    trained parameter, as the planner counts them (core/search/explore.py)."""
    weights = est.model.parameters * 2.0
    if project.workload.task == "inference":
        return 0.0, weights
    trained = est.model.parameters if project.workload.task in ("pretrain", "full-finetune") \
        else est.model.trainable_parameters
    return weights + trained * 12.0, weights


def _host_checks(project: Project, machine: MachineSpec, est: EstimateResult, job: Sequence[MachineGpu],
                 n: int, vram_bytes: float, rules: ServerRules, catalog: Catalog,
                 tokens_per_sample: int) -> list[_Check]:
    """CPU cores, RAM, disk capacity and read rate, and with GPUs their PCIe links, GPU-to-GPU link and power
    limits; for `n` GPUs holding `vram_bytes` in all."""
    out = [_cpu(machine, project, n, rules), _ram(machine, vram_bytes, rules),
           *_disks(project, machine, est, n, rules, tokens_per_sample)]
    if job:
        row = catalog.gpus.rows.get(job[0].catalog_id or "")
        out += [_pcie(job, row), *_gpu_link(job, row, est), *_power(job, row)]
    return out


def _cpu(machine: MachineSpec, project: Project, n: int, rules: ServerRules) -> _Check:
    modality = project.data.modality
    per = rules.cpu_cores_per_gpu[modality]
    need = max(rules.min_cpu_cores, math.ceil(per * n))
    threads = f" ({machine.cpu_threads} threads)" if machine.cpu_threads else ""
    ok = machine.cpu_cores >= need
    return _Check("CPU cores", "pass" if ok else "warn",
                  f"CPU {machine.cpu_model or 'unknown model'}: {machine.cpu_cores} cores{threads} for {n} GPU(s); "
                  f"needs max({rules.min_cpu_cores} (rule min_cpu_cores), {n} x {per:g} for {modality} (rule "
                  f"cpu_cores_per_gpu)) = {need}", machine.cpu_cores / need,
                  None if ok else f"a CPU with >= {need} cores (has {machine.cpu_cores}); until then, fewer "
                  "DataLoader workers and data pre-processed offline")


def _ram(machine: MachineSpec, vram_bytes: float, rules: ServerRules) -> _Check:
    need = rules.ram_to_vram_ratio * vram_bytes
    ok = machine.ram_bytes >= RAM_REPORTED_FRACTION * need
    add = math.ceil((need - machine.ram_bytes) / (64 * GIB)) * 64 * GIB
    return _Check("RAM", "pass" if ok else "warn",
                  f"RAM {_gb(machine.ram_bytes)}: {machine.ram_bytes / vram_bytes:.1f}x the {_gb(vram_bytes)} of GPU "
                  f"memory; rule ram_to_vram_ratio asks {rules.ram_to_vram_ratio:g}x = {_gb(need)}",
                  machine.ram_bytes / need,
                  None if ok else f"add {_gb(add)} RAM (to >= {_gb(need)}): loading and saving the model, pinned "
                  "DataLoader buffers and the page cache live there")


def _disks(project: Project, machine: MachineSpec, est: EstimateResult, n: int, rules: ServerRules,
           tokens_per_sample: int) -> list[_Check]:
    """Capacity for the dataset and the kept checkpoints (inference: the weights), and for training the read
    rate against the data stream the GPUs consume and the rule's floor."""
    d = project.data
    training = project.workload.task != "inference"
    dataset = d.size_gb * GB if d.size_gb else 0.0
    ckpt, weights = _checkpoint_bytes(project, est)
    need = (dataset + rules.checkpoints_kept * ckpt if training else weights) * (1 + rules.scratch_fraction)
    what = (f"dataset {_size(dataset)} + {rules.checkpoints_kept} checkpoints x {_size(ckpt)} (rule "
            f"checkpoints_kept)" if training else f"the weights {_size(weights)}")
    if training and not d.size_gb:
        what += "; no data.size_gb, so no dataset"
    need_text = f"needs ({what}) x {1 + rules.scratch_fraction:g} (rule scratch_fraction) = {_size(need)}"
    out: list[_Check] = []
    if not machine.disks:
        out.append(_Check("Disk capacity", "not evaluated", f"disks not known; {need_text}"))
    else:
        total = sum(x.total_bytes for x in machine.disks)
        free = sum(x.free_bytes if x.free_bytes is not None else x.total_bytes for x in machine.disks)
        verdict: Verdict = "pass" if free >= need else "warn" if total >= need else "fail"
        fix = {"pass": None, "warn": f"free {_size(need - free)} of disk space",
               "fail": f"add >= {_size(need - free)} of NVMe"}[verdict]
        out.append(_Check("Disk capacity", verdict, f"disks {_size(total)} ({_size(free)} free) on "
                          f"{len(machine.disks)} volume(s); {need_text}", free / need if need else None, fix))
    measured = [x.read_gb_s for x in machine.disks if x.read_gb_s is not None]
    if not training:
        if measured:
            out.append(_Check("Disk read", "pass", f"disk read {_rate(max(measured))}: the {_size(weights)} of "
                              f"weights load in {weights / GB / max(measured):,.0f} s"))
        return out
    floor = rules.nvme_read_gbs_per_gpu[d.modality] * n
    per_token = dataset / (d.samples * tokens_per_sample) if d.samples and dataset else BYTES_PER_TOKEN_DEFAULT
    if est.time is not None:
        stream = est.time.tokens_per_s * per_token / GB
        how = f"data stream {_rate(stream)} ({est.time.tokens_per_s:,.0f} tokens/s x {per_token:,.1f} B/token)"
    else:
        stream, how = 0.0, "data stream not estimated"
    need_gbs = max(stream, floor)
    need_text = (f"needs max({how}, {n} x {rules.nvme_read_gbs_per_gpu[d.modality]:g} GB/s for {d.modality} (rule "
                 f"nvme_read_gbs_per_gpu)) = {_rate(need_gbs)}")
    if not measured:
        out.append(_Check("Disk read", "not evaluated", "disk read rate not measured (--disk-test) or not given "
                          f"(disks[].read_gb_s); {need_text}"))
        return out
    best = max(measured)
    # a dataset the page cache holds is read from the disk once; the rule's cache share of RAM decides
    cached = 0 < dataset <= rules.ram_data_cache_fraction * machine.ram_bytes
    ok = best >= need_gbs
    text = f"disk read {_rate(best)}; {need_text}"
    if not ok and cached:
        text += f"; the dataset ({_size(dataset)}) fits in the page cache, so only the first pass reads the disk"
    out.append(_Check("Disk read", "pass" if ok or cached else "warn", text, best / need_gbs,
                      None if ok or cached else f"faster storage: >= {_rate(need_gbs)} read (NVMe in RAID-0), or "
                      "the dataset staged in RAM"))
    return out


def _pcie(job: Sequence[MachineGpu], row: Gpu | None) -> _Check:
    """Each GPU's best link against the generation and width the card takes (x16 when not in the catalog)."""
    want_gen = row.interconnect.pcie_gen if row else None
    want_width = row.interconnect.pcie_lanes if row else 16
    want = f"Gen{want_gen} x{want_width}" if want_gen else f"x{want_width}"
    short: list[tuple[int, MachineGpu, float]] = []
    known = [(i, g) for i, g in enumerate(job) if g.pcie_gen is not None and g.pcie_width is not None]
    for i, g in known:
        assert g.pcie_gen is not None and g.pcie_width is not None
        ratio = (PCIE_LANE_GB_S[g.pcie_gen] * g.pcie_width) / (PCIE_LANE_GB_S[want_gen or g.pcie_gen] * want_width)
        if ratio < 0.999:
            short.append((i, g, ratio))
    if short:
        lines = "; ".join(f"GPU {i} at Gen{g.pcie_gen} x{g.pcie_width} ({r:.0%} of its host bandwidth)"
                          for i, g, r in short)
        return _Check("PCIe", "warn", f"PCIe: the card takes {want}; {lines}", min(r for _, _, r in short),
                      f"move GPU(s) {', '.join(str(i) for i, _, _ in short)} to {want} slots (check risers, "
                      "bifurcation and the BIOS link speed)")
    if not known:
        return _Check("PCIe", "not evaluated", "PCIe links not known")
    unknown = len(job) - len(known)
    return _Check("PCIe", "pass", f"PCIe: {len(known)} GPU(s) at {want} or better"
                  + (f"; {unknown} not known" if unknown else ""))


def _gpu_link(job: Sequence[MachineGpu], row: Gpu | None, est: EstimateResult) -> list[_Check]:
    """NVLink (or Infinity Fabric) between the job's GPUs: needed by tensor parallelism; its share of a training
    step says whether it holds the job back."""
    if len(job) < 2:
        return []
    links = [g.nvlink_links for g in job]
    have: int | None = None
    if all(x is not None for x in links):
        have = min(x for x in links if x is not None)
        text = f"NVLink: {have} active link(s) per GPU" if have else "no NVLink: the GPUs talk over PCIe"
    elif row is not None and row.form_factor in ("sxm", "oam", "superchip") and row.interconnect.kind != "none":
        have = 1
        text = f"{row.interconnect.kind} assumed from the catalog ({row.id} is a {row.form_factor} module)"
    else:
        text = "GPU-to-GPU links not known"
    comm = None
    if est.time is not None and est.time.step_seconds:
        comm = est.time.step_breakdown_s.get("communication", 0.0) / est.time.step_seconds
        text += f"; communication is {comm:.0%} of a training step"
    tp = int(est.hardware.layout.get("tp", 1))
    if tp > 1 and have == 0:
        return [_Check("GPU link", "warn", f"{text}; tensor parallel {tp} all-reduces every layer over PCIe",
                       None if comm is None else 1 - comm, "GPUs with NVLink (an SXM board or NVLink bridges), or "
                       "a layout without tensor parallelism (ZeRO-3, or replicas) if the model fits")]
    if comm is not None and comm > 0.3:
        return [_Check("GPU link", "warn", text, 1 - comm, "a faster GPU-to-GPU link (NVLink), or fewer bytes over "
                       "it: larger micro-batches, gradient accumulation, a lower ZeRO stage if memory allows")]
    return [_Check("GPU link", "pass" if have is not None else "not evaluated", text)]


def _power(job: Sequence[MachineGpu], row: Gpu | None) -> list[_Check]:
    """A power limit well below the card's rating (a capped PSU, a thermal workaround) lowers its clocks."""
    if row is None:
        return []
    capped = [(i, g.power_limit_w) for i, g in enumerate(job)
              if g.power_limit_w is not None and g.power_limit_w < 0.9 * row.tdp_w]
    if not capped:
        return []
    return [_Check("Power limit", "warn", "power limit " + ", ".join(f"GPU {i} {w:,.0f} W" for i, w in capped)
                   + f" of the {row.tdp_w:,.0f} W the {row.id} is rated for: clocks, and speed, drop under load",
                   min(w for _, w in capped if w) / row.tdp_w,
                   "raise the power limit (nvidia-smi -pl), or fix the PSU or cooling that made it low")]


def audit(project: Project, machine: MachineSpec, est: EstimateResult, rules: ServerRules, catalog: Catalog, *,
          tokens_per_sample: int, job: Sequence[MachineGpu] = (),
          alternatives: Sequence[Alternative] = ()) -> AuditResult:
    """The checklist for `project` on `machine`. `job` is the GPUs the job runs on (`job_gpus`), `est` the
    estimate on them (without a GPU: on the project's own hardware section, to say what a GPU would need);
    `alternatives` are changes the command estimated, marked here as fitting or not."""
    headroom = project.constraints.memory_headroom
    production = project.goals.purpose == "production"
    dev = est.memory.device_bytes
    n = len(job)
    name = (job[0].catalog_id or job[0].name) if job else None
    notes: list[str] = []
    if job and len(job) < len(machine.gpus):
        notes.append(f"the job runs on the {n} x {name}; the machine's other {len(machine.gpus) - n} GPU(s) are "
                     "not counted")
    g = project.growth
    if g.model_scale > 1 or g.context_scale > 1 or g.users_scale > 1:
        notes.append("planned growth (growth.*) is not checked here: `gpuplan plan` sizes servers for it")

    # VRAM
    lay_text = layout_text(est.hardware.layout, project.workload.task != "inference")
    peak = f"{_gib(dev)} per GPU at the peak ({est.memory.peak_phase}; largest part {est.memory.dominant})"
    want = dev / (1 - headroom)
    usable: int | None = None
    alts: list[Alternative] = []
    if not job:
        reasons = ["no GPU in this machine",
                   f"the project needs {peak} on {est.hardware.gpus} GPU(s) ({lay_text}): a GPU with >= {_gib(want)} "
                   f"({headroom:.0%} kept free)"]
        vram = ChecklistItem(item="VRAM validated", verdict="fail", reasons=reasons)
    else:
        cap = min(x.memory_bytes for x in job)
        usable = int(cap * (1 - headroom))
        room = f"{1 - dev / cap:.0%} free" if dev <= cap else f"{dev / cap:.1f}x its memory"
        reasons = [f"{peak} on {n} x {job[0].name} ({_gib(cap)} each, {lay_text}): {room}, "
                   f"{headroom:.0%} free required (constraints.memory_headroom)"]
        verdict: Verdict = "pass" if dev <= usable else "warn" if dev <= cap else "fail"
        if verdict == "warn":
            reasons.append("it fits, but with less free than the headroom: fragmentation, another process or a "
                           "longer batch can run it out of memory")
        elif verdict == "fail":
            reasons.append(f"short by {_gib(dev - usable)} per GPU")
        eccs = [x.ecc for x in job]
        if False in eccs:
            off = [str(i) for i, e in enumerate(eccs) if e is False]
            reasons.append(f"ECC off on GPU(s) {', '.join(off)}: memory errors go undetected"
                           + (" (production: ECC expected)" if project.goals.purpose == "production" else ""))
            if project.goals.purpose == "production" and verdict == "pass":
                verdict = "warn"
        elif None in eccs:
            reasons.append("ECC: not known")
        else:
            reasons.append("ECC on")
        vram = ChecklistItem(item="VRAM validated", verdict=verdict, reasons=reasons)
        alts = [a.model_copy(update={"fits": a.device_bytes <= usable}) for a in alternatives]

    # System synergy
    if job:
        vram_total = float(sum(x.memory_bytes for x in job))
        n_host = n
        lead: list[str] = []
    else:
        n_host = est.hardware.gpus
        per_gpu = est.hardware.gpu_memory_bytes or want
        vram_total = per_gpu * n_host
        lead = [f"no GPU: the host is checked for the {n_host} x "
                f"{est.hardware.gpu or f'GPU with {_gib(per_gpu)}'} the project plans"]
    checks = _host_checks(project, machine, est, job, n_host, vram_total, rules, catalog, tokens_per_sample)
    synergy = ChecklistItem(item="System synergy", verdict=_worst(c.verdict for c in checks),
                            reasons=lead + [c.text for c in checks])

    # Bottleneck
    # the part that falls furthest short of what the job asks (have / need); unmeasured shortfalls rank midway
    weak = sorted((c for c in checks if c.verdict in ("warn", "fail")),
                  key=lambda c: 0.5 if c.ratio is None else c.ratio)
    if not job:
        bottleneck = ChecklistItem(item="Bottleneck", verdict="fail", reasons=["no GPU: nothing runs the job"])
    elif vram.verdict == "fail":
        bottleneck = ChecklistItem(item="Bottleneck", verdict="fail", reasons=[
            f"GPU memory: the job needs {_gib(dev)} per GPU, {name} offers {_gib(usable or 0)} after the "
            f"{headroom:.0%} headroom"])
    elif weak:
        bottleneck = ChecklistItem(item="Bottleneck", verdict="warn", reasons=[weak[0].text]
                                   + [f"then: {c.part}" for c in weak[1:]])
    else:
        bottleneck = ChecklistItem(item="Bottleneck", verdict="pass", reasons=_gpu_bound(est, name or ""))

    # What to change
    fixes: list[str] = []
    if not job:
        bigger = _bigger_gpus(dev, headroom, catalog, production)
        fixes.append(f"add a GPU with >= {_gib(want)} (e.g. {', '.join(bigger)})" if bigger else
                     f"add GPUs: one needs >= {_gib(want)}; no catalog GPU holds that alone, so shard the model "
                     "over several (ZeRO-3)")
    else:
        if dev > (usable or 0):
            fixes += _memory_fixes(alts, dev, headroom, catalog, vram.verdict, production)
        if production and False in (x.ecc for x in job):
            fixes.append("ECC on (nvidia-smi -e 1, then a reboot) where the GPU has it; GeForce cards have none: "
                         "datacenter GPUs for production")
    fixes += [c.fix for c in sorted(checks, key=lambda c: -_ORDER[c.verdict]) if c.fix and c.verdict != "pass"]
    fits = bool(job) and vram.verdict != "fail" and synergy.verdict != "fail"
    change_verdict: Verdict = "fail" if not fits else "warn" if fixes else "pass"
    change = ChecklistItem(item="What to change", verdict=change_verdict,
                           reasons=fixes or ["nothing: the machine suits the project as it is"])

    if not job:
        line = f"does not fit: no GPU (the project needs {_gib(dev)} per GPU)"
    elif vram.verdict == "fail":
        line = f"does not fit: needs {_gib(dev)} per GPU, {name} offers {_gib(usable or 0)} after the headroom"
    elif synergy.verdict == "fail":
        line = "does not fit: " + "; ".join(c.text for c in checks if c.verdict == "fail")
    else:
        warned = [c.part for c in checks if c.verdict == "warn"]
        if vram.verdict == "warn":
            warned.insert(0, "VRAM headroom" if dev > (usable or 0) else "ECC")
        line = "fits" + (f", with warnings: {', '.join(warned)}" if warned else "")
    return AuditResult(project=project.name, machine=machine, gpu=name, gpus=n, layout=est.hardware.layout,
                       device_bytes=dev, usable_bytes=usable, fits=fits, verdict=line,
                       checklist=[vram, synergy, bottleneck, change], alternatives=alts, estimate=est,
                       notes=notes + list(machine.notes))


def layout_text(lay: dict[str, int | str], training: bool = True) -> str:
    """"ZeRO-3, tp 2" for training; "tp 4, 2 replicas" for inference."""
    parts = [f"ZeRO-{lay.get('zero', 0)}"] if training else []
    parts += [f"{k} {lay[k]}" for k in ("tp", "pp") if int(lay.get(k, 1)) > 1]
    if not training and int(lay.get("dp", 1)) > 1:
        parts.append(f"{lay['dp']} replicas")
    if lay.get("offload", "none") != "none":
        parts.append(f"offload {lay['offload']}")
    return ", ".join(parts) or "one GPU per replica"


def _gpu_bound(est: EstimateResult, name: str) -> list[str]:
    """No host part falls short: the GPUs bound the job, as they should; say how, with the numbers."""
    if est.time is not None:
        t = est.time
        parts = sorted(((k, v / t.step_seconds) for k, v in t.step_breakdown_s.items() if v > 0),
                       key=lambda kv: -kv[1])
        out = [f"the GPUs ({name}): {t.tokens_per_s:,.0f} tokens/s, MFU {t.mfu:.0%}"
               + (f", {_hours(t.wall_hours)} for the run" if t.wall_hours is not None else "")]
        out.append(f"a {t.step_seconds:,.2f} s step is " + ", ".join(f"{k} {v:.0%}" for k, v in parts[:4]))
        return out
    if est.inference is not None:
        i = est.inference
        return [f"the GPUs ({name}): decoding is {i.decode_bound}-bound, {i.aggregate_tokens_per_s:,.0f} tokens/s in "
                f"all, {i.request_latency_s:,.1f} s per request"]
    return [f"no host part falls short; speed not estimated: {name} is not in the catalog (`gpuplan catalog gpus`)"]


def _memory_fixes(alts: Sequence[Alternative], dev: int, headroom: float, catalog: Catalog, verdict: Verdict,
                  production: bool) -> list[str]:
    """Changes that bring the job within the GPU's memory: software first, then more GPUs, then a larger GPU."""
    ok = [a for a in alts if a.fits]
    out = [f"{a.change}: {_gib(a.device_bytes)} per GPU, fits" for a in ok if not a.needs_hardware][:3]
    out += [f"{a.change}: {_gib(a.device_bytes)} per GPU, fits" for a in ok if a.needs_hardware][:1]
    if not ok and alts:
        best = min(alts, key=lambda a: a.device_bytes)
        out.append(f"no change tried fits; the closest, {best.change}, still needs {_gib(best.device_bytes)} per GPU")
    bigger = _bigger_gpus(dev, headroom, catalog, production)
    if bigger:
        out.append(f"or a GPU with >= {_gib(dev / (1 - headroom))} (e.g. {', '.join(bigger)})")
    elif verdict == "fail":
        out.append(f"no catalog GPU holds {_gib(dev / (1 - headroom))} alone: shard the model over more GPUs (ZeRO-3)")
    software = [a for a in alts if not a.needs_hardware and not a.fits and a.device_bytes < dev]
    if not any(not a.needs_hardware for a in ok) and software:
        best = min(software, key=lambda a: a.device_bytes)
        bigger = _bigger_gpus(best.device_bytes, headroom, catalog, production)
        if bigger:
            out.append(f"or, with {best.change}, a GPU with >= {_gib(best.device_bytes / (1 - headroom))} "
                       f"(e.g. {', '.join(bigger)})")
    return out


__all__ = ["CHECKLIST", "Alternative", "AuditResult", "Disk", "MachineGpu", "MachineSpec", "audit", "job_gpus",
           "layout_for", "layout_text", "match_gpu", "on_machine"]
