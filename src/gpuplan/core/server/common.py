"""What the server builder's modules share: the build under way (reasons, warnings, the first soft shortfall)
and the small text helpers of its reason lines. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplan.schema.hardware import Gpu


@dataclass(slots=True)
class Build:
    """The reasons and warnings of one server under way on one platform.

    With `text` False the build decides the same figures and writes no line (the search's first pass: a step
    formats its reason only `if b.text`, and a soft shortfall is then a short tag in place of its warning)."""

    text: bool = True
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the first soft rule this platform falls short on (a later platform that meets them all is preferred)
    shortfall: str | None = None

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
