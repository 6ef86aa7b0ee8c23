"""The per-part choices of the server builder: the CPU, the RAM (DIMMs or soldered memory), the NVMe drives and
the NIC for a platform. Each takes the catalog rows the platform accepts and returns the part (and count); the
reason lines are written by core/server/steps.py. Pure."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpuplan.core.server.common import Build, fmt
from gpuplan.units import TB

if TYPE_CHECKING:
    from gpuplan.schema.rules import ServerRules
    from gpuplan.schema.server import Cpu, Drive, Nic, Platform

#: one RAM option: (total GB, DIMMs, DIMM GB, how the channels are filled)
RamOption = tuple[int, int, int, str]


def choose_cpu(cpus: tuple[Cpu, ...], p: Platform, need: int, b: Build) -> Cpu:
    """The newest-generation CPU with the fewest cores that meets `need` over p's sockets, else the biggest
    (a soft shortfall)."""
    ok = [c for c in cpus if c.cores * p.cpu_sockets >= need]
    if ok:
        # newest PCIe generation first: platforms that list no CPUs are current boards, which take current parts
        return min(ok, key=lambda c: (-c.pcie_gen, c.cores, c.tdp_w, c.id))
    best = max(cpus, key=lambda c: (c.cores, -c.tdp_w, c.id))
    b.short(f"CPU cores short: the rule asks {need}, the most {p.id} takes is "
            f"{p.cpu_sockets} x {best.cores} = {p.cpu_sockets * best.cores}")
    return best


def _ram_cap(p: Platform, cpu: Cpu) -> int | None:
    """The most memory the platform and its CPUs take (None: the catalog gives neither limit)."""
    limits = [x for x in (p.memory_max_gb, cpu.memory_max_gb * p.cpu_sockets if cpu.memory_max_gb else None) if x]
    return min(limits) if limits else None


def _ram_options(p: Platform, cpu: Cpu, want_gb: float, hard_gb: float, cap: int | None,
                 rules: ServerRules) -> list[RamOption]:
    """Every memory size the platform can be filled with, channels alike, smallest first."""
    s = p.cpu_sockets
    options: list[RamOption] = []
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
    return options


def choose_ram(p: Platform, cpu: Cpu, want_gb: float, hard_gb: float, rules: ServerRules) -> RamOption | str:
    """(total GB, DIMMs, DIMM GB, how) or why the platform cannot take the memory the hard need asks."""
    s = p.cpu_sockets
    cap = _ram_cap(p, cpu)
    if p.dimm_slots == 0 or cpu.memory_type == "LPDDR5X":
        if cap is None:
            return "has soldered memory of a size the catalog does not give (memory_max_gb)"
        total = cap
        if total < hard_gb:
            return f"soldered memory {fmt(total)} GB is below the {fmt(hard_gb)} GB offload and cache need"
        return total, 0, 0, f"soldered {cpu.memory_type} on {s} x {cpu.name}"
    options = _ram_options(p, cpu, want_gb, hard_gb, cap, rules)
    usable = [o for o in options if cap is None or o[0] <= cap]
    if not usable or usable[-1][0] < hard_gb:
        most = usable[-1][0] if usable else 0
        return f"takes at most {fmt(most)} GB, below the {fmt(hard_gb)} GB offload and cache need"
    for o in usable:
        if o[0] >= want_gb:
            return o
    return usable[-1]


def choose_drives(drives: tuple[Drive, ...], p: Platform, need_b: float, need_gbs: float,
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


def choose_nic(nics: tuple[Nic, ...], gbps: int, rdma: bool) -> Nic | None:
    """The smallest NIC that carries gbps (with RDMA when asked): InfiniBand first for RDMA, else Ethernet."""
    ok = [n for n in nics if n.total_gbps >= gbps and (n.rdma or not rdma)]
    if not ok:
        return None
    return min(ok, key=lambda n: (n.total_gbps, n.ports, n.kind != "infiniband" if rdma else n.kind != "ethernet",
                                  n.id))
