"""What the server builder's modules share: what a server must carry as the search states it (`Needs`), the build
under way (reasons, warnings, the first soft shortfall) and the small text helpers of its reason lines. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuplan.units import fmt_money

if TYPE_CHECKING:
    from gpuplan.schema.hardware import Gpu


@dataclass(frozen=True, slots=True)
class Needs:
    """`ServerNeeds` (schema/plan.py) as the search states it for every server it prices: the same fields, in the
    same order, with the same defaults, as a plain record. The search makes one per server shape it keeps, and
    the builder reads some twenty of its fields per server: a pydantic model's validation and attribute reads were
    a few per cent of the search. The builder takes either (tests/unit/test_server_builder.py holds the two to the
    same fields and the same servers)."""

    gpu_id: str
    gpus_per_server: int
    servers: int
    modality: str
    purpose: str
    dataset_bytes: float
    checkpoint_bytes: float
    weights_bytes: float
    offload_bytes: float = 0.0
    data_read_bytes_per_s: float = 0.0
    tensor_parallel: int = 1
    multi_node: bool = False
    serving: bool = False


@dataclass(slots=True)
class Build:
    """The reasons and warnings of one server under way on one platform.

    With `text` False the build decides the same figures and writes no line (the search's first pass: a step
    formats its reason only `if b.text`, and a soft shortfall is then a short tag in place of its warning)."""

    text: bool = True
    #: the currency of the catalog's prices (the plan's: the bundle is converted into it), which the reasons state
    currency: str = "USD"
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the first soft rule this platform falls short on (a later platform that meets them all is preferred)
    shortfall: str | None = None

    def money(self, amount: float) -> str:
        """An amount of the catalog's prices, as the reasons state it."""
        return fmt_money(amount, self.currency)

    def short(self, warning: str) -> None:
        if self.text:
            self.warnings.append(warning)
        self.shortfall = self.shortfall or warning


def fmt(x: float) -> str:
    """A whole number with thousands separators (GB, W, BTU/h and Gb/s figures of the reasons)."""
    return f"{x:,.0f}"


def ordinal(k: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(k, f"{k}th")


def traits(g: Gpu) -> str:
    """What decides which platforms take a GPU: "SXM, 700 W", "PCIe, 350 W, 2-slot, open-air"."""
    out = f"{g.form_factor}, {g.tdp_w:g} W"
    if g.slot_width is not None:
        out += f", {g.slot_width:g}-slot"
    return out + (f", {g.cooling}" if g.cooling in ("open-air", "liquid") else "")
