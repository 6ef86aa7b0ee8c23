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
* A fixed appliance (`Platform.fixed`: DGX, NVL72 racks, tinybox) keeps the vendor's CPU, RAM, drives, NICs and
  PSUs (core/server/appliance.py): each is judged against the rules with a note, never a reason to pass it over.

Two passes: the search asks only whether a server is built and its price (`server_price`: the same choices, no
spec made, no line written), and the full build, with every line, is made for the candidates that are shown;
`build_server(..., reasons=False)` gives the same figures without the lines.

This module holds the entry point, the per-catalog index and the platform ranking; core/server/steps.py holds
the steps on one platform (their reason lines) and core/server/parts.py the per-part choices (and their memo).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuplan.core.server.appliance import shipped_cpu, shipped_drives, shipped_nics, shipped_psu, shipped_ram
from gpuplan.core.server.common import Build, traits
from gpuplan.core.server.parts import Shelf
from gpuplan.core.server.steps import (
    cooling_step,
    cpu_step,
    lanes_step,
    links_step,
    network_step,
    nvme_step,
    platform_line,
    power_step,
    price_step,
    psu_step,
    rack_step,
    ram_step,
    unknowns_step,
)
from gpuplan.schema.plan import ServerNeeds, ServerSpec
from gpuplan.units import GIB

if TYPE_CHECKING:
    from gpuplan.core.server.common import Needs
    from gpuplan.schema.catalog import Catalog
    from gpuplan.schema.hardware import Gpu
    from gpuplan.schema.rules import ServerRules
    from gpuplan.schema.server import Cpu, Platform


@dataclass
class _Index:
    """What build_server needs from one catalog, sorted once."""

    catalog: Catalog
    platforms: tuple[Platform, ...]
    #: the CPUs each platform takes, the drives and the NICs, with the choices made from them
    shelf: Shelf
    fits: dict[tuple[str, int, str, bool, bool], tuple[tuple[Platform, ...], str | None]] = field(default_factory=dict)
    #: (GPU id, rule open_air_listed_only) -> each platform and why it cannot take that GPU at any count (or None)
    takes: dict[tuple[str, bool], tuple[tuple[Platform, str | None], ...]] = field(default_factory=dict)


_INDEXES: dict[int, _Index] = {}


def _index(catalog: Catalog) -> _Index:
    """The index of `catalog`, built on first use (a few catalogs are kept, by identity)."""
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
    shelf = Shelf(cpus, tuple(sorted(catalog.drives.rows.values(), key=lambda d: d.id)),
                  tuple(sorted(catalog.nics.rows.values(), key=lambda n: n.id)))
    idx = _Index(catalog=catalog, platforms=tuple(sorted(catalog.platforms.rows.values(), key=lambda p: p.id)),
                 shelf=shelf)
    _INDEXES[id(catalog)] = idx
    return idx


def _misfit(g: Gpu, p: Platform, open_air_listed_only: bool) -> str | None:
    """Why platform p cannot take g, at any count (None: it can; _platforms checks the count)."""
    if g.form_factor not in p.gpu_form_factors:
        return "form"
    if p.compatible_gpu_ids is not None and g.id not in p.compatible_gpu_ids:
        return "built for other GPUs"
    if g.tdp_w > p.gpu_max_tdp_w:
        return f"feeds at most {p.gpu_max_tdp_w} W per GPU"
    if g.slot_width is not None and p.gpu_max_slot_width is not None and g.slot_width > p.gpu_max_slot_width:
        return f"takes cards up to {p.gpu_max_slot_width:g} slots wide"
    listed = p.compatible_gpu_ids is not None and g.id in p.compatible_gpu_ids
    if open_air_listed_only and g.cooling == "open-air" and p.form != "tower" and not listed:
        return "no open-air coolers (rule open_air_listed_only)"
    return None


def _takes(idx: _Index, g: Gpu, open_air_listed_only: bool) -> tuple[tuple[Platform, str | None], ...]:
    """Every platform for g's form factor, with its _misfit for g (in id order); memoised per index."""
    key = (g.id, open_air_listed_only)
    hit = idx.takes.get(key)
    if hit is None:
        pairs = ((p, _misfit(g, p, open_air_listed_only)) for p in idx.platforms)
        hit = idx.takes[key] = tuple((p, m) for p, m in pairs if m != "form")
    return hit


def _platforms(idx: _Index, g: Gpu, n: int, purpose: str,
               rules: ServerRules) -> tuple[tuple[Platform, ...], str | None]:
    """The platforms that take n x g, best first, and (when none does) a one-line reason; memoised per index."""
    key = (g.id, n, purpose, rules.open_air_listed_only, rules.baseboard_full_only)
    hit = idx.fits.get(key)
    if hit is not None:
        return hit
    order = {"experiment": ("tower", "rackmount", "rack-scale"), "production": ("rackmount", "rack-scale", "tower")}
    fit: list[Platform] = []
    why: dict[str, str] = {}
    for p, m in _takes(idx, g, rules.open_air_listed_only):
        if m is None and n > p.gpu_slots:
            m = f"slots:{p.gpu_slots}"
        elif m is None and rules.baseboard_full_only and p.nvlink_board and n != p.gpu_slots:
            m = f"board:{p.gpu_slots}"
        if m is None:
            fit.append(p)
        else:
            why[p.id] = m
    fit.sort(key=lambda p: (p.gpu_slots, order[purpose].index(p.form), p.rack_units or 0, p.id))
    reason = None
    if not fit:
        head = f"no platform takes {n} x {g.id} ({traits(g)})"
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


