"""The steps of building one server on one platform, in order: the platform line, CPU, RAM, NVMe, network,
PCIe lanes, power, PSU, cooling, rack space, GPU links, missing catalog figures and price. Each step picks its
part (core/server/parts.py), writes its reason line (naming the rule of data/server_rules.toml and the inputs)
and its warnings into the `Build`, and returns what later steps and the `ServerSpec` need. A step formats its
lines only `if b.text` (the search's first pass decides the figures alone). Pure."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpuplan.core.server.common import Build, fmt, ordinal, traits
from gpuplan.core.server.parts import Shelf, choose_ram
from gpuplan.units import GIB, TB, fmt_disk

if TYPE_CHECKING:
    from gpuplan.core.server.common import Needs
    from gpuplan.schema.hardware import Gpu
    from gpuplan.schema.plan import ServerNeeds
    from gpuplan.schema.rules import ServerRules
    from gpuplan.schema.server import Cpu, Drive, Nic, Platform


def _size(n_bytes: float) -> str:
    """Decimal TB from 1 TB up, whole GB below (drives are sold in decimal units)."""
    return fmt_disk(n_bytes, gb_decimals=0)


def platform_line(p: Platform, g: Gpu, needs: ServerNeeds | Needs, pos: tuple[int, int], skipped: list[str],
                  b: Build) -> None:
    """Why this platform: its place among those that take the GPUs, and the ones passed over before it."""
    prefer = "towers" if needs.purpose == "experiment" else "rackmount"
    rank = "the only platform" if pos[1] == 1 else f"{ordinal(pos[0])} of {pos[1]} platforms"
    text = (f"Platform {p.name} ({p.id}): {needs.gpus_per_server} of {p.gpu_slots} GPU slots for {g.id} "
            f"({traits(g)}); {rank} that can take them (by fewest GPU slots, then {prefer} first for "
            f"{needs.purpose}, then rack units)")
    if skipped:
        text += "; passed over: " + "; ".join(skipped)
    b.reasons.append(text)


def cpu_step(shelf: Shelf, p: Platform, needs: ServerNeeds | Needs, rules: ServerRules, b: Build) -> Cpu:
    """The CPU (of those the platform takes: not none) for the cores the GPUs' data pipeline needs."""
    n, s = needs.gpus_per_server, p.cpu_sockets
    per_gpu = rules.cpu_cores_per_gpu[needs.modality]
    need_cores = max(rules.min_cpu_cores, math.ceil(per_gpu * n))
    cpu, short = shelf.cpu(p, need_cores)
    if short is not None:
        b.short(short)
    if not b.text:
        return cpu
    cpus = shelf.cpus[p.id]
    if p.compatible_cpu_ids:
        how = "; the CPU the platform is built with" if len(cpus) == 1 else "; the smallest the platform lists"
    else:
        how = (f"; {p.id} lists no CPU models, so this is the smallest {'/'.join(p.cpu_vendors)} part for "
               f"{s} socket(s) at the newest PCIe generation: check the socket with the vendor")
    b.reasons.append(f"CPU {s} x {cpu.name} = {cpu.cores * s} cores: needs max({rules.min_cpu_cores} (rule "
                     f"min_cpu_cores), {n} GPU(s) x {per_gpu:g} cores for {needs.modality} (rule "
                     f"cpu_cores_per_gpu)) = {need_cores}{how}")
    return cpu


