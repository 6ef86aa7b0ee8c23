"""Checks the built-in server-parts catalog: cpus.toml, platforms.toml, drives.toml and nics.toml.

Three kinds of test. Hygiene: every table loads through `load_catalog()` with enough rows, ids are unique,
names unambiguous, dates not in the future, every row cites a source. Unit sanity: figures that cannot be true
(a DDR5 CPU on PCIe 4, a PCIe 4.0 x4 drive faster than its link, an HGX server whose PSUs cannot feed its
GPUs) fail. Golden spot checks: a few rows against the datasheet values quoted in the comments, so an edit
that breaks a well-known fact is caught.

The hygiene and sanity tests read the TOML files directly so that they run even while another table of the
catalog (gpus.toml) is being rewritten; the tests that need the whole catalog use `load_catalog()`.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gpuplan.catalog.hardware import load_catalog
from gpuplan.schema.server import Cpu, Drive, Nic, Platform

DATA = Path(__file__).resolve().parents[2] / "src" / "gpuplan" / "data"
#: table -> (file, model, minimum rows)
TABLES: dict[str, tuple[str, type, int]] = {
    "cpu": ("cpus.toml", Cpu, 14),
    "platform": ("platforms.toml", Platform, 10),
    "drive": ("drives.toml", Drive, 8),
    "nic": ("nics.toml", Nic, 8),
}
#: GPUs of gpus.toml that no catalogued platform takes, and why; any other GPU must have a platform
WITHOUT_PLATFORM = {
    "v100-sxm2-16gb": "legacy HGX-1/2 boards are not catalogued",
    "v100-sxm2-32gb": "legacy HGX-1/2 boards are not catalogued",
    "mi250x-128gb": "MI250X OAM servers are not catalogued",
    "gaudi2-96gb": "Gaudi 2 HLS servers are not catalogued",
    "h20-96gb": ("HGX H20 servers (sold in China) are not catalogued: no system description with chassis height and "
                 "power supplies found (searched 2026-12-03, fourth pass: only an Inspur NF5688M7 'HGX H20 8-GPU' "
                 "name in a shop listing, without specifications)"),
}
NIC_SPEEDS_GBPS = {25, 50, 100, 200, 400, 800}


def _raw(kind: str) -> list[dict[str, Any]]:
    data = tomllib.loads((DATA / TABLES[kind][0]).read_text(encoding="utf-8"))
    assert data.get("schema_version") == 1
    assert set(data) == {"schema_version", kind}, f"{TABLES[kind][0]} holds only [[{kind}]] rows"
    return data[kind]


def _rows(kind: str) -> list[Any]:
    model = TABLES[kind][1]
    return [model.model_validate(row) for row in _raw(kind)]


CPUS = {c.id: c for c in _rows("cpu")}
PLATFORMS = {p.id: p for p in _rows("platform")}
DRIVES = {d.id: d for d in _rows("drive")}
NICS = {n.id: n for n in _rows("nic")}
ALL = {"cpu": CPUS, "platform": PLATFORMS, "drive": DRIVES, "nic": NICS}


# --- hygiene ------------------------------------------------------------------------------------------------


def test_every_table_loads_through_the_catalog_with_enough_rows() -> None:
    catalog = load_catalog()
    for kind, (_, _, minimum) in TABLES.items():
        rows = catalog.table(kind).rows
        assert len(rows) >= minimum, f"{kind}: {len(rows)} rows, want at least {minimum}"
        assert set(rows) == set(ALL[kind]), f"{kind}: the loader and the TOML file disagree"


@pytest.mark.parametrize("kind", TABLES)
def test_ids_unique_and_names_unambiguous(kind: str) -> None:
    ids = [row["id"] for row in _raw(kind)]
    assert len(ids) == len(set(ids)), f"{kind}: duplicate ids"
    owner: dict[str, str] = {}
    for row in ALL[kind].values():
        for name in (row.id, *row.aliases):
            key = name.lower()
            assert owner.setdefault(key, row.id) == row.id, f"{kind} name {name!r}: {owner[key]} and {row.id}"


@pytest.mark.parametrize("kind", TABLES)
def test_dates_are_not_in_the_future(kind: str) -> None:
    today = dt.date.today()
    for row in ALL[kind].values():
        assert row.as_of <= today, f"{row.id}: as_of {row.as_of}"
        if getattr(row, "price", None) is not None:
            assert row.price.as_of <= today, f"{row.id}: price as_of {row.price.as_of}"
        if isinstance(row, Cpu):
            assert row.launch_date <= today


@pytest.mark.parametrize("kind", TABLES)
def test_every_row_names_its_source(kind: str) -> None:
    where = re.compile(r"[a-z0-9\-]+\.(com|org|io|de|es|cz|net|md|csv)\b|MLPerf|\.toml", re.IGNORECASE)
    for row in ALL[kind].values():
        assert row.source.strip(), f"{row.id}: empty source"
        assert where.search(row.source), f"{row.id}: the source names no document or site: {row.source!r}"
        if getattr(row, "price", None) is not None:
            assert row.price.source.strip() and row.price.kind.strip()


# --- unit sanity --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cpu", CPUS.values(), ids=list(CPUS))
def test_cpu_units_are_sane(cpu: Cpu) -> None:
    assert cpu.threads in (cpu.cores, 2 * cpu.cores)
    if cpu.memory_type in ("DDR5", "LPDDR5X"):
        assert cpu.pcie_gen >= 5, "every DDR5/LPDDR5X server CPU has PCIe 5"
    if cpu.memory_type == "DDR4":
        assert cpu.pcie_gen <= 4 and cpu.memory_max_speed_mts <= 3200
    if cpu.memory_type == "DDR5":
        assert 4000 <= cpu.memory_max_speed_mts <= 8800
    assert cpu.boost_ghz is None or cpu.base_ghz <= cpu.boost_ghz <= 6.0
    assert 1.0 <= cpu.tdp_w / cpu.cores * 8 <= 100, "W per 8 cores outside any real part's range"


@pytest.mark.parametrize("nic", NICS.values(), ids=list(NICS))
def test_nic_speeds_are_real_line_rates(nic: Nic) -> None:
    assert nic.gbps_per_port in NIC_SPEEDS_GBPS
    assert nic.pcie_lanes in (8, 16)
    if nic.kind == "infiniband":
        assert nic.rdma


@pytest.mark.parametrize("drive", DRIVES.values(), ids=list(DRIVES))
def test_drive_speed_is_below_its_link(drive: Drive) -> None:
    # about 2 GB/s per PCIe 4.0 lane, doubling each generation: Gen4 x4 = 8 GB/s, Gen5 x4 = 16 GB/s
    ceiling = drive.pcie_lanes * 2.0 * 2 ** (drive.pcie_gen - 4)
    assert drive.seq_read_gbs < ceiling and drive.seq_write_gbs < ceiling
    assert drive.seq_write_gbs <= drive.seq_read_gbs * 1.05
    assert 0.4 <= drive.capacity_tb <= 128


def test_hgx_servers_can_power_their_gpus() -> None:
    boards = [p for p in PLATFORMS.values() if p.nvlink_board and p.gpu_slots == 8 and p.psu_total_w]
    assert len(boards) >= 3, "at least three 8-GPU baseboard servers carry their PSU figures"
    for p in boards:
        # with the spare supplies held back, the PSUs must still carry every GPU at full power
        assert p.psu_usable_w >= p.gpu_slots * p.gpu_max_tdp_w, p.id
        assert p.psu_total_w >= p.gpu_slots * p.gpu_max_tdp_w, p.id


@pytest.mark.parametrize("platform", PLATFORMS.values(), ids=list(PLATFORMS))
def test_platform_facts_agree(platform: Platform) -> None:
    if platform.max_power_w is not None:
        assert platform.max_power_w >= platform.gpu_slots * platform.gpu_max_tdp_w
    if platform.nvlink_board:
        assert set(platform.gpu_form_factors) & {"sxm", "oam", "superchip"}
    if platform.gpu_form_factors == ["pcie"]:
        assert platform.gpu_max_tdp_w <= 600, "no PCIe card draws more than 600 W"
    if platform.memory_max_gb and platform.dimm_slots:
        assert platform.memory_max_gb / platform.dimm_slots <= 256, "DIMMs over 256 GB do not exist"
    if platform.form == "tower":
        assert platform.cpu_sockets == 1


# --- coverage: the server builder must find a platform for every common GPU count -------------------------


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_pcie_platforms_host_1_2_4_and_8_gpus(n: int) -> None:
    # a platform that holds n PCIe GPUs without being much bigger than needed (a 4-GPU box for 1-4 GPUs)
    fits = [p.id for p in PLATFORMS.values()
            if "pcie" in p.gpu_form_factors and n <= p.gpu_slots <= max(4, n) and p.form != "rack-scale"]
    assert fits, f"no PCIe platform for {n} GPUs"


def test_baseboard_platforms_exist_for_8_sxm_8_oam_and_a_rack() -> None:
    sxm8 = [p for p in PLATFORMS.values() if "sxm" in p.gpu_form_factors and p.gpu_slots == 8 and p.nvlink_board]
    oam8 = [p for p in PLATFORMS.values() if "oam" in p.gpu_form_factors and p.gpu_slots == 8 and p.nvlink_board]
    racks = [p for p in PLATFORMS.values() if p.form == "rack-scale"]
    assert len(sxm8) >= 4 and len(oam8) >= 2 and racks
    assert any(p.gpu_max_tdp_w >= 1000 for p in sxm8), "an HGX B200-class (1 kW per GPU) server"
    towers = [p for p in PLATFORMS.values() if p.form == "tower"]
    assert towers and any(p.cpu_vendors == ["amd"] for p in PLATFORMS.values() if p.gpu_slots == 8)


# --- cross-references with the rest of the catalog ----------------------------------------------------------


def test_platform_cpu_ids_exist_and_match_the_vendor() -> None:
    for p in PLATFORMS.values():
        for cpu_id in p.compatible_cpu_ids or []:
            assert cpu_id in CPUS, f"{p.id}: unknown cpu {cpu_id!r}"
            assert CPUS[cpu_id].vendor in p.cpu_vendors, f"{p.id}: {cpu_id} is not {p.cpu_vendors}"
            assert CPUS[cpu_id].max_sockets >= min(p.cpu_sockets, 2)


def _hosts(p: Platform, gpu: Any) -> bool:
    """The platform takes this GPU: form factor, power, card width and any GPU list it names."""
    return (gpu.form_factor in p.gpu_form_factors and gpu.tdp_w <= p.gpu_max_tdp_w
            and (gpu.slot_width is None or p.gpu_max_slot_width is None or gpu.slot_width <= p.gpu_max_slot_width)
            and (p.compatible_gpu_ids is None or gpu.id in p.compatible_gpu_ids))


def test_platform_gpu_ids_exist_and_fit() -> None:
    gpus = load_catalog().gpus.rows
    for p in PLATFORMS.values():
        for gpu_id in p.compatible_gpu_ids or []:
            assert gpu_id in gpus, f"{p.id}: unknown gpu {gpu_id!r}"
            assert _hosts(p, gpus[gpu_id]), f"{p.id}: {gpu_id} ({gpus[gpu_id].form_factor}, " \
                                            f"{gpus[gpu_id].tdp_w} W) does not fit"


def test_every_gpu_has_a_platform() -> None:
    gpus = load_catalog().gpus.rows
    homeless = {g.id for g in gpus.values() if not any(_hosts(p, g) for p in PLATFORMS.values())}
    assert homeless - set(WITHOUT_PLATFORM) == set(), "GPUs no platform can host: add a platform or list them"
    assert set(WITHOUT_PLATFORM) - set(gpus) == set(), "WITHOUT_PLATFORM names GPUs gpus.toml no longer has"


# --- golden spot checks (datasheet values) ---------------------------------------------------------------------


def test_golden_cpus() -> None:
    # AMD EPYC 9654 product page: 96 cores / 192 threads, 2.4 / 3.7 GHz, 360 W, 12 channels DDR5-4800, 128 PCIe 5
    c = CPUS["epyc-9654"]
    assert (c.cores, c.threads, c.tdp_w, c.memory_channels, c.memory_type) == (96, 192, 360, 12, "DDR5")
    assert (c.memory_max_speed_mts, c.pcie_gen, c.pcie_lanes) == (4800, 5, 128)
    assert c.memory_bandwidth_gbs == pytest.approx(460.8)  # 12 x 4800 MT/s x 8 B
    # DGX H100 datasheet: dual Xeon Platinum 8480C, 112 cores total, 2.00 GHz base, 3.80 GHz max boost
    c = CPUS["xeon-platinum-8480c"]
    assert (2 * c.cores, c.base_ghz, c.boost_ghz) == (112, 2.0, 3.8)
    # DGX B200 datasheet: 2x Xeon Platinum 8570, 112 cores total, 2.1 GHz base, 4 GHz max boost
    c = CPUS["xeon-platinum-8570"]
    assert (2 * c.cores, c.base_ghz, c.boost_ghz) == (112, 2.1, 4.0)
    # NVIDIA GB200 NVL72: 36 Grace CPUs = 2,592 Neoverse V2 cores
    assert CPUS["nvidia-grace"].cores * 36 == 2592


def test_golden_platforms() -> None:
    # DGX H100 datasheet: 8x H100, 2x 8480C, 2 TB, ~10.2 kW max, 8U; user guide: six 3.3 kW PSUs, 4+2
    p = PLATFORMS["nvidia-dgx-h100"]
    assert (p.gpu_slots, p.gpu_form_factors, p.compatible_cpu_ids) == (8, ["sxm"], ["xeon-platinum-8480c"])
    assert (p.memory_max_gb, p.max_power_w, p.rack_units) == (2048, 10_200, 8)
    assert (p.psu_total_w, p.psu_redundancy, p.psu_usable_w) == (6 * 3300, "4+2", 13_200)
    assert p.price is not None and p.price_includes_gpus
    # DGX B200 datasheet: ~14.3 kW max, 2x Xeon 8570, up to 4 TB, 10 RU
    p = PLATFORMS["nvidia-dgx-b200"]
    assert (p.max_power_w, p.memory_max_gb, p.rack_units, p.gpu_max_tdp_w) == (14_300, 4096, 10, 1000)
    # GB200 NVL72: 72 GPUs, 36 Grace CPUs, liquid-cooled rack
    p = PLATFORMS["nvidia-gb200-nvl72"]
    assert (p.gpu_slots, p.cpu_sockets, p.cooling, p.form) == (72, 36, "liquid", "rack-scale")
    # ServeTheHome: SYS-821GE-TNHR ships six 3 kW PSUs in 4+2
    assert PLATFORMS["supermicro-sys-821ge-tnhr"].psu_usable_w == 12_000


def test_golden_drives_and_nics() -> None:
    # Samsung PM1743: PCIe 5.0, up to 13,000 MB/s read, 6,600 MB/s write, 2.5M IOPS
    d = DRIVES["samsung-pm1743-15.36tb-u2"]
    assert (d.pcie_gen, d.seq_read_gbs, d.seq_write_gbs, d.random_read_kiops) == (5, 13.0, 6.6, 2500)
    # Micron 9400 PRO: 7,000 MB/s read and write on PCIe 4.0 x4
    d = DRIVES["micron-9400-pro-30.72tb"]
    assert (d.interface, d.seq_read_gbs, d.seq_write_gbs) == ("PCIe 4.0 x4", 7.0, 7.0)
    # ConnectX-7 MCX75310AAS-NEAT: one NDR 400 Gb/s port on PCIe 5.0 x16
    n = NICS["nvidia-connectx-7-ndr"]
    assert (n.model, n.kind, n.total_gbps, n.pcie_gen, n.pcie_lanes) == ("MCX75310AAS-NEAT", "infiniband", 400, 5, 16)
    assert n.host_gbps > n.total_gbps
    # ConnectX-8 SuperNIC: 800 Gb/s (XDR)
    assert NICS["nvidia-connectx-8-supernic"].total_gbps == 800
    # Intel E810-CQDA2: two 100GbE ports sharing 100 Gb/s
    assert NICS["intel-e810-cqda2"].total_gbps == 100


# --- the validators reject impossible rows ------------------------------------------------------------------


def _with(kind: str, row_id: str, **changes: Any) -> dict[str, Any]:
    row = next(r for r in _raw(kind) if r["id"] == row_id)
    return {**row, **changes}


@pytest.mark.parametrize(("kind", "row_id", "changes", "message"), [
    ("cpu", "epyc-9654", {"threads": 288}, "threads"),
    ("cpu", "epyc-9654", {"boost_ghz": 2.0}, "boost_ghz"),
    ("cpu", "epyc-9654", {"memory_channels": None}, "memory_channels"),
    ("cpu", "threadripper-pro-7975wx", {"pcie_lanes_2s": 256}, "2 sockets"),
    ("drive", "micron-9400-pro-7.68tb", {"seq_read_gbs": 12.0}, "exceeds"),
    ("drive", "micron-9400-pro-7.68tb", {"pcie_gen": 5}, "disagrees"),
    ("nic", "nvidia-connectx-7-ndr", {"rdma": False}, "RDMA"),
    ("nic", "intel-e810-cqda2", {"aggregate_gbps": 400}, "aggregate"),
    ("platform", "nvidia-dgx-h100", {"psu_redundancy": "2+4"}, "below max_power_w"),
    ("platform", "nvidia-dgx-h100", {"max_power_w": 4000}, "below the GPUs"),
    ("platform", "nvidia-gb200-nvl72", {"rack_units": 48}, "rack-scale"),
    ("platform", "nvidia-dgx-h100", {"gpu_max_slot_width": 2}, "PCIe cards"),
    ("platform", "dell-poweredge-r760xa", {"nvlink_board": True}, "baseboard"),
    ("platform", "dell-poweredge-r760xa", {"rack_units": None}, "rack_units"),
])
def test_validators_reject_impossible_rows(kind: str, row_id: str, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TABLES[kind][1].model_validate(_with(kind, row_id, **changes))


def test_the_issue_28_gpus_have_their_platforms() -> None:
    """A tower for the open-air RTX 3090/5090/PRO 6000 Workstation cards, an HGX B300 server, an 8-way MI355X UBB
    server and the GB300 NVL72 rack (issue 28)."""
    gpus = load_catalog().gpus.rows
    for gid, form in [("rtx-3090-24gb", "tower"), ("rtx-5090-32gb", "tower"), ("rtx-pro-6000-ws-96gb", "tower"),
                      ("rtx-pro-6000-maxq-96gb", "tower"), ("b300-288gb", "rackmount"),
                      ("mi355x-288gb", "rackmount"), ("mi350x-288gb", "rackmount"), ("gb300-288gb", "rack-scale")]:
        assert any(_hosts(p, gpus[gid]) and p.form == form for p in PLATFORMS.values()), gid
    assert PLATFORMS["nvidia-gb300-nvl72"].cooling == "liquid" and PLATFORMS["nvidia-gb300-nvl72"].max_power_w


def test_appliances_are_fixed_and_name_what_they_ship() -> None:
    """Issue 28: DGX systems, NVL72 racks and the tinybox are sold as shipped; their shipped drives and NICs are
    catalog rows, and a configurable chassis carries no shipped parts."""
    catalog = load_catalog()
    drives, nics = catalog.drives.rows, catalog.nics.rows
    fixed = {p.id for p in PLATFORMS.values() if p.fixed}
    assert {"nvidia-dgx-a100", "nvidia-dgx-h100", "nvidia-dgx-h200", "nvidia-dgx-b200", "nvidia-gb200-nvl72",
            "nvidia-gb300-nvl72", "tinycorp-tinybox-green"} <= fixed
    for p in PLATFORMS.values():
        if not p.fixed:
            assert p.shipped_ram_gb is None and p.shipped_drives is None and p.shipped_nics is None, p.id
            continue
        assert p.shipped_ram_gb and p.compatible_cpu_ids and len(p.compatible_cpu_ids) == 1, p.id
        assert all(s.id in drives for s in p.shipped_drives or []), p.id
        assert all(s.id in nics for s in p.shipped_nics or []), p.id
    for pid in ("nvidia-dgx-h100", "nvidia-dgx-h200", "nvidia-dgx-b200"):  # the datasheets' 2 TB, 8 + 2 NICs, 8 drives
        p = PLATFORMS[pid]
        assert p.shipped_ram_gb == 2048 and p.shipped_nics and p.shipped_nics[0].count == 8
        assert p.shipped_drives and p.shipped_drives[0].count == 8


def test_a_shipped_part_on_a_configurable_chassis_is_refused() -> None:
    row = PLATFORMS["dell-poweredge-xe9680"].model_dump()
    with pytest.raises(ValueError, match="for fixed appliances"):
        Platform.model_validate({**row, "shipped_ram_gb": 2048})
    with pytest.raises(ValueError, match="needs shipped_ram_gb"):
        Platform.model_validate({**PLATFORMS["nvidia-dgx-h100"].model_dump(), "shipped_ram_gb": None})
