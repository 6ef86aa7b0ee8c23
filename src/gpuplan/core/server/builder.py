"""Build a whole, balanced server around a number of GPUs: the platform that takes them, a CPU with enough
cores, RAM, NVMe capacity and read rate, NICs, PCIe lanes, power, PSUs, cooling, rack units and price.

Every constant is a rule of data/server_rules.toml (`ServerRules`); every decided figure comes with one line in
`ServerSpec.reasons` naming its rule and inputs. Pure: no I/O; the per-catalog index is a memo of the
catalog's own rows.

Choices, in order:
* platform: form factor, compatible_gpu_ids, per-GPU power, slot width, open-air coolers (rule
  open_air_listed_only), GPU slots, full baseboards (rule baseboard_full_only); the first by fewest GPU slots,
  then the form the purpose prefers (tower for an experiment, rackmount for production), then rack units.
  A platform that falls short on a soft rule (CPU cores, the RAM ratio, NVMe bays, its PSUs) is used only
  when no later platform meets every rule, and the shortfall is a warning.
* CPU: the platform's compatible_cpu_ids, else its vendors with enough sockets (server parts, workstation
  parts too in a tower); the newest PCIe generation, then the fewest cores that meet the rule.
* RAM: every memory channel filled alike (1, then 2 DIMMs per channel), the smallest total that meets
  max(ratio x VRAM, offload + page cache); soldered memory (dimm_slots = 0) is what the CPUs carry.
* NVMe: the fewest drives that hold dataset + kept checkpoints + scratch and read fast enough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuplan.schema.plan import ServerNeeds, ServerSpec
from gpuplan.units import GIB

if TYPE_CHECKING:
    from gpuplan.schema.catalog import Catalog
    from gpuplan.schema.hardware import Gpu
    from gpuplan.schema.rules import ServerRules
    from gpuplan.schema.server import Cpu, Drive, Nic, Platform

TB = 10**12  # drives are sold in decimal TB


@dataclass
class _Index:
    """What build_server needs from one catalog, sorted once."""

    catalog: Catalog
    platforms: tuple[Platform, ...]
    cpus: dict[str, tuple[Cpu, ...]]  # platform id -> CPUs it takes
    drives: tuple[Drive, ...]
    nics: tuple[Nic, ...]
    fits: dict[tuple[str, int, str, bool, bool], tuple[tuple[Platform, ...], str | None]] = field(default_factory=dict)


_INDEXES: dict[int, _Index] = {}


def _index(catalog: Catalog) -> _Index:
    hit = _INDEXES.get(id(catalog))
    if hit is not None and hit.catalog is catalog:
        return hit
    if len(_INDEXES) >= 8:
        _INDEXES.clear()
    cpus: dict[str, tuple[Cpu, ...]] = {}
    for p in catalog.platforms.rows.values():
        if p.compatible_cpu_ids is not None:
            allowed = [catalog.cpus.rows[i] for i in p.compatible_cpu_ids if i in catalog.cpus.rows]
        else:
            allowed = [c for c in catalog.cpus.rows.values() if c.vendor in p.cpu_vendors
                       and c.max_sockets >= p.cpu_sockets and (c.segment == "server" or p.form == "tower")]
        cpus[p.id] = tuple(sorted(allowed, key=lambda c: (c.cores, c.tdp_w, c.id)))
    idx = _Index(catalog=catalog, platforms=tuple(sorted(catalog.platforms.rows.values(), key=lambda p: p.id)),
                 cpus=cpus, drives=tuple(sorted(catalog.drives.rows.values(), key=lambda d: d.id)),
                 nics=tuple(sorted(catalog.nics.rows.values(), key=lambda n: n.id)))
    _INDEXES[id(catalog)] = idx
    return idx


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def _size(n_bytes: float) -> str:
    """Decimal TB from 1 TB up, GB below (drives are sold in decimal units)."""
    return f"{n_bytes / TB:,.2f} TB" if n_bytes >= TB else f"{n_bytes / 1e9:,.0f} GB"


def _ordinal(k: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(k, f"{k}th")


def _traits(g: Gpu) -> str:
    out = f"{g.form_factor}, {g.tdp_w:g} W"
    if g.slot_width is not None:
        out += f", {g.slot_width:g}-slot"
    return out + (f", {g.cooling}" if g.cooling in ("open-air", "liquid") else "")


def _misfit(g: Gpu, n: int, p: Platform, rules: ServerRules) -> str | None:
    """Why platform p cannot take n x g (None: it can)."""
    if g.form_factor not in p.gpu_form_factors:
        return "form"
    if p.compatible_gpu_ids is not None and g.id not in p.compatible_gpu_ids:
        return "built for other GPUs"
    if g.tdp_w > p.gpu_max_tdp_w:
        return f"feeds at most {p.gpu_max_tdp_w} W per GPU"
    if g.slot_width is not None and p.gpu_max_slot_width is not None and g.slot_width > p.gpu_max_slot_width:
        return f"takes cards up to {p.gpu_max_slot_width:g} slots wide"
    listed = p.compatible_gpu_ids is not None and g.id in p.compatible_gpu_ids
    if rules.open_air_listed_only and g.cooling == "open-air" and p.form != "tower" and not listed:
        return "no open-air coolers (rule open_air_listed_only)"
    if n > p.gpu_slots:
        return f"slots:{p.gpu_slots}"
    if rules.baseboard_full_only and p.nvlink_board and n != p.gpu_slots:
        return f"board:{p.gpu_slots}"
    return None


def _platforms(idx: _Index, g: Gpu, n: int, purpose: str,
               rules: ServerRules) -> tuple[tuple[Platform, ...], str | None]:
    key = (g.id, n, purpose, rules.open_air_listed_only, rules.baseboard_full_only)
    hit = idx.fits.get(key)
    if hit is not None:
        return hit
    order = {"experiment": ("tower", "rackmount", "rack-scale"), "production": ("rackmount", "rack-scale", "tower")}
    fit: list[Platform] = []
    why: dict[str, str] = {}
    for p in idx.platforms:
        m = _misfit(g, n, p, rules)
        if m is None:
            fit.append(p)
        elif m != "form":
            why[p.id] = m
    fit.sort(key=lambda p: (p.gpu_slots, order[purpose].index(p.form), p.rack_units or 0, p.id))
    reason = None
    if not fit:
        head = f"no platform takes {n} x {g.id} ({_traits(g)})"
        slots = {pid: int(m[6:]) for pid, m in why.items() if m.startswith("slots:")}
        boards = {pid: int(m[6:]) for pid, m in why.items() if m.startswith("board:")}
        if slots:
            best = max(slots, key=lambda pid: (slots[pid], pid))
            reason = f"{head}: the most any platform for it holds is {slots[best]} ({best})"
        elif boards:
            sizes = sorted(set(boards.values()))
            reason = (f"{head}: it comes on baseboards of {', '.join(map(str, sizes))} GPUs "
                      f"({', '.join(sorted(boards))}), sold full (rule baseboard_full_only)")
        elif why:
            reason = head + ": " + "; ".join(f"{pid} {m}" for pid, m in sorted(why.items())[:3])
            if len(why) > 3:
                reason += f"; {len(why) - 3} more"
        else:
            reason = f"{head}: no platform in the catalog takes {g.form_factor} GPUs"
    out = (tuple(fit), reason)
    idx.fits[key] = out
    return out


@dataclass
class _Build:
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the first soft rule this platform falls short on (a later platform that meets them all is preferred)
    shortfall: str | None = None

    def short(self, warning: str) -> None:
        self.warnings.append(warning)
        self.shortfall = self.shortfall or warning


def _choose_cpu(cpus: tuple[Cpu, ...], p: Platform, need: int, b: _Build) -> Cpu:
    ok = [c for c in cpus if c.cores * p.cpu_sockets >= need]
    if ok:
        # newest PCIe generation first: platforms that list no CPUs are current boards, which take current parts
        return min(ok, key=lambda c: (-c.pcie_gen, c.cores, c.tdp_w, c.id))
    best = max(cpus, key=lambda c: (c.cores, -c.tdp_w, c.id))
    b.short(f"CPU cores short: the rule asks {need}, the most {p.id} takes is "
            f"{p.cpu_sockets} x {best.cores} = {p.cpu_sockets * best.cores}")
    return best


def _choose_ram(p: Platform, cpu: Cpu, want_gb: float, hard_gb: float,
                rules: ServerRules) -> tuple[int, int, int, str] | str:
    """(total GB, DIMMs, DIMM GB, how) or why the platform cannot take the memory the hard need asks."""
    s = p.cpu_sockets
    limits = [x for x in (p.memory_max_gb, cpu.memory_max_gb * s if cpu.memory_max_gb else None) if x]
    cap = min(limits) if limits else None
    if p.dimm_slots == 0 or cpu.memory_type == "LPDDR5X":
        if cap is None:
            return "has soldered memory of a size the catalog does not give (memory_max_gb)"
        total = cap
        if total < hard_gb:
            return f"soldered memory {_fmt(total)} GB is below the {_fmt(hard_gb)} GB offload and cache need"
        return total, 0, 0, f"soldered {cpu.memory_type} on {s} x {cpu.name}"
    options: list[tuple[int, int, int, str]] = []
    if cpu.memory_channels:
        ch = s * cpu.memory_channels
        if p.dimm_slots is not None and p.dimm_slots < ch:  # fewer slots than channels: fill the slots
            counts = [(p.dimm_slots, f"all {p.dimm_slots} slots")]
        else:
            dpc_max = p.dimm_slots // ch if p.dimm_slots else rules.dimms_per_channel_unknown
            counts = [(dpc * ch, f"{dpc} per channel, {s} x {cpu.memory_channels} channels")
                      for dpc in range(1, dpc_max + 1)]
        for count, how in counts:
            for size in rules.dimm_sizes_gb[cpu.memory_type]:
                options.append((count * size, count, size, how))
    else:
        step = rules.ram_round_gb_per_socket * s
        top = max(want_gb, hard_gb, cap or 0)
        options = [(k * step, 0, 0, f"a multiple of {rules.ram_round_gb_per_socket} GB per socket "
                    "(rule ram_round_gb_per_socket)") for k in range(1, int(top // step) + 2)]
    options.sort(key=lambda o: (o[0], o[1]))
    usable = [o for o in options if cap is None or o[0] <= cap]
    if not usable or usable[-1][0] < hard_gb:
        most = usable[-1][0] if usable else 0
        return f"takes at most {_fmt(most)} GB, below the {_fmt(hard_gb)} GB offload and cache need"
    for o in usable:
        if o[0] >= want_gb:
            return o
    return usable[-1]


def _choose_drives(drives: tuple[Drive, ...], p: Platform, need_b: float, need_gbs: float,
                   ) -> tuple[Drive, int, bool]:
    """(drive, count, fits): the fewest drives that hold need_b bytes and read need_gbs, within the bays."""
    pool = [d for d in drives if p.form == "tower" or d.form != "M.2"] or list(drives)
    best: tuple[tuple[float, ...], Drive, int] | None = None
    for d in pool:
        k = max(1, math.ceil(need_b / (d.capacity_tb * TB)), math.ceil(need_gbs / d.seq_read_gbs))
        if p.nvme_bays is not None and k > p.nvme_bays:
            continue
        key = (k, k * d.capacity_tb, -d.seq_read_gbs)
        if best is None or key < best[0]:
            best = (key, d, k)
    if best is not None:
        return best[1], best[2], True
    bays = p.nvme_bays or 1
    d = max(pool, key=lambda d: (min(d.capacity_tb * TB * bays / max(need_b, 1), d.seq_read_gbs * bays
                                     / max(need_gbs, 1e-9)), d.id))
    return d, bays, False


def _choose_nic(nics: tuple[Nic, ...], gbps: int, rdma: bool) -> Nic | None:
    ok = [n for n in nics if n.total_gbps >= gbps and (n.rdma or not rdma)]
    if not ok:
        return None
    return min(ok, key=lambda n: (n.total_gbps, n.ports, n.kind != "infiniband" if rdma else n.kind != "ethernet",
                                  n.id))


def build_server(needs: ServerNeeds, catalog: Catalog, rules: ServerRules) -> tuple[ServerSpec | None, str | None]:
    """A balanced server for `needs`, or None and a one-line reason."""
    g = catalog.gpus.rows.get(needs.gpu_id)
    if g is None:
        return None, f"unknown gpu {needs.gpu_id!r}"
    n = needs.gpus_per_server
    if n < 1:
        return None, "a server needs at least one GPU"
    if needs.modality not in rules.cpu_cores_per_gpu:
        return None, f"unknown modality {needs.modality!r} (allowed: {', '.join(rules.cpu_cores_per_gpu)})"
    idx = _index(catalog)
    fit, reason = _platforms(idx, g, n, needs.purpose, rules)
    fallback: ServerSpec | None = None
    first_hard: str | None = None
    skipped: list[str] = []
    for pos, p in enumerate(fit, 1):
        spec, short = _build_on(idx, p, g, needs, rules, (pos, len(fit)), skipped)
        if spec is not None and short is None:
            return spec, None
        if spec is not None and fallback is None:
            fallback = spec
        if spec is None and first_hard is None:
            first_hard = f"{n} x {g.id} on {p.id}: {short}"
        skipped.append(f"{p.id}: {short}")
    if fallback is not None:
        return fallback, None
    return None, reason or first_hard


def _build_on(idx: _Index, p: Platform, g: Gpu, needs: ServerNeeds, rules: ServerRules, pos: tuple[int, int],
              skipped: list[str]) -> tuple[ServerSpec | None, str | None]:
    """The server on platform p, and None; or, with what falls short, the spec (soft) or None (hard)."""
    n, s, b = needs.gpus_per_server, p.cpu_sockets, _Build()
    prefer = "towers" if needs.purpose == "experiment" else "rackmount"
    rank = "the only platform" if pos[1] == 1 else f"{_ordinal(pos[0])} of {pos[1]} platforms"
    text = (f"Platform {p.name} ({p.id}): {n} of {p.gpu_slots} GPU slots for {g.id} ({_traits(g)}); {rank} "
            f"that can take them (by fewest GPU slots, then {prefer} first for {needs.purpose}, then rack units)")
    if skipped:
        text += "; passed over: " + "; ".join(skipped)
    b.reasons.append(text)
    # CPU
    cpus = idx.cpus[p.id]
    if not cpus:
        return None, "no CPU in the catalog fits it (compatible_cpu_ids / cpu_vendors)"
    per_gpu = rules.cpu_cores_per_gpu[needs.modality]
    need_cores = max(rules.min_cpu_cores, math.ceil(per_gpu * n))
    cpu = _choose_cpu(cpus, p, need_cores, b)
    cores = cpu.cores * s
    if p.compatible_cpu_ids:
        how = "; the CPU the platform is built with" if len(cpus) == 1 else "; the smallest the platform lists"
    else:
        how = (f"; {p.id} lists no CPU models, so this is the smallest {'/'.join(p.cpu_vendors)} part for "
               f"{s} socket(s) at the newest PCIe generation: check the socket with the vendor")
    b.reasons.append(f"CPU {s} x {cpu.name} = {cores} cores: needs max({rules.min_cpu_cores} (rule min_cpu_cores), "
                     f"{n} GPU(s) x {per_gpu:g} cores for {needs.modality} (rule cpu_cores_per_gpu)) = {need_cores}"
                     f"{how}")
    # RAM, in GB as sold (binary: a 64 GB DIMM and an 80 GB GPU hold 64 and 80 GiB)
    vram = n * g.memory_gb
    ratio_gb = rules.ram_to_vram_ratio * vram
    cache_gb = min(needs.dataset_bytes / GIB, rules.ram_data_cache_fraction * ratio_gb)
    hard_gb = needs.offload_bytes / GIB + cache_gb if needs.offload_bytes > 0 else 0.0
    want_gb = max(ratio_gb, hard_gb)
    ram = _choose_ram(p, cpu, want_gb, hard_gb, rules)
    if isinstance(ram, str):
        return None, f"RAM: {p.id} {ram}"
    ram_gb, dimms, dimm_gb, how = ram
    text = (f"RAM {_fmt(ram_gb)} GB: {rules.ram_to_vram_ratio:g} x {_fmt(vram)} GB VRAM ({n} x {g.memory_gb:g} GB) "
            f"= {_fmt(ratio_gb)} GB (rule ram_to_vram_ratio)")
    if hard_gb > ratio_gb:
        text += (f"; CPU offload {_fmt(needs.offload_bytes / GIB)} GB + page cache {_fmt(cache_gb)} GB "
                 f"(rule ram_data_cache_fraction) = {_fmt(hard_gb)} GB is more")
    text += f"; {dimms} x {dimm_gb} GB DIMMs ({how})" if dimms else f"; {how}"
    b.reasons.append(text)
    if ram_gb < want_gb:
        b.short(f"RAM {_fmt(ram_gb)} GB is {ram_gb / vram:.1f}x VRAM, below the {_fmt(want_gb)} GB the rules "
                f"ask: {p.id} takes no more")
    # NVMe
    kept = rules.checkpoints_kept * needs.checkpoint_bytes
    need_b = (needs.dataset_bytes + kept) * (1 + rules.scratch_fraction)
    training = needs.data_read_bytes_per_s > 0
    floor = rules.nvme_read_gbs_per_gpu[needs.modality] * n if training else 0.0
    need_gbs = max(needs.data_read_bytes_per_s / 1e9, floor)
    drive, k, ok = _choose_drives(idx.drives, p, need_b, need_gbs)
    storage_b = int(k * drive.capacity_tb * TB)
    read_gbs = k * drive.seq_read_gbs
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
    # network
    nic, nics = _network(idx, p, g, needs, rules, b)
    net_gbps = float(nics * nic.total_gbps) if nic else 0.0
    # PCIe lanes
    lanes_gpu = 0 if g.form_factor == "superchip" else g.interconnect.pcie_lanes
    need_lanes = n * lanes_gpu + k * drive.pcie_lanes + nics * (nic.pcie_lanes if nic else 0)
    avail = cpu.pcie_lanes if s == 1 else (cpu.pcie_lanes_2s if s == 2 and cpu.pcie_lanes_2s else s * cpu.pcie_lanes)
    text = (f"PCIe lanes {need_lanes}: {n} GPUs x {lanes_gpu} + {k} drives x {drive.pcie_lanes} + {nics} NICs x "
            f"{nic.pcie_lanes if nic else 0}, against {avail} from {s} x {cpu.name}")
    if need_lanes > avail and p.nvlink_board:
        text += "; the baseboard's PCIe switches share CPU lanes among GPUs, NICs and drives (as on HGX)"
    elif need_lanes > avail:
        b.warnings.append(f"PCIe lanes short: {need_lanes} needed, the CPUs give {avail}; the platform must use "
                          "PCIe switches (devices share x16 uplinks)")
    b.reasons.append(text)
    # power, PSU, cooling
    parts = (n * g.tdp_w + s * cpu.tdp_w + dimms * rules.dimm_w + k * rules.drive_w + nics * rules.nic_w)
    power = parts * (1 + rules.chassis_overhead_fraction)
    text = (f"Power {_fmt(power)} W: ({n} x {g.tdp_w:g} W GPUs + {s} x {cpu.tdp_w} W CPUs + {dimms} DIMMs x "
            f"{rules.dimm_w:g} W + {k} drives x {rules.drive_w:g} W + {nics} NICs x {rules.nic_w:g} W = "
            f"{_fmt(parts)} W) x {1 + rules.chassis_overhead_fraction:g} (rule chassis_overhead_fraction)")
    if p.max_power_w is not None and n == p.gpu_slots and p.max_power_w > power:
        power = float(p.max_power_w)
        text += f"; the vendor's maximum, {_fmt(power)} W (platform max_power_w), is higher and is used"
    elif p.max_power_w is not None:
        text += f"; vendor maximum {_fmt(p.max_power_w)} W (platform max_power_w)"
    b.reasons.append(text)
    redundancy = rules.psu_redundancy_production if needs.purpose == "production" else 1.0
    psu = power * rules.psu_headroom * redundancy
    text = f"PSU {_fmt(psu)} W: {_fmt(power)} W x {rules.psu_headroom:g} (rule psu_headroom)"
    if redundancy > 1:
        text += f" x {redundancy:g} for N+N in production (rule psu_redundancy_production)"
    usable = p.psu_usable_w
    if usable is not None:
        text += f"; the platform has {_fmt(p.psu_total_w or 0)} W ({p.psu_redundancy or 'no stated redundancy'})"
        if usable < power * rules.psu_headroom:
            b.short(f"PSUs short: {p.id}'s supplies give {_fmt(usable)} W with the spares held back, "
                    f"below {_fmt(power * rules.psu_headroom)} W")
    b.reasons.append(text)
    cooling, why = p.cooling, f"the platform is {p.cooling}-cooled"
    if g.cooling == "liquid" or g.tdp_w > rules.liquid_above_gpu_tdp_w:
        cooling = "liquid"
        why = (f"{g.tdp_w:g} W GPUs, above {rules.liquid_above_gpu_tdp_w:g} W (rule liquid_above_gpu_tdp_w)"
               if g.tdp_w > rules.liquid_above_gpu_tdp_w else f"{g.id} is liquid-cooled")
    btu = power * rules.btu_h_per_w
    text = f"Cooling {_fmt(btu)} BTU/h = {_fmt(power)} W x {rules.btu_h_per_w:g} (rule btu_h_per_w), {cooling}: {why}"
    if power > rules.rack_power_typical_w:
        text += (f"; more than a typical enterprise rack's {_fmt(rules.rack_power_typical_w)} W "
                 "(rule rack_power_typical_w): plan a high-density rack")
    b.reasons.append(text)
    b.reasons.append(f"Rack space {p.rack_units} U (platform)" if p.rack_units else
                     "Rack space: a whole rack (rack-scale system)" if p.form == "rack-scale" else
                     "Rack space: a tower, no rack units")
    _links(g, needs, b)
    unknown = [name for name, v in (("PSU rating", p.psu_total_w), ("maximum memory", p.memory_max_gb),
                                    ("NVMe bays", p.nvme_bays), ("NIC slots", p.nic_slots if nics else 0))
               if v is None]
    if unknown:
        b.warnings.append(f"{p.id}: {', '.join(unknown)} not in the catalog; check them with the vendor")
    price = _price(p, g, needs, rules, b)
    spec = ServerSpec(platform_id=p.id, platform_name=p.name, gpu_id=g.id, gpus=n, cpu_id=cpu.id, cpu_model=cpu.name,
                      cpu_sockets=s, cpu_cores=cores, ram_bytes=int(ram_gb * GIB), storage_bytes=storage_b,
                      drive_id=drive.id, drives=k, storage_read_gb_s=read_gbs, nic_id=nic.id if nic else None,
                      nics=nics, network_gbit_s=net_gbps, pcie_lanes_needed=need_lanes, pcie_lanes_available=avail,
                      power_w=power, psu_w=psu, cooling_btu_h=btu, cooling=cooling, rack_units=p.rack_units,
                      price_usd=price, reasons=b.reasons, warnings=b.warnings)
    return spec, b.shortfall


def _network(idx: _Index, p: Platform, g: Gpu, needs: ServerNeeds, rules: ServerRules,
             b: _Build) -> tuple[Nic | None, int]:
    n = needs.gpus_per_server
    if needs.multi_node and g.interconnect.kind != "roce-on-die":
        rate = rules.network_gbps_per_gpu[g.generation]
        nic = _choose_nic(idx.nics, rate, rdma=True)
        if nic is None:
            b.warnings.append(f"no NIC in the catalog carries {rate} Gb/s with RDMA")
            return None, 0
        count = n + rules.storage_nics_multi_node
        b.reasons.append(f"Network {count} x {nic.name} ({nic.total_gbps} Gb/s): one per GPU at {rate} Gb/s for "
                         f"{g.generation} (rule network_gbps_per_gpu) + {rules.storage_nics_multi_node} for storage "
                         f"(rule storage_nics_multi_node) = {_fmt(count * nic.total_gbps)} Gb/s")
    elif p.form == "tower" and not needs.multi_node:
        b.reasons.append("Network: onboard Ethernet (a tower on its own keeps its data on local NVMe)")
        return None, 0
    else:
        nic = _choose_nic(idx.nics, rules.storage_nic_gbps, rdma=False)
        if nic is None:
            return None, 0
        count = 1
        scale_out = (f"{g.id} scales out over its own on-die RoCE ports; " if needs.multi_node else "")
        b.reasons.append(f"Network: {scale_out}1 x {nic.name} ({nic.total_gbps} Gb/s) for storage and management "
                         f"(rule storage_nic_gbps: at least {rules.storage_nic_gbps} Gb/s)")
    if p.nic_slots is not None and count > p.nic_slots:
        b.warnings.append(f"{count} NICs but {p.id} has {p.nic_slots} NIC slots: the rest need OCP/DPU slots")
    return nic, count


def _links(g: Gpu, needs: ServerNeeds, b: _Build) -> None:
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


def _price(p: Platform, g: Gpu, needs: ServerNeeds, rules: ServerRules, b: _Build) -> float | None:
    n = needs.gpus_per_server
    if needs.purpose == "production" and g.market_class == "consumer":
        b.warnings.append(f"{g.id} is a GeForce card: NVIDIA's GeForce driver licence does not allow datacenter "
                          "deployment, and its memory has no ECC")
    if p.price is not None and p.price_includes_gpus and n == p.gpu_slots:
        price, text = p.price.usd, (f"Price ${_fmt(p.price.usd)}: the platform's price with its GPUs "
                                    f"({p.price.kind}, {p.price.as_of})")
    elif g.price is None:
        b.reasons.append(f"Price: none, {g.id} has no price in the catalog")
        return None
    elif "system" in g.price.kind.lower():
        price = n * g.price.usd
        text = (f"Price ${_fmt(price)}: {n} x ${_fmt(g.price.usd)} ({g.price.kind}, {g.price.as_of}), "
                "the server already in it")
    else:
        f = rules.server_overhead_price_factor
        price = n * g.price.usd * f
        text = (f"Price ${_fmt(price)}: {n} x ${_fmt(g.price.usd)} ({g.price.kind}, {g.price.as_of}) x {f:g} "
                "for the rest of the server (rule server_overhead_price_factor)")
    if needs.multi_node:
        price *= 1 + rules.cluster_interconnect_price_fraction
        text += (f", + {rules.cluster_interconnect_price_fraction:.1%} for this server's share of the cluster network "
                 "(rule cluster_interconnect_price_fraction)")
    b.reasons.append(text)
    return price


__all__ = ["build_server"]