def ram_step(shelf: Shelf, p: Platform, g: Gpu, cpu: Cpu, needs: ServerNeeds | Needs, rules: ServerRules,
             b: Build) -> tuple[int, int] | str:
    """(RAM GB, DIMMs), in GB as sold (binary: a 64 GB DIMM and an 80 GB GPU hold 64 and 80 GiB); or why the
    platform cannot hold the offload and page cache (a hard shortfall)."""
    n = needs.gpus_per_server
    vram = n * g.memory_gb
    ratio_gb = rules.ram_to_vram_ratio * vram
    if needs.serving:  # a service: the checkpoint in the page cache, the engine's swap space, the OS
        ratio_gb = (rules.ram_serving_checkpoint_factor * needs.weights_bytes / GIB
                    + rules.ram_serving_swap_gb_per_gpu * n + rules.ram_serving_base_gb)
    cache_gb = min(needs.dataset_bytes / GIB, rules.ram_data_cache_fraction * ratio_gb)
    hard_gb = needs.offload_bytes / GIB + cache_gb if needs.offload_bytes > 0 else 0.0
    want_gb = max(ratio_gb, hard_gb)
    ram = choose_ram(p, cpu, want_gb, hard_gb, rules, shelf)
    if isinstance(ram, str):
        return f"RAM: {p.id} {ram}"
    ram_gb, dimms, dimm_gb, how = ram
    if not b.text:
        if ram_gb < want_gb:
            b.short("RAM")
        return ram_gb, dimms
    if needs.serving:
        text = (f"RAM {fmt(ram_gb)} GB for serving: {rules.ram_serving_checkpoint_factor:g} x "
                f"{fmt(needs.weights_bytes / GIB)} GB of weights in the page cache (rule "
                f"ram_serving_checkpoint_factor) + {n} GPU(s) x {rules.ram_serving_swap_gb_per_gpu:g} GB swap space "
                f"(rule ram_serving_swap_gb_per_gpu) + {fmt(rules.ram_serving_base_gb)} GB for the system (rule "
                f"ram_serving_base_gb) = {fmt(ratio_gb)} GB")
    else:
        text = (f"RAM {fmt(ram_gb)} GB: {rules.ram_to_vram_ratio:g} x {fmt(vram)} GB VRAM ({n} x {g.memory_gb:g} "
                f"GB) = {fmt(ratio_gb)} GB (rule ram_to_vram_ratio)")
    if hard_gb > ratio_gb:
        text += (f"; CPU offload {fmt(needs.offload_bytes / GIB)} GB + page cache {fmt(cache_gb)} GB "
                 f"(rule ram_data_cache_fraction) = {fmt(hard_gb)} GB is more")
    text += f"; {dimms} x {dimm_gb} GB DIMMs ({how})" if dimms else f"; {how}"
    b.reasons.append(text)
    if ram_gb < want_gb:
        b.short(f"RAM {fmt(ram_gb)} GB is {ram_gb / vram:.1f}x VRAM, below the {fmt(want_gb)} GB the rules "
                f"ask: {p.id} takes no more")
    return ram_gb, dimms


def nvme_step(shelf: Shelf, p: Platform, needs: ServerNeeds | Needs, rules: ServerRules,
              b: Build) -> tuple[Drive, int, int, float]:
    """(drive, count, bytes, GB/s striped) for the dataset, the kept checkpoints and scratch."""
    n = needs.gpus_per_server
    kept = rules.checkpoints_kept * needs.checkpoint_bytes
    need_b = (needs.dataset_bytes + kept) * (1 + rules.scratch_fraction)
    training = needs.data_read_bytes_per_s > 0
    floor = rules.nvme_read_gbs_per_gpu[needs.modality] * n if training else 0.0
    need_gbs = max(needs.data_read_bytes_per_s / 1e9, floor)
    drive, k, ok = shelf.drives_for(p, need_b, need_gbs)
    storage_b = int(k * drive.capacity_tb * TB)
    read_gbs = k * drive.seq_read_gbs
    if not b.text:
        if not ok:
            b.short("NVMe")
        return drive, k, storage_b, read_gbs
    b.reasons.append(f"NVMe {k} x {drive.capacity_tb:g} TB {drive.name} = {_size(storage_b)}: (dataset "
                     f"{_size(needs.dataset_bytes)} + {rules.checkpoints_kept} checkpoints x "
                     f"{_size(needs.checkpoint_bytes)} (rule checkpoints_kept)) x {1 + rules.scratch_fraction:g} "
                     f"for scratch (rule scratch_fraction) = {_size(need_b)}")
    if training:
        b.reasons.append(f"NVMe read {read_gbs:,.1f} GB/s, striped: needs max(data stream "
                         f"{needs.data_read_bytes_per_s / 1e9:,.2f} GB/s, {n} GPU(s) x "
                         f"{rules.nvme_read_gbs_per_gpu[needs.modality]:g} GB/s for {needs.modality} "
                         f"(rule nvme_read_gbs_per_gpu)) = {need_gbs:,.2f} GB/s")
    else:
        b.reasons.append(f"NVMe read {read_gbs:,.1f} GB/s: no training data stream; the "
                         f"{_size(needs.weights_bytes)} of weights load in "
                         f"{needs.weights_bytes / 1e9 / read_gbs:,.0f} s")
    if not ok:
        b.short(f"NVMe short: needs {_size(need_b)} at {need_gbs:,.1f} GB/s; {p.id}'s {k} bays of "
                f"{drive.id} give {_size(storage_b)} at {read_gbs:,.1f} GB/s: add shared storage")
    return drive, k, storage_b, read_gbs


