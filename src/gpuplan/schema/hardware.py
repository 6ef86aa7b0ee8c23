"""Catalog rows for hardware: GPUs and accelerators (this module) and server parts (`schema/server.py`).

Every row has `id`, `aliases`, `source` and `as_of`; units are in the field names. Throughput figures are
dense (never "with sparsity") and per GPU. `tflops.bf16`/`tflops.fp16` are the tensor-core rates with FP32
accumulate, the rate mixed-precision training gets; GeForce cards run those at half their FP16-accumulate
rate, which `tflops.fp16_fp16_accumulate` records where the datasheet gives it.
"""

import datetime
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Vendor = Literal["nvidia", "amd", "intel"]
MarketClass = Literal["datacenter", "workstation", "consumer"]
FormFactor = Literal["sxm", "oam", "pcie", "superchip"]
Cooling = Literal["passive", "blower", "open-air", "liquid"]
#: architecture generation: drives the efficiency priors of the speed model (data/speed.toml)
Generation = Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4",
                     "gaudi2", "gaudi3"]
LinkKind = Literal["nvlink-switch", "nvlink-bridge", "infinity-fabric", "roce-on-die", "none"]
MemoryType = Literal["HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR6", "GDDR6X", "GDDR7", "LPDDR5X"]

ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"
#: the currencies a budget, a quote or a plan may be in (data/fx.toml has each one's rate)
Currency = Literal["USD", "EUR"]


class DataRow(BaseModel):
    """A row of a data file (catalog, prices): a field that holds a number refuses true/false, which YAML reads
    from yes, no, on and off (pydantic would take `tdp_w: yes` as 1)."""

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, data: Any) -> Any:
        if isinstance(data, dict):
            no_bool = _NO_BOOL.get(cls)
            if no_bool is None:
                no_bool = _NO_BOOL[cls] = frozenset(k for k, f in cls.model_fields.items()
                                                    if not _takes_bool(f.annotation))
            for key, value in data.items():
                if isinstance(value, bool) and key in no_bool:
                    raise ValueError(f"{key}: must be a number or text, not {str(value).lower()} (YAML reads yes, "
                                     "no, on and off as booleans)")
        return data


#: each row class's fields that do not take a boolean (DataRow's check reads them once per class)
_NO_BOOL: dict[type, frozenset[str]] = {}


def _takes_bool(annotation: Any) -> bool:
    return annotation is bool or bool in typing.get_args(annotation)


class CatalogRow(DataRow):
    """Fields every catalog row has."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    #: where the facts come from: datasheet title and URL, or the quote's issuer
    source: str = Field(min_length=1)
    #: date of the source (a datasheet's revision, a quote's date); never in the future
    as_of: datetime.date
    notes: str | None = None


class Tflops(DataRow):
    """Dense peak throughput in TFLOPS (TOPS for int8). None: the chip has no such unit."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    fp32: float = Field(gt=0)
    tf32: float | None = Field(None, gt=0)
    bf16: float | None = Field(None, gt=0)
    fp16: float = Field(gt=0)
    fp8: float | None = Field(None, gt=0)
    int8: float | None = Field(None, gt=0)
    fp4: float | None = Field(None, gt=0)
    #: GeForce only: FP16 tensor rate with FP16 accumulate (twice `fp16`), not used for training
    fp16_fp16_accumulate: float | None = Field(None, gt=0)


