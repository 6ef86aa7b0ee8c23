"""Cloud price groups (issue 28): a median's commitment and provider classes, and a reserved price compared like
for like (the same provider, the same provider classes on demand). Pure."""

from __future__ import annotations

import statistics

from gpuplan.schema.prices import CloudPrice

TIER_NAMES = {"hyperscaler": "hyperscaler", "specialist": "GPU cloud", "marketplace": "marketplace"}


def price_group(kind: str, rows: list[CloudPrice]) -> str:
    """The price group of a median (issue 28): its commitment and the provider classes of its quotes, with their
    counts, hyperscalers first: "reserved-1y: 2 hyperscaler"."""
    counts = {t: sum(1 for p in rows if p.tier == t) for t in TIER_NAMES}
    return f"{kind}: " + ", ".join(f"{c} {TIER_NAMES[t]}" for t, c in counts.items() if c)


def same_provider_on_demand(kind: str, rate: float, same: list[CloudPrice], currency: str) -> str:
    """A reserved price against the on-demand price of the same provider(s): the discount the commitment buys."""
    if not same:
        return f"{kind}: no on-demand price of the same provider to compare with"
    od = statistics.median(p.price_per_gpu_hour for p in same)
    return (f"the same provider(s) on demand: {od:.2f} {currency}/GPU-hour; the {kind} commitment saves "
            f"{1 - rate / od:.0%}" if od > 0 else f"{kind}: no on-demand price of the same provider")


def same_class_on_demand(kind: str, rate: float, same: list[CloudPrice], classes: set[str], currency: str) -> str:
    """A reserved median against the on-demand median of the same provider classes (issue 28: a hyperscaler
    reservation is compared with hyperscalers on demand, not with a median that mixes in GPU clouds and
    marketplaces): what the commitment saves like for like, or what it costs more."""
    names = " and ".join(TIER_NAMES[t] for t in TIER_NAMES if t in classes)
    if not same:
        return f"like for like: no on-demand price of the same provider class ({names}) to compare the {kind} with"
    od = statistics.median(p.price_per_gpu_hour for p in same)
    change = (f"the {kind} commitment saves {1 - rate / od:.0%}" if rate <= od else
              f"the {kind} commitment costs {rate / od - 1:.0%} more")
    return (f"like for like: {names} on demand, median {od:.2f} {currency}/GPU-hour of {len(same)} price(s); "
            f"{change}")


def classes_of(group: str | None) -> frozenset[str]:
    """The provider classes a price group names ("reserved-1y: 2 hyperscaler, 1 GPU cloud" -> hyperscaler, GPU
    cloud)."""
    counts = (group or "").partition(": ")[2]
    return frozenset(part.split(" ", 1)[1] for part in counts.split(", ") if " " in part)


__all__ = ["TIER_NAMES", "classes_of", "price_group", "same_class_on_demand", "same_provider_on_demand"]