def network_step(shelf: Shelf, p: Platform, g: Gpu, needs: ServerNeeds | Needs, rules: ServerRules,
                 b: Build) -> tuple[Nic | None, int]:
    """(NIC, count): one RDMA NIC per GPU plus storage for a cluster, one storage NIC otherwise, none in a lone
    tower."""
    n = needs.gpus_per_server
    if needs.multi_node and g.interconnect.kind != "roce-on-die":
        rate = rules.network_gbps_per_gpu[g.generation]
        nic = shelf.nic(rate, True)
        if nic is None:
            if b.text:
                b.warnings.append(f"no NIC in the catalog carries {rate} Gb/s with RDMA")
            return None, 0
        count = n + rules.storage_nics_multi_node
        if b.text:
            b.reasons.append(f"Network {count} x {nic.name} ({nic.total_gbps} Gb/s): one per GPU at {rate} Gb/s for "
                             f"{g.generation} (rule network_gbps_per_gpu) + {rules.storage_nics_multi_node} for "
                             f"storage (rule storage_nics_multi_node) = {fmt(count * nic.total_gbps)} Gb/s")
    elif p.form == "tower" and not needs.multi_node:
        if b.text:
            b.reasons.append("Network: onboard Ethernet (a tower on its own keeps its data on local NVMe)")
        return None, 0
    else:
        nic = shelf.nic(rules.storage_nic_gbps, False)
        if nic is None:
            return None, 0
        count = 1
        if b.text:
            scale_out = (f"{g.id} scales out over its own on-die RoCE ports; " if needs.multi_node else "")
            b.reasons.append(f"Network: {scale_out}1 x {nic.name} ({nic.total_gbps} Gb/s) for storage and "
                             f"management (rule storage_nic_gbps: at least {rules.storage_nic_gbps} Gb/s)")
    if b.text and p.nic_slots is not None and count > p.nic_slots:
        b.warnings.append(f"{count} NICs but {p.id} has {p.nic_slots} NIC slots: the rest need OCP/DPU slots")
    return nic, count


def lanes_step(shelf: Shelf, p: Platform, g: Gpu, n: int, cpu: Cpu, drive: Drive, k: int, nic: Nic | None,
               nics: int, b: Build) -> tuple[int, int]:
    """(PCIe lanes the GPUs, drives and NICs need, lanes the CPUs give)."""
    s, drive_lanes = p.cpu_sockets, shelf.lanes(drive)
    lanes_gpu = 0 if g.form_factor == "superchip" else g.interconnect.pcie_lanes
    need_lanes = n * lanes_gpu + k * drive_lanes + nics * (nic.pcie_lanes if nic else 0)
    avail = cpu.pcie_lanes if s == 1 else (cpu.pcie_lanes_2s if s == 2 and cpu.pcie_lanes_2s else s * cpu.pcie_lanes)
    if not b.text:
        return need_lanes, avail
    text = (f"PCIe lanes {need_lanes}: {n} GPUs x {lanes_gpu} + {k} drives x {drive_lanes} + {nics} NICs x "
            f"{nic.pcie_lanes if nic else 0}, against {avail} from {s} x {cpu.name}")
    if need_lanes > avail and p.nvlink_board:
        text += "; the baseboard's PCIe switches share CPU lanes among GPUs, NICs and drives (as on HGX)"
    elif need_lanes > avail:
        b.warnings.append(f"PCIe lanes short: {need_lanes} needed, the CPUs give {avail}; the platform must use "
                          "PCIe switches (devices share x16 uplinks)")
    b.reasons.append(text)
    return need_lanes, avail