def build_server(needs: ServerNeeds | Needs, catalog: Catalog, rules: ServerRules, *, reasons: bool = True,
                 currency: str = "USD") -> tuple[ServerSpec | None, str | None]:
    """A balanced server for `needs`, or None and a one-line reason. With `reasons` False the spec has the same
    figures and empty `reasons` and `warnings` (the same needs build the full spec). `currency`: the catalog's
    prices' (the plan's, once the bundle is converted), in which the spec's `price` and its reasons are."""
    built, why = _decide(needs, catalog, rules, reasons, True, currency)
    return built, why  # type: ignore[return-value]


def server_price(needs: ServerNeeds | Needs, catalog: Catalog,
                 rules: ServerRules) -> tuple[bool, float | None, str | None]:
    """What the search compares of `build_server(needs)`: whether a server is built, its price (in the catalog's
    currency, None: no price) and why not; the same choices, with no spec made and no line written."""
    built, why = _decide(needs, catalog, rules, False, False)
    if built is None:
        return False, None, why
    return True, built[0], None  # type: ignore[index]


def _decide(needs: ServerNeeds | Needs, catalog: Catalog, rules: ServerRules, reasons: bool, spec: bool,
            currency: str = "USD") -> tuple[ServerSpec | tuple[float | None] | None, str | None]:
    """build_server's choice of platform: the spec (`spec`), else the (price,) of the server it builds."""
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
    fallback: ServerSpec | tuple[float | None] | None = None
    first_hard: str | None = None
    skipped: list[str] = []
    for pos, p in enumerate(fit, 1):
        built, short = _build_on(idx, p, g, needs, rules, (pos, len(fit)), skipped, reasons, spec, currency)
        if built is not None and short is None:
            return built, None
        if built is not None and fallback is None:
            fallback = built
        if built is None and first_hard is None:
            first_hard = f"{n} x {g.id} on {p.id}: {short}"
        if reasons:
            skipped.append(f"{p.id}: {short}")
    if fallback is not None:
        return fallback, None
    return None, reason or first_hard


def _build_on(idx: _Index, p: Platform, g: Gpu, needs: ServerNeeds | Needs, rules: ServerRules, pos: tuple[int, int],
              skipped: list[str], text: bool = True, spec: bool = True,
              currency: str = "USD") -> tuple[ServerSpec | tuple[float | None] | None, str | None]:
    """The server on platform p, and None; or, with what falls short, the spec (soft) or None (hard). With
    `text` False no reason or warning line is written (the figures are the same); with `spec` False only the
    (price,) is made, of the same server."""
    n, s, b, shelf = needs.gpus_per_server, p.cpu_sockets, Build(text, currency), idx.shelf
    if p.form == "tower" and needs.purpose == "production" and needs.servers > rules.production_tower_max_servers:
        return None, (f"{needs.servers} towers in production: no rack mounting, redundant power or out-of-band "
                      f"management (rule production_tower_max_servers: {rules.production_tower_max_servers})")
    if text:
        platform_line(p, g, needs, pos, skipped, b)
    if not shelf.cpus[p.id]:
        return None, "no CPU in the catalog fits it (compatible_cpu_ids / cpu_vendors)"
    # a fixed appliance (issue 28) keeps the vendor's CPU, RAM, drives, NICs and PSUs, each judged with a note
    cpu = shipped_cpu(shelf, p, needs, rules, b) if p.fixed else cpu_step(shelf, p, needs, rules, b)
    ram = shipped_ram(p, g, needs, rules, b) if p.fixed else ram_step(shelf, p, g, cpu, needs, rules, b)
    if isinstance(ram, str):
        return None, ram
    ram_gb, dimms = ram
    drives = shipped_drives(shelf, p, needs, rules, b) if p.fixed else None
    drive, k, storage_b, read_gbs = drives if drives is not None else nvme_step(shelf, p, needs, rules, b)
    shipped = shipped_nics(shelf, p, g, needs, rules, b) if p.fixed else None
    if shipped is not None:
        nic, nics, net_gbps = shipped
    else:
        nic, nics = network_step(shelf, p, g, needs, rules, b)
        net_gbps = float(nics * nic.total_gbps) if nic else 0.0
    need_lanes = avail = 0
    if spec:  # the lanes and the cooling are figures of the spec alone (no shortfall of theirs is hard)
        need_lanes, avail = lanes_step(shelf, p, g, n, cpu, drive, k, nic, nics, b)
    power = power_step(p, g, n, cpu, dimms, k, nics, rules, b)
    psu, psu_short = psu_step(p, power, needs.purpose, rules, b)
    if p.fixed:
        psu, psu_short = shipped_psu(p, power, psu, psu_short, b), None
    if psu_short is not None:
        return None, psu_short
    if not spec:
        return (price_step(p, g, needs, rules, b),), b.shortfall
    cooling, btu = cooling_step(p, g, power, rules, b)
    if text:
        rack_step(p, b)
        links_step(g, needs, b)
        unknowns_step(p, nics, b)
    price = price_step(p, g, needs, rules, b)
    out = ServerSpec(platform_id=p.id, platform_name=p.name, gpu_id=g.id, gpus=n, cpu_id=cpu.id, cpu_model=cpu.name,
                     cpu_sockets=s, cpu_cores=cpu.cores * s, ram_bytes=int(ram_gb * GIB), storage_bytes=storage_b,
                     drive_id=drive.id, drives=k, storage_read_gb_s=read_gbs, nic_id=nic.id if nic else None,
                     nics=nics, network_gbit_s=net_gbps, pcie_lanes_needed=need_lanes, pcie_lanes_available=avail,
                     power_w=power, psu_w=psu, cooling_btu_h=btu, cooling=cooling, rack_units=p.rack_units,
                     fixed=p.fixed, price=price, currency=currency, reasons=b.reasons, warnings=b.warnings)
    return out, b.shortfall


__all__ = ["build_server", "server_price"]
