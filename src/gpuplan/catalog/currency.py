"""One currency per plan: the bundle converted into the plan's currency once, when it is loaded, and the plan's
amounts stated back in US dollars for the JSON keys that say so.

`in_currency` converts every amount a plan computes with (the catalog's purchase prices, the cloud and hosting
quotes, the cost model's money assumptions) with the dated rates of data/fx.toml; a converted quote or assumption
keeps the source's own figure in its `source` line, so the reports can cite it. The core then computes in that one
currency and never sees a rate (issue #26). `usd_figures` fills the plan's `*_usd` fields (`price_usd`,
`rent_usd`, `cost_usd`, the stats' `same_cost_usd` and `cheapest_cost_usd`), which keep their meaning: USD."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

from gpuplan.schema.bundle import Bundle
from gpuplan.schema.catalog import Catalog, Table
from gpuplan.schema.hardware import CatalogRow
from gpuplan.schema.plan import Candidate, PlanResult
from gpuplan.schema.prices import Assumption, CloudPrice, HostingOffer, PriceBook

#: a money assumption's unit: a currency, then what it is per ("USD per kWh")
MONEY_UNIT = re.compile(r"^(?P<currency>[A-Z]{3}) per ")

R = TypeVar("R", bound=CatalogRow)


class Converter:
    """Amounts from any currency of data/fx.toml into `to`."""

    def __init__(self, fx: dict[str, float], to: str) -> None:
        self.fx, self.to = fx, to

    def __call__(self, amount: float, currency: str) -> float:
        return amount if currency == self.to else amount * (self.fx[self.to] / self.fx[currency])


def in_currency(bundle: Bundle, currency: str) -> Bundle:
    """`bundle` with every amount a plan computes with in `currency` (bundle.currency says it is)."""
    if bundle.currency == currency:
        return bundle
    conv = Converter(bundle.fx, currency)
    prices = PriceBook(cloud=[_cloud(p, conv) for p in bundle.prices.cloud],
                       hosting=[_hosting(h, conv) for h in bundle.prices.hosting],
                       assumptions={k: _assumption(a, conv) for k, a in bundle.prices.assumptions.items()},
                       user_files=bundle.prices.user_files, clusters=bundle.prices.clusters)
    note = None
    if currency != "USD":
        when = bundle.fx_as_of.get(currency)
        note = (f"amounts in {currency}: 1 USD = {bundle.fx[currency]:g} {currency} (data/fx.toml"
                + (f", {when}" if when else "") + ")")
    return dataclasses.replace(bundle, catalog=_catalog(bundle.catalog, conv), prices=prices, currency=currency,
                               conversion=note)


def _catalog(catalog: Catalog, conv: Converter) -> Catalog:
    """The catalog with each purchase price's `amount` in the plan's currency (its `usd` as the data gives it)."""
    if conv.to == "USD":  # the catalog's prices are in USD: `Price.value` is already the plan's figure
        return catalog
    return catalog.model_copy(update={name: _table(getattr(catalog, name), conv)
                                      for name in ("gpus", "cpus", "platforms", "drives", "nics")})


def _table(table: Table[R], conv: Converter) -> Table[R]:
    rows = {rid: _priced(r, conv) for rid, r in table.rows.items()}
    return table.model_copy(update={"rows": rows})


def _priced(row: R, conv: Converter) -> R:
    price = getattr(row, "price", None)
    if price is None:
        return row
    return row.model_copy(update={"price": price.model_copy(update={"amount": conv(price.usd, "USD"),
                                                                    "currency": conv.to})})


def _cloud(p: CloudPrice, conv: Converter) -> CloudPrice:
    if p.currency == conv.to:
        return p
    return p.model_copy(update={"price_per_gpu_hour": conv(p.price_per_gpu_hour, p.currency), "currency": conv.to,
                                "source": f"{p.source} (quoted {p.price_per_gpu_hour:,.2f} {p.currency}/GPU-hour)"})


def _hosting(h: HostingOffer, conv: Converter) -> HostingOffer:
    if h.currency == conv.to:
        return h
    return h.model_copy(update={"monthly": conv(h.monthly, h.currency), "setup": conv(h.setup, h.currency),
                                "currency": conv.to, "source": f"quoted {h.monthly:,.0f} {h.currency}/month + "
                                                               f"{h.setup:,.0f} setup; {h.source}"})


def _assumption(a: Assumption, conv: Converter) -> Assumption:
    m = MONEY_UNIT.match(a.unit)
    if m is None or m["currency"] == conv.to:
        return a
    return a.model_copy(update={"value": conv(a.value, m["currency"]), "unit": conv.to + a.unit[3:],
                                "source": f"{a.value:g} {a.unit}; {a.source}"})


def usd_figures(result: PlanResult, per_usd: float) -> PlanResult:
    """`result` (amounts in its currency) with the `*_usd` figures stated in USD: each amount / `per_usd`, the
    currency's units per US dollar."""
    def usd(x: float | None) -> float | None:
        return None if x is None else x / per_usd

    def cand(c: Candidate) -> Candidate:
        return c.model_copy(update={"price_usd": usd(c.price), "rent_usd": usd(c.rent), "cost_usd": usd(c.cost),
                                    "server": c.server.model_copy(update={"price_usd": usd(c.server.price)})})

    cands = [cand(c) for c in result.candidates]
    rec = result.recommendation  # one of the candidates: the same object, converted once
    update: dict[str, Any] = {
        "candidates": cands, "usd_rate": per_usd,
        "recommendation": None if rec is None else next((n for c, n in zip(result.candidates, cands) if c is rec),
                                                        None) or cand(rec),
        "stats": result.stats.model_copy(update={"same_cost_usd": usd(result.stats.same_cost) or 0.0,
                                                  "cheapest_cost_usd": usd(result.stats.cheapest_cost)})}
    return result.model_copy(update=update)


__all__ = ["MONEY_UNIT", "Converter", "in_currency", "usd_figures"]
