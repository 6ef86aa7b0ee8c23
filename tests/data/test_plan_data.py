"""Hygiene of the data the plan prices and explains with: cloud prices, exchange rates, host support."""

from __future__ import annotations

import datetime

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import load_fx, load_host_support
from gpuplan.schema.hardware import Generation

TODAY = datetime.date.today()


def test_cloud_on_demand_medians_rank_hopper_over_ampere_over_geforce() -> None:
    from gpuplan.api import _median_rent

    rent = _median_rent()
    assert rent["h100-sxm-80gb"] > rent["a100-sxm-80gb"] > rent["rtx-4090-24gb"]


def test_cloud_prices_are_per_gpu_hour_and_plausible() -> None:
    """Per GPU-hour, not per 8-GPU instance: between 1e-5 and 1e-3 of the GPU's purchase price per hour (an H100
    at $30k: $0.30-$30)."""
    from gpuplan.catalog.prices import load_prices

    gpus = builtin_catalog().gpus.rows
    fx = load_fx()
    for row in load_prices().cloud:
        price = gpus[row.gpu_id].price
        if price is not None:
            usd = row.price_per_gpu_hour / fx[row.currency]
            assert price.usd * 1e-5 < usd < price.usd * 1e-3, (row.gpu_id, row.provider)


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
