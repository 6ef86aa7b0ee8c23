"""Consistency rules across price rows, checked when a price list loads (built-in or `--prices FILE`).

A reserved or committed-use price is a discount on the same provider's on-demand price for the same GPU: a
reserved row priced above it is a data error (a per-instance price filed per GPU, a wrong term, a stale on-demand
row), so the loader refuses it, naming the file, the row and both prices.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuplan.errors import CatalogError
from gpuplan.schema.prices import CloudPrice


def on_demand_reference(row: CloudPrice, on_demand: Iterable[CloudPrice]) -> CloudPrice | None:
    """The on-demand row `row` (a spot or reserved price) discounts: same GPU, provider and currency; the one of
    the same date when there is one, else the newest. None when the provider lists no on-demand price."""
    same = [o for o in on_demand if o.kind == "on-demand" and o.gpu_id == row.gpu_id
            and o.provider == row.provider and o.currency == row.currency]
    if not same:
        return None
    dated = [o for o in same if o.as_of == row.as_of]
    return (dated or sorted(same, key=lambda o: o.as_of))[-1]


def check_reserved_below_on_demand(path: str, rows: Sequence[CloudPrice],
                                   known: Sequence[CloudPrice] = ()) -> None:
    """Refuse a reserved row of `rows` (one file) priced above the same provider's on-demand price for the same
    GPU, found in `rows` or in `known` (the rows loaded before this file)."""
    pool = [*known, *rows]
    for row in rows:
        if not row.kind.startswith("reserved"):
            continue
        ref = on_demand_reference(row, pool)
        if ref is not None and row.price_per_gpu_hour > ref.price_per_gpu_hour:
            raise CatalogError(
                path, f"{row.kind} price {row.price_per_gpu_hour:g} {row.currency}/GPU-h for {row.gpu_id} is above "
                f"{row.provider}'s on-demand price {ref.price_per_gpu_hour:g} {ref.currency}/GPU-h (as of "
                f"{ref.as_of}); a reserved or committed price must not exceed the same provider's on-demand price",
                row=f"{row.provider[:80]} {row.kind} {row.gpu_id}",
                field="price_per_gpu_hour")


__all__ = ["check_reserved_below_on_demand", "on_demand_reference"]
