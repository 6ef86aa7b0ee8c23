"""Catalog rows for the parts of a server around the GPUs: CPUs, platforms (chassis), drives and NICs.

Units are in the field names; every row has `id`, `aliases`, `source` and `as_of` (see `CatalogRow`). A field
that is `None` means the cited source does not give the figure: the row says so rather than guess. Validators
reject rows whose facts cannot all be true at once (a PCIe 4.0 x4 drive reading 12 GB/s, a PSU set that cannot
carry the system's own maximum draw, an InfiniBand card without RDMA).
"""

import datetime
import functools
import re
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from gpuplan.schema.hardware import ID_PATTERN, CatalogRow, DataRow, FormFactor, Price

CpuVendor = Literal["intel", "amd", "nvidia", "ampere"]
CpuSegment = Literal["server", "workstation"]
HostMemoryType = Literal["DDR4", "DDR5", "LPDDR5X"]
PlatformForm = Literal["rackmount", "tower", "rack-scale"]
PlatformCooling = Literal["air", "liquid", "hybrid"]
DriveVendor = Literal["samsung", "micron", "solidigm", "intel", "kioxia", "western-digital"]
DriveForm = Literal["U.2", "U.3", "E1.S", "E3.S", "M.2"]
NicVendor = Literal["nvidia", "broadcom", "intel", "amd"]
NicKind = Literal["infiniband", "ethernet"]

#: usable bandwidth of one PCIe lane, one direction, GB/s (after line encoding), by generation
PCIE_LANE_GBS: dict[int, float] = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
INTERFACE_PATTERN = r"^PCIe ([3-6])\.0 x(1|2|4|8|16)$"
REDUNDANCY_PATTERN = r"^([0-9]+)\+([0-9]+)$"


class Cpu(CatalogRow):
    """A server or workstation CPU; every figure is per socket."""

    vendor: CpuVendor
    #: product family and code name, e.g. "EPYC 9004 Genoa", "Xeon 5th gen Emerald Rapids", "Grace"
    family: str = Field(min_length=1)
    segment: CpuSegment = "server"
    launch_date: datetime.date
    cores: int = Field(gt=0, le=512)
    #: hardware threads: cores (no SMT) or 2 x cores
    threads: int = Field(gt=0, le=1024)
    base_ghz: float = Field(gt=0, le=6)
    #: maximum single-core boost; None where the vendor gives no boost clock
    boost_ghz: float | None = Field(None, gt=0, le=7)
    #: default TDP (the vendor's nominal figure, not the cTDP ceiling)
    tdp_w: int = Field(gt=0, le=1000)
    pcie_gen: int = Field(ge=3, le=6)
    #: PCIe lanes one socket gives the platform (the datasheet figure for a 1-socket system)
    pcie_lanes: int = Field(gt=0, le=256)
    #: usable lanes of a 2-socket system; on AMD EPYC less than 2 x `pcie_lanes` because some lanes become
    #: socket-to-socket links (up to 160 on EPYC 9004/9005). None: not stated, or a 1-socket part
    pcie_lanes_2s: int | None = Field(None, gt=0, le=512)
    memory_type: HostMemoryType
    #: DIMM channels; None for soldered LPDDR5X where the vendor gives no channel count
    memory_channels: int | None = Field(None, gt=0, le=16)
    #: fastest supported memory at 1 DIMM per channel, MT/s
    memory_max_speed_mts: int | None = Field(None, gt=0, le=12_000)
    #: largest memory one socket supports, GB (only recorded where it is a fixed, documented figure)
    memory_max_gb: int | None = Field(None, gt=0)
    #: largest supported socket count (Intel Xeon Platinum 8400 parts scale to 8)
    max_sockets: Literal[1, 2, 4, 8]
    price: Price | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Cpu":
        if self.threads not in (self.cores, 2 * self.cores):
            raise ValueError(f"threads {self.threads} must equal cores ({self.cores}) or twice that")
        if self.boost_ghz is not None and self.boost_ghz < self.base_ghz:
            raise ValueError(f"boost_ghz {self.boost_ghz} is below base_ghz {self.base_ghz}")
        if self.memory_type in ("DDR4", "DDR5") and (self.memory_channels is None
                                                      or self.memory_max_speed_mts is None):
            raise ValueError(f"a {self.memory_type} CPU needs memory_channels and memory_max_speed_mts")
        if self.pcie_lanes_2s is not None:
            if self.max_sockets < 2:
                raise ValueError("pcie_lanes_2s is for CPUs that support 2 sockets")
            if not self.pcie_lanes <= self.pcie_lanes_2s <= 2 * self.pcie_lanes:
                raise ValueError(f"pcie_lanes_2s {self.pcie_lanes_2s} must lie between pcie_lanes "
                                 f"({self.pcie_lanes}) and twice that")
        return self

    @property
    def memory_bandwidth_gbs(self) -> float | None:
        """Peak DRAM bandwidth of one socket, GB/s: channels x MT/s x 8 bytes (64-bit channels)."""
        if self.memory_channels is None or self.memory_max_speed_mts is None:
            return None
        return self.memory_channels * self.memory_max_speed_mts * 8 / 1000


