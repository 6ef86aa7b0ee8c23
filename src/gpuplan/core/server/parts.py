"""The per-part choices of the server builder: the CPU, the RAM (DIMMs or soldered memory), the NVMe drives and
the NIC for a platform. Each takes the catalog rows the platform accepts and returns the part (and count); the
reason lines are written by core/server/steps.py. `Shelf` holds one catalog's rows, sorted once, and memoises
each choice on the inputs it depends on (a search asks the same questions of many servers). Pure."""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import TYPE_CHECKING

from gpuplan.core.server.common import fmt
from gpuplan.units import TB

if TYPE_CHECKING:
    from gpuplan.schema.rules import ServerRules
    from gpuplan.schema.server import Cpu, Drive, Nic, Platform

#: one RAM option: (total GB, DIMMs, DIMM GB, how the channels are filled)
RamOption = tuple[int, int, int, str]


def choose_cpu(cpus: tuple[Cpu, ...], p: Platform, need: int) -> tuple[Cpu, str | None]:
    """The newest-generation CPU with the fewest cores that meets `need` over p's sockets, else the biggest
    and the soft shortfall's warning."""
    ok = [c for c in cpus if c.cores * p.cpu_sockets >= need]
    if ok:
        # newest PCIe generation first: platforms that list no CPUs are current boards, which take current parts
        return min(ok, key=lambda c: (-c.pcie_gen, c.cores, c.tdp_w, c.id)), None
    best = max(cpus, key=lambda c: (c.cores, -c.tdp_w, c.id))
    return best, (f"CPU cores short: the rule asks {need}, the most {p.id} takes is "
                  f"{p.cpu_sockets} x {best.cores} = {p.cpu_sockets * best.cores}")


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


def _pick_ram(usable: list[RamOption], totals: list[int], want_gb: float, hard_gb: float) -> RamOption | str:
    """The smallest usable option that meets want_gb (else the largest), or why none holds hard_gb."""
    if not usable or usable[-1][0] < hard_gb:
        most = usable[-1][0] if usable else 0
        return f"takes at most {fmt(most)} GB, below the {fmt(hard_gb)} GB offload and cache need"
    i = bisect_left(totals, want_gb)  # totals ascend: the first option of at least want_gb
    return usable[i] if i < len(usable) else usable[-1]


def choose_ram(p: Platform, cpu: Cpu, want_gb: float, hard_gb: float, rules: ServerRules,
               shelf: Shelf | None = None) -> RamOption | str:
    """(total GB, DIMMs, DIMM GB, how) or why the platform cannot take the memory the hard need asks (`shelf`:
    where the platform's options are memoised)."""
    s = p.cpu_sockets
    cap = _ram_cap(p, cpu)
    if p.dimm_slots == 0 or cpu.memory_type == "LPDDR5X":
        if cap is None:
            return "has soldered memory of a size the catalog does not give (memory_max_gb)"
        total = cap
        if total < hard_gb:
            return f"soldered memory {fmt(total)} GB is below the {fmt(hard_gb)} GB offload and cache need"
        return total, 0, 0, f"soldered {cpu.memory_type} on {s} x {cpu.name}"
    if shelf is not None and cpu.memory_channels:  # then the options do not depend on the need
        usable, totals = shelf.ram_options(p, cpu, cap, rules)
    else:
        options = _ram_options(p, cpu, want_gb, hard_gb, cap, rules)
        usable = [o for o in options if cap is None or o[0] <= cap]
        totals = [o[0] for o in usable]
    return _pick_ram(usable, totals, want_gb, hard_gb)


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


class Shelf:
    """One catalog's CPUs (by platform), drives and NICs, sorted once, and every choice made from them so far,
    by the inputs it depends on: the same question gets the same part without a second scan."""

    def __init__(self, cpus: dict[str, tuple[Cpu, ...]], drives: tuple[Drive, ...], nics: tuple[Nic, ...]):
        self.cpus, self.drives, self.nics = cpus, drives, nics
        self._cpu: dict[tuple[str, int], tuple[Cpu, str | None]] = {}
        self._drives: dict[tuple[str, int | None, float, float], tuple[Drive, int, bool]] = {}
        self._nic: dict[tuple[int, bool], Nic | None] = {}
        self._lanes: dict[str, int] = {}
        #: RAM options depend on the rules too: by rules object (held, so that its id stays its own), then by
        #: (platform id, CPU id)
        self._ram: dict[int, tuple[ServerRules, dict[tuple[str, str], tuple[list[RamOption], list[int]]]]] = {}

    def cpu(self, p: Platform, need: int) -> tuple[Cpu, str | None]:
        """choose_cpu over the CPUs p takes (not empty)."""
        key = (p.id, need)
        hit = self._cpu.get(key)
        if hit is None:
            hit = self._cpu[key] = choose_cpu(self.cpus[p.id], p, need)
        return hit

    def ram_options(self, p: Platform, cpu: Cpu, cap: int | None,
                    rules: ServerRules) -> tuple[list[RamOption], list[int]]:
        """The options of a CPU with memory channels on p within cap, and their totals (both ascending)."""
        slot = self._ram.get(id(rules))
        if slot is None or slot[0] is not rules:
            if len(self._ram) >= 8:
                self._ram.clear()
            slot = self._ram[id(rules)] = (rules, {})
        memo, key = slot[1], (p.id, cpu.id)
        hit = memo.get(key)
        if hit is None:
            usable = [o for o in _ram_options(p, cpu, 0.0, 0.0, cap, rules) if cap is None or o[0] <= cap]
            hit = memo[key] = (usable, [o[0] for o in usable])
        return hit

    def drives_for(self, p: Platform, need_b: float, need_gbs: float) -> tuple[Drive, int, bool]:
        """choose_drives over the catalog's drives."""
        key = ("tower" if p.form == "tower" else "", p.nvme_bays, need_b, need_gbs)
        hit = self._drives.get(key)
        if hit is None:
            if len(self._drives) >= 4096:  # keyed by float needs: bounded, for a long-running `gpuplan serve`
                self._drives.clear()
            hit = self._drives[key] = choose_drives(self.drives, p, need_b, need_gbs)
        return hit

    def nic(self, gbps: int, rdma: bool) -> Nic | None:
        """choose_nic over the catalog's NICs."""
        key = (gbps, rdma)
        if key not in self._nic:
            self._nic[key] = choose_nic(self.nics, gbps, rdma)
        return self._nic[key]

    def lanes(self, d: Drive) -> int:
        """The drive's PCIe lanes (parsed from its interface once)."""
        hit = self._lanes.get(d.id)
        if hit is None:
            hit = self._lanes[d.id] = d.pcie_lanes
        return hit
