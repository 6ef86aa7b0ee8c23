"""The host half of an audit: each part of the machine (CPU cores, RAM, disk capacity and read rate, and with GPUs
their PCIe links, GPU-to-GPU link and power limits) against what the job asks, by the same rules as the server
builder (core/server/builder.py, data/server_rules.toml). Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuplan.core.audit.machine import MachineGpu, MachineSpec
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.plan import Verdict
from gpuplan.schema.project import Project
from gpuplan.schema.result import EstimateResult
from gpuplan.units import GB, GIB, fmt_disk, fmt_ram_gb, fmt_rate

if TYPE_CHECKING:
    from gpuplan.schema.catalog import Catalog
    from gpuplan.schema.rules import ServerRules

#: psutil reports the RAM the kernel may use, a few percent below what is installed (firmware, kernel reserve)
RAM_REPORTED_FRACTION = 0.95
#: PCIe payload bandwidth per lane and direction, GB/s, by generation (PCI-SIG: 2.5, 5, 8, 16, 32, 64 GT/s)
PCIE_LANE_GB_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
#: pre-tokenized text on disk when the project gives no dataset size per sample (uint32 token ids; as plan does)
BYTES_PER_TOKEN_DEFAULT = 4.0


@dataclass(frozen=True)
class Check:
    """One host part: its line with numbers, its verdict, have/need (the bottleneck is the smallest), the fix."""

    part: str
    verdict: Verdict
    text: str
    ratio: float | None = None
    fix: str | None = None


#: the worse verdict ranks higher ("not evaluated" lowest)
VERDICT_ORDER = {"fail": 3, "warn": 2, "pass": 1, "not evaluated": 0}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    vs = [v for v in verdicts if v != "not evaluated"]
    return max(vs, key=VERDICT_ORDER.__getitem__) if vs else "not evaluated"


def _checkpoint_bytes(project: Project, est: EstimateResult) -> tuple[float, float]:
    """(one checkpoint, the weights): weights in 16 bits + 12 bytes of fp32 master weights and Adam moments per
    trained parameter, as the planner counts them (core/search/explore.py)."""
    weights = est.model.parameters * 2.0
    if project.workload.task == "inference":
        return 0.0, weights
    trained = est.model.parameters if project.workload.task in ("pretrain", "full-finetune") \
        else est.model.trainable_parameters
    return weights + trained * 12.0, weights


def host_checks(project: Project, machine: MachineSpec, est: EstimateResult, job: Sequence[MachineGpu],
                n: int, vram_bytes: float, rules: ServerRules, catalog: Catalog,
                tokens_per_sample: int) -> list[Check]:
    """CPU cores, RAM, disk capacity and read rate, and with GPUs their PCIe links, GPU-to-GPU link and power
    limits; for `n` GPUs holding `vram_bytes` in all."""
    out = [_cpu(machine, project, n, rules), _ram(machine, vram_bytes, rules),
           *_disks(project, machine, est, n, rules, tokens_per_sample)]
    if job:
        row = catalog.gpus.rows.get(job[0].catalog_id or "")
        out += [_pcie(job, row), *_gpu_link(job, row, est), *_power(job, row)]
    return out


def _cpu(machine: MachineSpec, project: Project, n: int, rules: ServerRules) -> Check:
    modality = project.data.modality
    per = rules.cpu_cores_per_gpu[modality]
    need = max(rules.min_cpu_cores, math.ceil(per * n))
    threads = f" ({machine.cpu_threads} threads)" if machine.cpu_threads else ""
    ok = machine.cpu_cores >= need
    return Check("CPU cores", "pass" if ok else "warn",
                 f"CPU {machine.cpu_model or 'unknown model'}: {machine.cpu_cores} cores{threads} for {n} GPU(s); "
                 f"needs max({rules.min_cpu_cores} (rule min_cpu_cores), {n} x {per:g} for {modality} (rule "
                 f"cpu_cores_per_gpu)) = {need}", machine.cpu_cores / need,
                 None if ok else f"a CPU with >= {need} cores (has {machine.cpu_cores}); until then, fewer "
                 "DataLoader workers and data pre-processed offline")


def _ram(machine: MachineSpec, vram_bytes: float, rules: ServerRules) -> Check:
    need = rules.ram_to_vram_ratio * vram_bytes
    ok = machine.ram_bytes >= RAM_REPORTED_FRACTION * need
    add = math.ceil((need - machine.ram_bytes) / (64 * GIB)) * 64 * GIB
    return Check("RAM", "pass" if ok else "warn",
                 f"RAM {fmt_ram_gb(machine.ram_bytes)}: {machine.ram_bytes / vram_bytes:.1f}x the "
                 f"{fmt_ram_gb(vram_bytes)} of GPU memory; rule ram_to_vram_ratio asks "
                 f"{rules.ram_to_vram_ratio:g}x = {fmt_ram_gb(need)}",
                 machine.ram_bytes / need,
                 None if ok else f"add {fmt_ram_gb(add)} RAM (to >= {fmt_ram_gb(need)}): loading and saving the "
                 "model, pinned DataLoader buffers and the page cache live there")


def _disks(project: Project, machine: MachineSpec, est: EstimateResult, n: int, rules: ServerRules,
           tokens_per_sample: int) -> list[Check]:
    """Capacity for the dataset and the kept checkpoints (inference: the weights), and for training the read
    rate against the data stream the GPUs consume and the rule's floor."""
    d = project.data
    training = project.workload.task != "inference"
    dataset = d.size_gb * GB if d.size_gb else 0.0
    ckpt, weights = _checkpoint_bytes(project, est)
    need = (dataset + rules.checkpoints_kept * ckpt if training else weights) * (1 + rules.scratch_fraction)
    what = (f"dataset {fmt_disk(dataset)} + {rules.checkpoints_kept} checkpoints x {fmt_disk(ckpt)} (rule "
            f"checkpoints_kept)" if training else f"the weights {fmt_disk(weights)}")
    if training and not d.size_gb:
        what += "; no data.size_gb, so no dataset"
    need_text = f"needs ({what}) x {1 + rules.scratch_fraction:g} (rule scratch_fraction) = {fmt_disk(need)}"
    out: list[Check] = []
    if not machine.disks:
        out.append(Check("Disk capacity", "not evaluated", f"disks not known; {need_text}"))
    else:
        total = sum(x.total_bytes for x in machine.disks)
        free = sum(x.free_bytes if x.free_bytes is not None else x.total_bytes for x in machine.disks)
        verdict: Verdict = "pass" if free >= need else "warn" if total >= need else "fail"
        fix = {"pass": None, "warn": f"free {fmt_disk(need - free)} of disk space",
               "fail": f"add >= {fmt_disk(need - free)} of NVMe"}[verdict]
        out.append(Check("Disk capacity", verdict, f"disks {fmt_disk(total)} ({fmt_disk(free)} free) on "
                         f"{len(machine.disks)} volume(s); {need_text}", free / need if need else None, fix))
    measured = [x.read_gb_s for x in machine.disks if x.read_gb_s is not None]
    if not training:
        if measured:
            out.append(Check("Disk read", "pass", f"disk read {fmt_rate(max(measured))}: the {fmt_disk(weights)} of "
                             f"weights load in {weights / GB / max(measured):,.0f} s"))
        return out
    floor = rules.nvme_read_gbs_per_gpu[d.modality] * n
    per_token = dataset / (d.samples * tokens_per_sample) if d.samples and dataset else BYTES_PER_TOKEN_DEFAULT
    if est.time is not None:
        stream = est.time.tokens_per_s * per_token / GB
        how = f"data stream {fmt_rate(stream)} ({est.time.tokens_per_s:,.0f} tokens/s x {per_token:,.1f} B/token)"
    else:
        stream, how = 0.0, "data stream not estimated"
    need_gbs = max(stream, floor)
    need_text = (f"needs max({how}, {n} x {rules.nvme_read_gbs_per_gpu[d.modality]:g} GB/s for {d.modality} (rule "
                 f"nvme_read_gbs_per_gpu)) = {fmt_rate(need_gbs)}")
    if not measured:
        out.append(Check("Disk read", "not evaluated", "disk read rate not measured (--disk-test) or not given "
                         f"(disks[].read_gb_s); {need_text}"))
        return out
    best = max(measured)
    # a dataset the page cache holds is read from the disk once; the rule's cache share of RAM decides
    cached = 0 < dataset <= rules.ram_data_cache_fraction * machine.ram_bytes
    ok = best >= need_gbs
    text = f"disk read {fmt_rate(best)}; {need_text}"
    if not ok and cached:
        text += f"; the dataset ({fmt_disk(dataset)}) fits in the page cache, so only the first pass reads the disk"
    out.append(Check("Disk read", "pass" if ok or cached else "warn", text, best / need_gbs,
                     None if ok or cached else f"faster storage: >= {fmt_rate(need_gbs)} read (NVMe in RAID-0), or "
                     "the dataset staged in RAM"))
    return out