class ShippedPart(DataRow):
    """Parts a fixed appliance ships with: a drive or NIC catalog id and how many."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str = Field(pattern=ID_PATTERN)
    count: int = Field(gt=0, le=128)


class Platform(CatalogRow):
    """A GPU server you can buy (chassis, board, power and cooling), from a 1-socket tower to a rack.

    A `fixed` platform is an appliance sold as shipped (DGX, NVL72 racks, tinybox): its CPU (the one
    `compatible_cpu_ids` entry), RAM (`shipped_ram_gb`), drives (`shipped_drives`) and NICs (`shipped_nics`) are
    the vendor's, and the server builder takes them as they are and judges them against the balance rules with a
    note; a configurable chassis (the default) is filled part by part by the rules."""

    #: maker, lowercase ("dell", "supermicro", "nvidia", "asus", "tinycorp")
    vendor: str = Field(pattern=r"^[a-z][a-z0-9\-]*$")
    form: PlatformForm
    #: height in rack units; None for a rack-scale system (the rack is the unit) or a tower with no rack kit
    rack_units: int | None = Field(None, ge=1, le=52)
    cooling: PlatformCooling
    #: most GPUs the platform holds
    gpu_slots: int = Field(gt=0, le=72)
    gpu_form_factors: list[FormFactor] = Field(min_length=1)
    #: highest per-GPU power the platform can feed and cool
    gpu_max_tdp_w: int = Field(gt=0, le=2000)
    #: widest PCIe card, in slots (2 = double-width); None for SXM/OAM boards or when the source does not say
    gpu_max_slot_width: float | None = Field(None, gt=0, le=4)
    #: the GPUs sit on a baseboard with an all-to-all fabric (HGX/NVSwitch, AMD UBB Infinity Fabric, Gaudi RoCE
    #: mesh, NVL72 NVLink switch trays)
    nvlink_board: bool
    #: gpu catalog ids, for platforms built around specific GPUs (an HGX H100/H200 board); None: any GPU that
    #: fits the form factor, width and power limits
    compatible_gpu_ids: list[str] | None = None
    cpu_sockets: int = Field(gt=0, le=72)
    cpu_vendors: list[CpuVendor] = Field(min_length=1)
    #: cpu catalog ids when the CPU is fixed (DGX systems) or the vendor names the supported parts
    compatible_cpu_ids: list[str] | None = None
    #: DIMM slots (0 where memory is soldered, as LPDDR5X on Grace); None: not stated in the source
    dimm_slots: int | None = Field(None, ge=0, le=128)
    #: most system memory the platform takes, GB; None: not stated in the source
    memory_max_gb: int | None = Field(None, gt=0)
    #: hot-swap NVMe bays for data drives (boot M.2 slots not counted); None: not stated in the source
    nvme_bays: int | None = Field(None, ge=0, le=256)
    #: PCIe x16 slots (or factory-fitted x16 NICs) available for cluster/storage NICs; None: not stated
    nic_slots: int | None = Field(None, ge=0, le=128)
    #: nameplate output of all installed PSUs together
    psu_total_w: int | None = Field(None, gt=0)
    #: "N+M": N supplies carry the load, M are spare
    psu_redundancy: str | None = Field(None, pattern=REDUNDANCY_PATTERN)
    #: the vendor's maximum system power draw
    max_power_w: int | None = Field(None, gt=0)
    #: whole-system price as sold; `price_includes_gpus` says whether the GPUs are in it
    price: Price | None = None
    price_includes_gpus: bool = False
    #: an appliance sold as shipped (issue 28): the parts below are the vendor's, not chosen by the rules
    fixed: bool = False
    #: system memory as shipped, GB (a fixed appliance; None: the rules choose it)
    shipped_ram_gb: int | None = Field(None, gt=0)
    #: data drives as shipped (drives.toml ids; boot drives not counted; None: the rules choose them)
    shipped_drives: list[ShippedPart] | None = None
    #: NICs as shipped (nics.toml ids), the compute NICs first; None: the rules choose them
    shipped_nics: list[ShippedPart] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Platform":
        shipped = (self.shipped_ram_gb, self.shipped_drives, self.shipped_nics)
        if any(x is not None for x in shipped) and not self.fixed:
            raise ValueError("shipped_ram_gb, shipped_drives and shipped_nics are for fixed appliances (fixed = true)")
        if self.fixed and (self.compatible_cpu_ids is None or len(self.compatible_cpu_ids) != 1):
            raise ValueError("a fixed appliance names the one CPU it ships with in compatible_cpu_ids")
        if self.fixed and self.shipped_ram_gb is None:
            raise ValueError("a fixed appliance needs shipped_ram_gb")
        if self.shipped_ram_gb is not None and self.memory_max_gb is not None and \
                self.shipped_ram_gb > self.memory_max_gb:
            raise ValueError(f"shipped_ram_gb {self.shipped_ram_gb} exceeds memory_max_gb {self.memory_max_gb}")
        if len(set(self.gpu_form_factors)) != len(self.gpu_form_factors):
            raise ValueError("gpu_form_factors lists a form factor twice")
        if self.form != "rack-scale" and self.form != "tower" and self.rack_units is None:
            raise ValueError("a rackmount platform needs rack_units")
        if self.form == "rack-scale" and self.rack_units is not None:
            raise ValueError("a rack-scale system has no rack_units (the rack is the unit)")
        if self.gpu_max_slot_width is not None and "pcie" not in self.gpu_form_factors:
            raise ValueError("gpu_max_slot_width is for PCIe cards; this platform takes none")
        if self.nvlink_board and self.gpu_form_factors == ["pcie"]:
            raise ValueError("nvlink_board means an SXM/OAM/superchip baseboard, not PCIe slots")
        for name in ("compatible_gpu_ids", "compatible_cpu_ids"):
            ids = getattr(self, name)
            if ids is not None:
                if not ids or len(set(ids)) != len(ids):
                    raise ValueError(f"{name} must be a non-empty list without repeats")
                bad = [i for i in ids if not re.match(ID_PATTERN, i)]
                if bad:
                    raise ValueError(f"{name}: {bad[0]!r} is not a catalog id")
        if self.psu_redundancy is not None and self.psu_total_w is None:
            raise ValueError("psu_redundancy needs psu_total_w")
        if self.max_power_w is not None:
            if self.max_power_w < self.gpu_slots * self.gpu_max_tdp_w:
                raise ValueError(f"max_power_w {self.max_power_w} is below the GPUs' own "
                                 f"{self.gpu_slots} x {self.gpu_max_tdp_w} W")
            usable = self.psu_usable_w
            if usable is not None and usable < self.max_power_w:
                raise ValueError(f"the PSUs give {usable:.0f} W with redundancy {self.psu_redundancy}, "
                                 f"below max_power_w {self.max_power_w}")
        if self.price_includes_gpus and self.price is None:
            raise ValueError("price_includes_gpus needs a price")
        return self

    @property
    def psu_usable_w(self) -> float | None:
        """Power the PSUs deliver with the spare supplies held back: total x N / (N + M)."""
        return _psu_usable_w(self.psu_total_w, self.psu_redundancy)


@functools.lru_cache(maxsize=256)
def _psu_usable_w(total_w: float | None, redundancy: str | None) -> float | None:
    """Platform.psu_usable_w of these figures (parsed once: the server builder asks on every build)."""
    if total_w is None:
        return None
    if redundancy is None:
        return float(total_w)
    m = re.match(REDUNDANCY_PATTERN, redundancy)
    assert m is not None  # the field pattern guarantees it
    n, spare = int(m.group(1)), int(m.group(2))
    return total_w * n / (n + spare)


class Drive(CatalogRow):
    """An NVMe drive. Throughput figures are the vendor's 'up to' sequential and 4 KiB random rates."""

    vendor: DriveVendor
    model: str = Field(min_length=1)
    #: decimal terabytes, as sold
    capacity_tb: float = Field(gt=0, le=256)
    form: DriveForm
    #: host link as the datasheet names it, e.g. "PCIe 4.0 x4"
    interface: str = Field(pattern=INTERFACE_PATTERN)
    pcie_gen: int = Field(ge=3, le=6)
    seq_read_gbs: float = Field(gt=0)
    seq_write_gbs: float = Field(gt=0)
    #: 4 KiB random read, thousands of IOPS; None: not given for this capacity
    random_read_kiops: float | None = Field(None, gt=0)
    #: drive writes per day over the warranty; None: not stated in the source
    endurance_dwpd: float | None = Field(None, gt=0, le=100)
    price: Price | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Drive":
        m = re.match(INTERFACE_PATTERN, self.interface)
        assert m is not None
        if int(m.group(1)) != self.pcie_gen:
            raise ValueError(f"interface {self.interface!r} disagrees with pcie_gen {self.pcie_gen}")
        ceiling = self.link_gbs
        for name in ("seq_read_gbs", "seq_write_gbs"):
            if getattr(self, name) > ceiling:
                raise ValueError(f"{name} {getattr(self, name)} exceeds what {self.interface} carries "
                                 f"({ceiling:.1f} GB/s): GB/s and Gb/s mixed up?")
        return self

    @property
    def pcie_lanes(self) -> int:
        m = re.match(INTERFACE_PATTERN, self.interface)
        assert m is not None
        return int(m.group(2))

    @property
    def link_gbs(self) -> float:
        """What the host link carries one way, GB/s."""
        return self.pcie_lanes * PCIE_LANE_GBS[self.pcie_gen]


