"""Hygiene of the data the plan prices and explains with: rental prices, exchange rates, host support."""

from __future__ import annotations

import datetime

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import load_fx, load_host_support, load_rental_prices
from gpuplan.schema.hardware import Generation

TODAY = datetime.date.today()


def test_rental_prices_name_catalog_gpus_with_sources_and_past_dates() -> None:
    gpus = builtin_catalog().gpus.rows
    prices = load_rental_prices()
    assert len(prices) >= 20
    for gid, rows in prices.items():
        assert gid in gpus, gid
        for row in rows:
            assert row.source and row.provider
            assert datetime.date(2020, 1, 1) <= row.as_of <= TODAY


def test_rental_prices_are_per_gpu_hour_and_plausible() -> None:
    """Per GPU-hour, not per 8-GPU instance: no datacenter GPU rents for less than a tenth of a cent per dollar
    of its purchase price per hour, nor more than 0.1% of it (an H100 at $30k: $0.03-$30 per hour)."""
    gpus = builtin_catalog().gpus.rows
    for gid, rows in load_rental_prices().items():
        price = gpus[gid].price
        if price is None:
            continue
        for row in rows:
            assert price.usd * 1e-5 < row.usd_per_gpu_hour < price.usd * 1e-3, (gid, row.provider)


def test_hopper_rents_for_more_than_ampere() -> None:
    prices = load_rental_prices()

    def median(gid: str) -> float:
        vals = sorted(p.usd_per_gpu_hour for p in prices[gid])
        return vals[len(vals) // 2]

    assert median("h100-sxm-80gb") > median("a100-sxm-80gb") > median("rtx-4090-24gb")


def test_fx_has_every_budget_currency() -> None:
    from typing import get_args

    from gpuplan.schema.project import Currency

    fx = load_fx()
    assert set(get_args(Currency)) <= set(fx)
    assert fx["USD"] == 1.0
    assert 0.7 < fx["EUR"] < 1.2  # a euro has been worth 0.83-1.43 USD since its launch


def test_host_support_covers_every_generation() -> None:
    from typing import get_args

    toolkits, needs = load_host_support()
    assert set(get_args(Generation)) == set(toolkits)
    assert {"nvswitch", "multi_node", "production"} <= set(needs)
    assert "12.8" in toolkits["blackwell"]  # first CUDA release with Blackwell support
