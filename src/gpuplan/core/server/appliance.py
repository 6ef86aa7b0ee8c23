"""A fixed appliance as the vendor ships it (DGX, NVL72 racks, tinybox; `Platform.fixed`, issue 28): its CPU, RAM,
drives, NICs and PSUs are the vendor's. The builder takes them as they are and judges each against the balance
rules of data/server_rules.toml with a note in `reasons` (a warning for CPU cores short of the data pipeline's
rule, which can starve the GPUs), never passing the appliance over for a part the vendor chose. Only what the
project itself cannot do without is a hard limit: CPU offload and page cache above the RAM the appliance ships
with. Parts the row does not give (no `shipped_drives`, no `shipped_nics`) are chosen by the rules as on a
configurable chassis. Pure."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpuplan.core.server.common import Build, fmt
from gpuplan.units import GIB, TB, fmt_disk

if TYPE_CHECKING:
    from gpuplan.core.server.common import Needs
    from gpuplan.core.server.parts import Shelf
    from gpuplan.schema.hardware import Gpu
    from gpuplan.schema.plan import ServerNeeds
    from gpuplan.schema.rules import ServerRules
    from gpuplan.schema.server import Cpu, Drive, Nic, Platform


def shipped_cpu(shelf: Shelf, p: Platform, needs: ServerNeeds | Needs, rules: ServerRules, b: Build) -> Cpu:
    """The CPU the appliance ships with (the shelf's only CPU for it), with the cores the rules would ask."""
    cpu, s, n = shelf.cpus[p.id][0], p.cpu_sockets, needs.gpus_per_server
    per_gpu = rules.cpu_cores_per_gpu[needs.modality]
    need = max(rules.min_cpu_cores, math.ceil(per_gpu * n))
    if b.text:
        text = (f"CPU {s} x {cpu.name} = {cpu.cores * s} cores, as shipped ({p.id} is a fixed appliance); the rules "
                f"ask max({rules.min_cpu_cores} (rule min_cpu_cores), {n} GPU(s) x {per_gpu:g} cores for "
                f"{needs.modality} (rule cpu_cores_per_gpu)) = {need}")
        b.reasons.append(text)
        if cpu.cores * s < need:  # a warning, not a shortfall: the pipeline may starve, the appliance stays
            b.warnings.append(f"CPU cores short: {p.id} ships with {cpu.cores * s} cores, the rule asks {need} for "
                              f"{n} GPU(s) on {needs.modality} data; the data pipeline may need its own hosts")
    return cpu


def shipped_ram(p: Platform, g: Gpu, needs: ServerNeeds | Needs, rules: ServerRules,
                b: Build) -> tuple[int, int] | str:
    """(RAM GB, DIMMs) as shipped, or why the project cannot run on it (offload and page cache above it)."""
    ram = p.shipped_ram_gb or 0
    n = needs.gpus_per_server
    vram = n * g.memory_gb
    want = rules.ram_to_vram_ratio * vram
    if needs.serving:
        want = (rules.ram_serving_checkpoint_factor * needs.weights_bytes / GIB
                + rules.ram_serving_swap_gb_per_gpu * n + rules.ram_serving_base_gb)
    cache = min(needs.dataset_bytes / GIB, rules.ram_data_cache_fraction * want)
    hard = needs.offload_bytes / GIB + cache if needs.offload_bytes > 0 else 0.0
    if hard > ram:
        more = (f"; it takes up to {fmt(p.memory_max_gb)} GB: order it with more" if p.memory_max_gb
                and p.memory_max_gb >= hard else "")
        return (f"RAM: {p.id} ships with {fmt(ram)} GB; CPU offload {fmt(needs.offload_bytes / GIB)} GB + page "
                f"cache {fmt(cache)} GB need {fmt(hard)} GB{more}")
    dimms = p.dimm_slots or 0
    if b.text:
        rule = ("ram_serving_checkpoint_factor, ram_serving_swap_gb_per_gpu, ram_serving_base_gb" if needs.serving
                else f"ram_to_vram_ratio: {rules.ram_to_vram_ratio:g} x {fmt(vram)} GB VRAM")
        text = f"RAM {fmt(ram)} GB, as shipped; the rules ask {fmt(want)} GB ({rule})"
        if ram < want:
            text += (f": note, {ram / vram:.1f}x VRAM is below the rule, the vendor's choice for this appliance "
                     "(not a reason to pass it over)")
        b.reasons.append(text)
    return ram, dimms


def shipped_drives(shelf: Shelf, p: Platform, needs: ServerNeeds | Needs, rules: ServerRules,
                   b: Build) -> tuple[Drive, int, int, float] | None:
    """(first drive, its count, bytes, GB/s striped) of the drives as shipped; None when the row gives none."""
    if not p.shipped_drives:
        return None
    rows = {d.id: d for d in shelf.drives}
    parts = [(rows[s.id], s.count) for s in p.shipped_drives if s.id in rows]
    if not parts:
        return None
    storage = int(sum(k * d.capacity_tb * TB for d, k in parts))
    read = sum(k * d.seq_read_gbs for d, k in parts)
    need = (needs.dataset_bytes + rules.checkpoints_kept * needs.checkpoint_bytes) * (1 + rules.scratch_fraction)
    training = needs.data_read_bytes_per_s > 0
    floor = rules.nvme_read_gbs_per_gpu[needs.modality] * needs.gpus_per_server if training else 0.0
    need_gbs = max(needs.data_read_bytes_per_s / 1e9, floor)
    if b.text:
        listed = " + ".join(f"{k} x {d.capacity_tb:g} TB {d.name}" for d, k in parts)
        text = (f"NVMe {listed} = {fmt_disk(storage, gb_decimals=0)}, {read:,.1f} GB/s striped, as shipped; the "
                f"dataset, {rules.checkpoints_kept} checkpoints (rule checkpoints_kept) and scratch (rule "
                f"scratch_fraction) need {fmt_disk(need, gb_decimals=0)}")
        if need > storage:
            text += ": note, keep the rest on shared storage"
        if read < need_gbs:
            text += (f"; note, the data stream needs {need_gbs:,.1f} GB/s (rule nvme_read_gbs_per_gpu), more than "
                     "the shipped drives read: stream from shared storage")
        b.reasons.append(text)
    first, k = parts[0]
    return first, k, storage, read


def shipped_nics(shelf: Shelf, p: Platform, g: Gpu, needs: ServerNeeds | Needs, rules: ServerRules,
                 b: Build) -> tuple[Nic | None, int, float] | None:
    """(first NIC, its count, total Gb/s) of the NICs as shipped (the compute NICs first); None when the row gives
    none."""
    if not p.shipped_nics:
        return None
    rows = {n.id: n for n in shelf.nics}
    parts = [(rows[s.id], s.count) for s in p.shipped_nics if s.id in rows]
    if not parts:
        return None
    total = float(sum(k * nic.total_gbps for nic, k in parts))
    if b.text:
        listed = " + ".join(f"{k} x {nic.name} ({nic.total_gbps} Gb/s)" for nic, k in parts)
        text = f"Network {listed} = {fmt(total)} Gb/s, as shipped"
        first, k = parts[0]
        if needs.multi_node and g.interconnect.kind != "roce-on-die":
            rate = rules.network_gbps_per_gpu[g.generation]
            per_gpu = k * first.total_gbps / max(needs.gpus_per_server, 1)
            text += (f"; the rules ask {rate} Gb/s per GPU for {g.generation} (rule network_gbps_per_gpu), the "
                     f"compute NICs give {per_gpu:,.0f}")
            if per_gpu < rate:
                text += ": note, below the rule"
        b.reasons.append(text)
    first, k = parts[0]
    return first, k, total


def shipped_psu(p: Platform, power: float, psu: float, short: str | None, b: Build) -> float:
    """The PSU watts of the appliance (the vendor's set where the row gives it), the rules' figure kept in its reason
    line as what they would ask, with a note where the vendor's set falls short of it: never a reason to pass the
    appliance over."""
    if not p.psu_total_w:
        return psu
    if b.text and b.reasons and b.reasons[-1].startswith("PSU "):
        asked = b.reasons[-1][len("PSU "):].split("; the platform has")[0]
        text = (f"PSU {fmt(p.psu_total_w)} W as shipped ({p.psu_redundancy or 'no stated redundancy'}); the rules "
                f"would ask {asked}")
        if short is not None:
            text += f": note, {short}; the vendor ships this set for its {fmt(power)} W and it is kept"
        b.reasons[-1] = text
    return float(p.psu_total_w)


__all__ = ["shipped_cpu", "shipped_drives", "shipped_nics", "shipped_psu", "shipped_ram"]