class Nic(CatalogRow):
    """A network card for the cluster (GPU-to-GPU) or storage fabric."""

    vendor: NicVendor
    #: the vendor's part number (OPN) or product name
    model: str = Field(min_length=1)
    #: the protocol the card ships in
    kind: NicKind
    #: NVIDIA VPI: the same card also runs the other protocol (InfiniBand <-> Ethernet)
    vpi: bool = False
    ports: int = Field(gt=0, le=8)
    gbps_per_port: int = Field(gt=0, le=1600)
    #: what the card moves with all ports busy, when less than ports x gbps_per_port; None: no such limit stated
    aggregate_gbps: int | None = Field(None, gt=0)
    pcie_gen: int = Field(ge=3, le=6)
    pcie_lanes: int = Field(gt=0, le=32)
    #: RDMA verbs (InfiniBand, RoCE or iWARP)
    rdma: bool
    #: GPUDirect RDMA (NIC reads/writes GPU memory directly); None: the source does not say
    gpudirect_rdma: bool | None = None
    price: Price | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Nic":
        if self.kind == "infiniband" and not self.rdma:
            raise ValueError("an InfiniBand card does RDMA")
        if self.gpudirect_rdma and not self.rdma:
            raise ValueError("gpudirect_rdma needs rdma")
        if self.aggregate_gbps is not None and self.aggregate_gbps > self.ports * self.gbps_per_port:
            raise ValueError(f"aggregate_gbps {self.aggregate_gbps} exceeds ports x gbps_per_port")
        return self

    @property
    def total_gbps(self) -> int:
        """Network bandwidth of the card, Gb/s."""
        return self.aggregate_gbps or self.ports * self.gbps_per_port

    @property
    def host_gbps(self) -> float:
        """What the PCIe host link carries one way, Gb/s."""
        return self.pcie_lanes * PCIE_LANE_GBS[self.pcie_gen] * 8


__all__ = ["Cpu", "Drive", "Nic", "Platform", "ShippedPart"]