def power_step(p: Platform, g: Gpu, n: int, cpu: Cpu, dimms: int, k: int, nics: int, rules: ServerRules,
               b: Build) -> float:
    """Watts at the wall: the parts plus chassis overhead, or the vendor's maximum when the box is full."""
    s = p.cpu_sockets
    cpu_w = 0.0 if g.tdp_includes_cpu else s * cpu.tdp_w  # a module's power may already hold its CPU (GH200)
    parts = (n * g.tdp_w + cpu_w + dimms * rules.dimm_w + k * rules.drive_w + nics * rules.nic_w)
    power = parts * (1 + rules.chassis_overhead_fraction)
    # the vendor's maximum when the box is full and above the estimate; always for an appliance as shipped
    full = p.max_power_w is not None and n == p.gpu_slots and (p.max_power_w > power or p.fixed)
    if not b.text:
        return float(p.max_power_w) if full and p.max_power_w is not None else power
    cpus = f"{s} x {cpu.name} inside the {g.tdp_w:g} W modules" if g.tdp_includes_cpu else f"{s} x {cpu.tdp_w} W CPUs"
    text = (f"Power {fmt(power)} W: ({n} x {g.tdp_w:g} W GPUs + {cpus} + {dimms} DIMMs x "
            f"{rules.dimm_w:g} W + {k} drives x {rules.drive_w:g} W + {nics} NICs x {rules.nic_w:g} W = "
            f"{fmt(parts)} W) x {1 + rules.chassis_overhead_fraction:g} (rule chassis_overhead_fraction)")
    if full and p.max_power_w is not None:
        higher = "is higher and " if p.max_power_w > power else ""
        power = float(p.max_power_w)
        text += f"; the vendor's maximum for the appliance as shipped, {fmt(power)} W (platform max_power_w), " \
            f"{higher}is used" if p.fixed else f"; the vendor's maximum, {fmt(power)} W (platform max_power_w), is " \
            "higher and is used"
    elif p.max_power_w is not None:
        text += f"; vendor maximum {fmt(p.max_power_w)} W (platform max_power_w)"
    b.reasons.append(text)
    return power


def psu_step(p: Platform, power: float, purpose: str, rules: ServerRules, b: Build) -> tuple[float, str | None]:
    """The PSU watts to buy (headroom, N+N in production), and why the platform's own supplies cannot carry the
    server (a hard limit: a server that would trip its supplies is not a server to get), or None."""
    redundancy = rules.psu_redundancy_production if purpose == "production" else 1.0
    psu = power * rules.psu_headroom * redundancy
    usable = p.psu_usable_w
    if not b.text:
        short = usable is not None and usable < power * rules.psu_headroom
        return psu, (_psu_short(p, usable or 0.0, power, rules) if short else None)
    text = f"PSU {fmt(psu)} W: {fmt(power)} W x {rules.psu_headroom:g} (rule psu_headroom)"
    if redundancy > 1:
        text += f" x {redundancy:g} for N+N in production (rule psu_redundancy_production)"
    if usable is not None:
        text += f"; the platform has {fmt(p.psu_total_w or 0)} W ({p.psu_redundancy or 'no stated redundancy'})"
        if usable < power * rules.psu_headroom:
            b.reasons.append(text)
            return psu, _psu_short(p, usable, power, rules)
    b.reasons.append(text)
    return psu, None


def _psu_short(p: Platform, usable: float, power: float, rules: ServerRules) -> str:
    return (f"PSUs short: {p.id}'s supplies give {fmt(usable)} W with the spares held back, below "
            f"{fmt(power * rules.psu_headroom)} W (rule psu_headroom)")


def cooling_step(p: Platform, g: Gpu, power: float, rules: ServerRules, b: Build) -> tuple[str, float]:
    """(air or liquid, BTU/h to remove)."""
    liquid = g.cooling == "liquid" or g.tdp_w > rules.liquid_above_gpu_tdp_w
    btu = power * rules.btu_h_per_w
    if not b.text:
        return ("liquid" if liquid else p.cooling), btu
    cooling, why = p.cooling, f"the platform is {p.cooling}-cooled"
    if liquid:
        cooling = "liquid"
        why = (f"{g.tdp_w:g} W GPUs, above {rules.liquid_above_gpu_tdp_w:g} W (rule liquid_above_gpu_tdp_w)"
               if g.tdp_w > rules.liquid_above_gpu_tdp_w else f"{g.id} is liquid-cooled")
    text = f"Cooling {fmt(btu)} BTU/h = {fmt(power)} W x {rules.btu_h_per_w:g} (rule btu_h_per_w), {cooling}: {why}"
    if power > rules.rack_power_typical_w:
        text += (f"; more than a typical enterprise rack's {fmt(rules.rack_power_typical_w)} W "
                 "(rule rack_power_typical_w): plan a high-density rack")
    b.reasons.append(text)
    return cooling, btu