class Interconnect(DataRow):
    """How GPUs talk: the scale-up link (NVLink, Infinity Fabric) and the PCIe host link."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kind: LinkKind
    #: total bidirectional GPU-to-GPU bandwidth per GPU over the scale-up link, GB/s (0 when none)
    bandwidth_gbs: float = Field(ge=0)
    #: GPUs that reach each other at that bandwidth (8 on an HGX board, 72 in an NVL72 rack, 2 bridged)
    domain_gpus: int = Field(ge=1)
    pcie_gen: int = Field(ge=3, le=6)
    pcie_lanes: int = Field(16, ge=1, le=16)

    @model_validator(mode="after")
    def _none_is_zero(self) -> "Interconnect":
        if (self.kind == "none") != (self.bandwidth_gbs == 0):
            raise ValueError("kind 'none' goes with bandwidth_gbs = 0, and only it")
        return self


class Price(DataRow):
    """A reference purchase price per GPU, with its date and source."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    usd: float = Field(gt=0)
    as_of: datetime.date
    source: str = Field(min_length=1)
    #: what the figure is: list price, street price, 8-GPU system price / 8 ...
    kind: str = Field(min_length=1)
    #: whether the price is for a new card or a used/refurbished one (None: the source does not say; issue 28)
    condition: Literal["new", "used", "refurbished"] | None = None
    #: the price in `currency`: set when gpuplan converts the catalog into a plan's currency
    #: (gpuplan.catalog.currency); a data file leaves both out, and the price is then `usd`, in USD
    amount: float | None = Field(None, gt=0)
    currency: Currency = "USD"

    @property
    def value(self) -> float:
        """What a plan computes with: `amount` (in `currency`), else `usd`."""
        return self.usd if self.amount is None else self.amount


class Gpu(CatalogRow):
    """A GPU or accelerator."""

    vendor: Vendor
    generation: Generation
    market_class: MarketClass
    launch_date: datetime.date
    #: memory the software can allocate, GiB (2^30 B); `memory_gb` is the datasheet's figure (HBM "GB" are
    #: usually GiB on the device: A100 80GB shows 81,920 MiB)
    memory_gib: float = Field(gt=0, le=1024)
    memory_gb: float = Field(gt=0, le=1100)
    memory_type: MemoryType
    memory_bandwidth_gbs: float = Field(gt=0)
    tflops: Tflops
    tdp_w: float = Field(gt=0, le=2000)
    #: `tdp_w` is the whole module's, its own CPU included (the GH200 superchip: Grace + Hopper + memory); a server
    #: built around it counts no separate CPU power (issue 28)
    tdp_includes_cpu: bool = False
    form_factor: FormFactor
    #: PCIe slot width (1, 2, 3, 3.5...); SXM/OAM modules: None
    slot_width: float | None = Field(None, gt=0, le=4)
    cooling: Cooling
    interconnect: Interconnect
    ecc: bool
    #: MIG instances (0: no MIG)
    mig_instances: int = Field(0, ge=0, le=7)
    #: the driver licence allows datacenter deployment (GeForce: no)
    datacenter_driver_licence: bool
    price: Price | None = None
    #: why the row has no purchase price (issue 28): what was searched, when, and what was found; a plan quotes it
    #: where it would price buying. A row has a `price` or, if it is a datacenter or workstation part, this
    no_price: str | None = Field(None, min_length=10, max_length=1000)
    #: set by `gpuplan calibrate`: the row's throughput was measured on the user's own machine (what, where, when);
    #: a plan then calls its speed "measured here" (core/search/evidence.py)
    measured_here: str | None = Field(None, min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _consistent(self) -> "Gpu":
        # datasheets' "80 GB" HBM is 80 GiB on the device (nvidia-smi: 81,920 MiB), so only the number is bounded
        if self.memory_gib > self.memory_gb:
            raise ValueError(f"memory_gib {self.memory_gib} exceeds the datasheet's memory_gb {self.memory_gb}")
        if self.form_factor in ("sxm", "oam", "superchip") and self.slot_width is not None:
            raise ValueError(f"slot_width is for PCIe cards, not {self.form_factor} modules")
        if self.form_factor == "pcie" and self.slot_width is None:
            raise ValueError("a PCIe card needs slot_width")
        if self.market_class == "consumer" and self.datacenter_driver_licence:
            raise ValueError("GeForce (consumer) drivers are not licensed for datacenter deployment")
        if self.price is not None and self.no_price is not None:
            raise ValueError("a row with a price has no no_price reason: drop one of them")
        return self


__all__ = ["CatalogRow", "Cooling", "Currency", "FormFactor", "Generation", "Gpu", "Interconnect", "LinkKind",
           "MarketClass", "MemoryType", "Price", "Tflops", "Vendor"]