def _pcie(job: Sequence[MachineGpu], row: Gpu | None) -> Check:
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
        return Check("PCIe", "warn", f"PCIe: the card takes {want}; {lines}", min(r for _, _, r in short),
                     f"move GPU(s) {', '.join(str(i) for i, _, _ in short)} to {want} slots (check risers, "
                     "bifurcation and the BIOS link speed)")
    if not known:
        return Check("PCIe", "not evaluated", "PCIe links not known")
    unknown = len(job) - len(known)
    return Check("PCIe", "pass", f"PCIe: {len(known)} GPU(s) at {want} or better"
                 + (f"; {unknown} not known" if unknown else ""))


def _gpu_link(job: Sequence[MachineGpu], row: Gpu | None, est: EstimateResult) -> list[Check]:
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
        return [Check("GPU link", "warn", f"{text}; tensor parallel {tp} all-reduces every layer over PCIe",
                      None if comm is None else 1 - comm, "GPUs with NVLink (an SXM board or NVLink bridges), or "
                      "a layout without tensor parallelism (ZeRO-3, or replicas) if the model fits")]
    if comm is not None and comm > 0.3:
        return [Check("GPU link", "warn", text, 1 - comm, "a faster GPU-to-GPU link (NVLink), or fewer bytes over "
                      "it: larger micro-batches, gradient accumulation, a lower ZeRO stage if memory allows")]
    return [Check("GPU link", "pass" if have is not None else "not evaluated", text)]


def _power(job: Sequence[MachineGpu], row: Gpu | None) -> list[Check]:
    """A power limit well below the card's rating (a capped PSU, a thermal workaround) lowers its clocks."""
    if row is None:
        return []
    capped = [(i, g.power_limit_w) for i, g in enumerate(job)
              if g.power_limit_w is not None and g.power_limit_w < 0.9 * row.tdp_w]
    if not capped:
        return []
    return [Check("Power limit", "warn", "power limit " + ", ".join(f"GPU {i} {w:,.0f} W" for i, w in capped)
                  + f" of the {row.tdp_w:,.0f} W the {row.id} is rated for: clocks, and speed, drop under load",
                  min(w for _, w in capped if w) / row.tdp_w,
                  "raise the power limit (nvidia-smi -pl), or fix the PSU or cooling that made it low")]


__all__ = ["BYTES_PER_TOKEN_DEFAULT", "PCIE_LANE_GB_S", "RAM_REPORTED_FRACTION", "VERDICT_ORDER", "Check",
           "host_checks", "worst"]