def rack_step(p: Platform, b: Build) -> None:
    b.reasons.append(f"Rack space {p.rack_units} U (platform)" if p.rack_units else
                     "Rack space: a whole rack (rack-scale system)" if p.form == "rack-scale" else
                     "Rack space: a tower, no rack units")


def links_step(g: Gpu, needs: ServerNeeds | Needs, b: Build) -> None:
    """Whether tensor parallelism stays inside the GPUs' NVLink (or other) domain."""
    tp, link = needs.tensor_parallel, g.interconnect
    if tp <= 1:
        return
    if link.kind == "none":
        extra = (": GeForce cards also have PCIe peer-to-peer disabled, so all-reduces go through host memory"
                 if g.market_class == "consumer" else "")
        b.warnings.append(f"tensor parallel {tp} over PCIe: {g.id} has no NVLink{extra}")
    elif tp > link.domain_gpus:
        b.warnings.append(f"tensor parallel {tp} spans more than the {link.domain_gpus}-GPU {link.kind} domain; "
                          "beyond it traffic goes over PCIe or the network")
    else:
        b.reasons.append(f"Tensor parallel {tp} inside the {link.domain_gpus}-GPU {link.kind} domain "
                         f"({link.bandwidth_gbs:g} GB/s per GPU)")
    if tp > needs.gpus_per_server:
        b.warnings.append(f"tensor parallel {tp} crosses servers ({needs.gpus_per_server} GPUs each): "
                          "its all-reduces run over the network")


def unknowns_step(p: Platform, nics: int, b: Build) -> None:
    """A warning naming the platform figures the catalog lacks."""
    unknown = [name for name, v in (("PSU rating", p.psu_total_w), ("maximum memory", p.memory_max_gb),
                                    ("NVMe bays", p.nvme_bays), ("NIC slots", p.nic_slots if nics else 0))
               if v is None]
    if unknown:
        b.warnings.append(f"{p.id}: {', '.join(unknown)} not in the catalog; check them with the vendor")


def price_step(p: Platform, g: Gpu, needs: ServerNeeds | Needs, rules: ServerRules, b: Build) -> float | None:
    """The server's price: the platform's with its GPUs, a system price, or GPUs x the overhead factor."""
    n = needs.gpus_per_server
    basis, price = _base_price(p, g, n, rules)
    if price is not None and needs.multi_node:
        price *= 1 + rules.cluster_interconnect_price_fraction
    if not b.text:
        return price
    if needs.purpose == "production" and g.market_class == "consumer":
        b.warnings.append(f"{g.id} is a GeForce card: NVIDIA's GeForce driver licence does not allow datacenter "
                          "deployment, and its memory has no ECC")
    if basis == "platform" and p.price is not None:
        text = f"Price {b.money(p.price.value)}: the platform's price with its GPUs ({p.price.kind}, {p.price.as_of})"
    elif g.price is None:
        b.reasons.append(f"Price: none, {g.id} has no price in the catalog"
                         + (f" ({g.no_price})" if g.no_price else ""))
        return None
    elif basis == "system":
        text = (f"Price {b.money(n * g.price.value)}: {n} x {b.money(g.price.value)} ({g.price.kind}, "
                f"{g.price.as_of}), the server already in it")
    else:
        f = rules.server_overhead_price_factor
        text = (f"Price {b.money(n * g.price.value * f)}: {n} x {b.money(g.price.value)} ({g.price.kind}, "
                f"{g.price.as_of}) x {f:g} for the rest of the server (rule server_overhead_price_factor)")
    if needs.multi_node:
        text += (f", + {rules.cluster_interconnect_price_fraction:.1%} for this server's share of the cluster network "
                 "(rule cluster_interconnect_price_fraction)")
    b.reasons.append(text)
    return price


def _base_price(p: Platform, g: Gpu, n: int, rules: ServerRules) -> tuple[str, float | None]:
    """(basis, price in the catalog's currency) of one server before its share of a cluster network: the platform's
    price with its GPUs, a system price per GPU, or the GPUs x the overhead factor (None: no price)."""
    if p.price is not None and p.price_includes_gpus and n == p.gpu_slots:
        return "platform", p.price.value
    if g.price is None:
        return "none", None
    if "system" in g.price.kind.lower():
        return "system", n * g.price.value
    return "parts", n * g.price.value * rules.server_overhead_price_factor
