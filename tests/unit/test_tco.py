"""The deployment comparison's arithmetic, on hand-computed scenarios (the arithmetic is written out), and its
invariants."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.core.cost.breakeven import breakeven, breakeven_within, cost_by_month, tie_tolerance, worth
from gpuplan.core.cost.inputs import Assumptions, Config, Usage
from gpuplan.core.cost.tco import choose, compare
from gpuplan.schema.plan import Deployment, GrowthStep
from gpuplan.schema.prices import CloudPrice, HostingOffer

D = datetime.date(2026, 9, 1)
FX = {"USD": 1.0, "EUR": 0.9}


def in_usd(offer: HostingOffer) -> HostingOffer:
    """A quote in the plan's currency, as gpuplan.catalog.currency converts the price book before the core reads it."""
    from gpuplan.catalog.currency import Converter

    to = Converter(FX, "USD")
    return offer.model_copy(update={"monthly": to(offer.monthly, offer.currency), "setup": to(offer.setup,
                                    offer.currency), "currency": "USD"})


def assumptions(**over: float) -> Assumptions:
    values = dict(pue=1.5, electricity_per_kwh=0.10, average_draw_fraction=0.75, idle_draw_fraction=0.25,
                  depreciation_years=4.0, residual_value_fraction=0.10, install_fraction=0.02,
                  support_fraction_per_year=0.06, colocation_per_kw_month=150.0, staff_fte_per_server=0.1,
                  staff_cost_per_fte_year=120_000.0, spare_fraction_production=0.1,
                  cloud_storage_per_tb_month=80.0, utilization=0.5)
    values.update(over)
    return Assumptions(values=values, sources={k: "test" for k in values})


CFG = Config(gpu_id="h100-sxm-80gb", gpus_per_server=8, servers=1, price=300_000.0, power_w=10_000.0)
CLOUD = [CloudPrice(gpu_id="h100-sxm-80gb", provider="A", price_per_gpu_hour=3.0, source="t", as_of=D),
         CloudPrice(gpu_id="h100-sxm-80gb", provider="B", price_per_gpu_hour=5.0, source="t", as_of=D),
         CloudPrice(gpu_id="h100-sxm-80gb", provider="A", kind="reserved-1y", price_per_gpu_hour=2.0, source="t",
                    as_of=D)]
HOST = [HostingOffer(id="host-8x", provider="Host", gpu_id="h100-sxm-80gb", gpus=8, monthly=20_000.0, setup=5_000.0,
                     currency="EUR", min_months=12, includes=["power"], source="t", as_of=D)]


def test_on_prem_experiment_by_hand() -> None:
    use = Usage(horizon_months=24, production=False, serving=False, utilization=0.5, run_hours=100.0)
    dep = {d.option: d for d in compare(CFG, use, [], [], assumptions(), "USD", ["on-prem"])}["on-prem"]
    # upfront: 300,000 x 1.02 install = 306,000
    assert dep.upfront_cost == pytest.approx(306_000)
    # power: 10 kW x (0.25 + (0.75 - 0.25) x 0.5 = 0.5 draw) x 1.5 PUE x 730 h x 0.10 = 547.5 / month
    # colocation 10 kW x 150 = 1,500; support 300,000 x 0.06 / 12 = 1,500; staff 0.1 x 120,000 / 12 = 1,000
    assert dep.running_monthly == pytest.approx(547.5 + 1_500 + 1_500 + 1_000)
    # worth after 24 months: 1 - 0.9 x 24/48 = 0.55 of 300,000 = 165,000 back
    assert dep.residual_value == pytest.approx(165_000)
    assert dep.total_cost == pytest.approx(306_000 + 24 * 4_547.5 - 165_000)
    # runs: 24 months x 730 h x 0.5 busy / 100 h per run = 87.6 runs
    assert dep.cost_per_run == pytest.approx(dep.total_cost / 87.6)


def test_cloud_experiment_pays_only_busy_hours_by_hand() -> None:
    use = Usage(horizon_months=6, production=False, serving=False, utilization=0.25, run_hours=50.0,
                storage_bytes=2e12)
    deps = compare(CFG, use, CLOUD, [], assumptions(), "USD", ["cloud"])
    od = next(d for d in deps if d.provider == "cloud on-demand")
    # median of 3.0 and 5.0 = 4.0 per GPU-hour; 8 GPUs x 6 x 730 x 0.25 = 8,760 GPU... hours: 1,095 h each
    # 4.0 x 8 x 1,095 = 35,040; storage only while the runs hold it: 2 TB x 80 x 1,095 h / 730 = 240 (issue #13:
    # a 3-hour job does not pay the horizon's storage)
    assert od.total_cost == pytest.approx(35_040 + 240)
    assert all(d.provider != "cloud reserved-1y" for d in deps)  # a 1-year term does not fit a 6-month horizon


def test_reserved_cloud_bills_every_hour_by_hand() -> None:
    use = Usage(horizon_months=12, production=True, serving=True, utilization=0.6, tokens_per_s=1000.0)
    res = next(d for d in compare(CFG, use, CLOUD, [], assumptions(), "USD", ["cloud"])
               if d.provider == "cloud reserved-1y")
    # 2.0 x 8 GPUs x 12 x 730 h = 140,160, used or not
    assert res.total_cost == pytest.approx(140_160)
    # tokens: 1,000/s x 3,600 x 730 x 12 x 0.6 busy = 18,921.6 M
    assert res.cost_per_million_tokens == pytest.approx(140_160 / 18_921.6)


def test_managed_hosting_converts_currency_and_honours_the_minimum_term_by_hand() -> None:
    use = Usage(horizon_months=6, production=False, serving=False, utilization=0.5)
    dep = compare(CFG, use, [], [in_usd(h) for h in HOST], assumptions(), "USD", ["managed"])[0]
    # 20,000 EUR/month = 20,000 / 0.9 USD; 12-month minimum over a 6-month horizon: 5,000/0.9 + 12 x 20,000/0.9
    assert dep.total_cost == pytest.approx(5_000 / 0.9 + 12 * 20_000 / 0.9)
    assert any("minimum commitment" in a for a in dep.assumptions)


def test_a_quote_in_another_currency_is_refused_unconverted() -> None:
    # the core computes in one currency: the price book is converted before it (gpuplan.catalog.currency)
    use = Usage(horizon_months=6, production=False, serving=False, utilization=0.5)
    with pytest.raises(ValueError, match="EUR quote in a USD comparison"):
        compare(CFG, use, [], HOST, assumptions(), "USD", ["managed"])


def test_production_adds_spare_servers() -> None:
    use = dict(horizon_months=36, serving=True, utilization=0.7)
    exp = compare(CFG, Usage(production=False, **use), [], [], assumptions(), "USD", ["on-prem"])[0]
    prod = compare(CFG, Usage(production=True, **use), [], [], assumptions(), "USD", ["on-prem"])[0]
    assert prod.upfront_cost == pytest.approx(exp.upfront_cost * 1.1)


def test_breakeven_by_hand() -> None:
    use = Usage(horizon_months=36, production=True, serving=True, utilization=0.7)
    deps = compare(CFG, use, CLOUD, [], assumptions(), "USD", ["on-prem", "cloud"])
    own = next(d for d in deps if d.option == "on-prem")
    cloud = min((d for d in deps if d.option == "cloud"), key=lambda d: d.total_cost)  # compared with the cheapest
    # on-prem catches up where its cost by month (upfront + running x m, less what the servers would fetch at m:
    # straight-line to the residual fraction) meets the cloud's, to a tenth of a month (issue #13: a break-even
    # that agrees with the totals, which count the resale at the horizon)
    a = assumptions()
    m = own.breakeven_months_vs["cloud"]
    assert m is not None and 0 < m <= 36
    assert cost_by_month(own, m, 36, a) <= cost_by_month(cloud, m, 36, a)
    assert cost_by_month(own, m - 0.1, 36, a) > cost_by_month(cloud, m - 0.1, 36, a)
    assert cost_by_month(own, 36, 36, a) == pytest.approx(own.total_cost)  # the curve ends at the total
    assert own.total_cost < cloud.total_cost
    assert cloud.breakeven_months_vs["on-prem"] is None  # dearer at the horizon: never cheaper for good


def _scan(a_dep: Deployment, b_dep: Deployment, horizon: int, a: Assumptions) -> float | None:
    """breakeven_within with resale, as defined: the tenth after the last one at which a_dep costs more (by more
    than the tie tolerance: equal costs do not turn on rounding)."""
    eps = tie_tolerance(a_dep, b_dep, horizon)

    def dearer(m: float) -> bool:
        return cost_by_month(a_dep, m, horizon, a) - cost_by_month(b_dep, m, horizon, a) > eps

    if dearer(horizon):
        return None
    late = [k for k in range(horizon * 10 + 1) if dearer(k / 10)]
    return (late[-1] + 1) / 10 if late else 0.0


def _dep(upfront: float, running: float, residual: float) -> Deployment:
    return Deployment(option="on-prem", provider="p", monthly_cost=0.0, total_cost=0.0, upfront_cost=upfront,
                      running_monthly=running, residual_value=residual, currency="USD")


money = st.floats(0, 1e7, allow_subnormal=False)


@settings(max_examples=1000, deadline=None)
@given(a=st.tuples(money, st.floats(0, 1e6), money), b=st.tuples(money, st.floats(0, 1e6), money),
       horizon=st.integers(1, 120), years=st.floats(0.5, 10), floor=st.floats(0.01, 0.9), resale_b=st.booleans())
def test_the_breakeven_with_resale_is_the_scan_of_the_cost_curves(a: tuple[float, float, float],
                                                                  b: tuple[float, float, float], horizon: int,
                                                                  years: float, floor: float,
                                                                  resale_b: bool) -> None:
    """breakeven_within solves for the crossing in closed form; it must give the scan's month exactly, crossings,
    parallel curves and curves that meet on the depreciation floor included (a floor above 0: resale at the
    horizon is that fraction of the price, so a residual value with a floor of 0 past the depreciation cannot
    arise)."""
    asm = assumptions(depreciation_years=years, residual_value_fraction=floor)
    own = _dep(a[0], a[1], max(a[2], 1.0))
    other = _dep(b[0], b[1], b[2] if resale_b else 0.0)
    for x, y in ((own, other), (other, own)):
        assert breakeven_within(x, y, horizon, asm) == _scan(x, y, horizon, asm)


def test_the_breakeven_with_resale_by_hand() -> None:
    """Own: 100,000 upfront, 1,000 a month, 20,000 back at the 36-month horizon on a 4-year straight line to 10 %
    (worth 1 - 0.9 m / 48, 0.325 at 36); rent: 4,000 a month. By month m own has cost 100,000 + 1,000 m - 20,000
    (1 - 0.01875 m) / 0.325 = 38,461.5 + 2,153.8 m, rent 4,000 m: they meet at m = 20.83, so owning is the cheaper
    from 20.9 on (at 20.8 it still costs 83,261.5 against 83,200)."""
    asm = assumptions()
    own, rent = _dep(100_000.0, 1_000.0, 20_000.0), _dep(0.0, 4_000.0, 0.0)
    assert breakeven_within(own, rent, 36, asm) == 20.9
    assert breakeven_within(rent, own, 36, asm) is None


@settings(max_examples=60, deadline=None)
@given(months=st.integers(1, 120), util=st.floats(0.01, 1.0), price=st.floats(1e3, 1e7), power=st.floats(100, 2e5),
       production=st.booleans(), serving=st.booleans())
def test_costs_never_negative_and_grow_with_the_horizon(months: int, util: float, price: float, power: float,
                                                        production: bool, serving: bool) -> None:
    cfg = Config(gpu_id="h100-sxm-80gb", gpus_per_server=8, servers=1, price=price, power_w=power)
    opts = ["on-prem", "managed", "cloud"]

    def totals(m: int) -> dict[str, float]:
        use = Usage(horizon_months=m, production=production, serving=serving, utilization=util,
                    run_hours=None if serving else 10.0, tokens_per_s=100.0 if serving else None)
        return {d.provider: d.total_cost for d in compare(cfg, use, CLOUD, [in_usd(h) for h in HOST], assumptions(),
                                                          "USD", opts)}

    now, later = totals(months), totals(months + 12)
    assert all(v >= 0 for v in now.values())
    for provider, v in now.items():
        if provider in later:
            assert later[provider] >= v - 1e-6


MONEY = st.one_of(st.just(0.0), st.floats(1e-2, 1e6))  # no sub-cent amounts: they only test float rounding


@settings(max_examples=60, deadline=None)
@given(u1=MONEY, r1=MONEY, u2=MONEY, r2=MONEY)
def test_breakeven_is_where_the_cost_curves_cross(u1: float, r1: float, u2: float, r2: float) -> None:
    from gpuplan.schema.plan import Deployment

    a = Deployment(option="on-prem", provider="a", monthly_cost=1, total_cost=1, upfront_cost=u1, running_monthly=r1,
                   currency="USD")
    b = Deployment(option="cloud", provider="b", monthly_cost=1, total_cost=1, upfront_cost=u2, running_monthly=r2,
                   currency="USD")
    m = breakeven(a, b)
    if m is None:  # a is never cheaper for good: it runs at least as dear, and is not cheaper on both counts
        assert r1 >= r2 and (u1 > u2 or r1 > r2)
    elif m == 0:
        assert u1 <= u2 and r1 <= r2
    else:
        assert u1 + r1 * m == pytest.approx(u2 + r2 * m, rel=1e-9, abs=1e-6)
        assert u1 + r1 * (m + 1) < u2 + r2 * (m + 1) or m > 1e9


def test_breakeven_utilization_by_hand() -> None:
    use = Usage(horizon_months=36, production=False, serving=False, utilization=0.3, run_hours=10.0)
    deps = compare(CFG, use, CLOUD, [], assumptions(), "USD", ["on-prem", "cloud"])
    own = next(d for d in deps if d.option == "on-prem")
    # on demand: median 4.0/GPU-hour; all the time for 36 months: 4.0 x 8 x 730 x 36 = 840,960
    assert own.breakeven_utilization == pytest.approx(own.total_cost / 840_960)


def test_a_run_is_billed_as_the_providers_bill_it() -> None:
    """Issue #13: rentals are billed as providers bill (an increment and a minimum per run, data/prices.toml)."""
    from gpuplan.core.cost.tco import billed_hours
    from gpuplan.schema.prices import CloudPrice

    def row(inc: int | None, minimum: float | None) -> CloudPrice:
        return CloudPrice(gpu_id="h100-sxm-80gb", provider="p", price_per_gpu_hour=2.0, source="test",
                          as_of="2026-11-01", billing_increment_s=inc, minimum_billed_hours=minimum)

    assert billed_hours(0.25, [row(None, None)]) == (0.25, None)  # unknown billing: the exact time
    hours, why = billed_hours(0.25, [row(3600, 1.0), row(60, None)])  # the coarsest: whole hours, 1 h minimum
    assert hours == 1.0 and why is not None and "3,600 s" in why
    assert billed_hours(0.2505, [row(60, None)])[0] == pytest.approx(16 / 60)  # 15.03 min -> 16 min
    assert billed_hours(2.0, [row(60, 1.0)])[0] == pytest.approx(2.0)  # already whole minutes, above the minimum


@settings(max_examples=200, deadline=None)
@given(price=st.floats(1e3, 1e7), scale=st.sampled_from([1.0, 0.9239, 1 / 0.9239, 1.1]), months=st.integers(1, 60))
def test_a_tie_at_the_start_does_not_turn_on_rounding(price: float, scale: float, months: int) -> None:
    """Bought with no install cost and resold at once, hardware has cost nothing at month 0; cloud neither. Which
    of them is cheaper "from the start" must not depend on the last bit of the price (the same plan in euros and in
    dollars once said "from the start" and "from month 0.1" in turn)."""
    asm = assumptions()
    capex = price * scale
    worth = max(0.1, 1 - 0.9 * months / 48)
    own = _dep(capex, 1_000.0, capex * worth)
    cloud = _dep(0.0, 50_000.0, 0.0)
    assert breakeven_within(cloud, own, months, asm) in (None, 0.0)
    if breakeven_within(cloud, own, months, asm) is not None:
        assert _scan(cloud, own, months, asm) == 0.0


@settings(max_examples=500, deadline=None)
@given(a=st.tuples(money, st.floats(0, 1e6), money), b=st.tuples(money, st.floats(0, 1e6), money),
       horizon=st.integers(2, 120), years=st.floats(0.5, 10), floor=st.floats(0.01, 0.9),
       steps=st.lists(st.tuples(st.floats(0, 1), money, st.floats(0, 1e6), money), min_size=1, max_size=3),
       on_b=st.booleans())
def test_the_breakeven_with_growth_steps_is_the_scan_of_the_cost_curves(
        a: tuple[float, float, float], b: tuple[float, float, float], horizon: int, years: float, floor: float,
        steps: list[tuple[float, float, float, float]], on_b: bool) -> None:
    """Servers added inside the horizon (issue #27's costed growth) make the cost curve step at their month, with a
    depreciation of their own: the closed form must still give the scan's month, and the curve end at the total."""
    asm = assumptions(depreciation_years=years, residual_value_fraction=floor)
    grown = []
    for frac, up, run, res in steps:
        month = min(int(frac * horizon), horizon - 1)
        left = horizon - month
        residual = res * worth(left, asm) if res else 0.0
        grown.append(GrowthStep(month=month, servers=1, upfront_cost=up, running_monthly=run, residual_value=residual,
                                total_cost=up + run * left - residual))
    own = _dep(a[0], a[1], max(a[2], 1.0))
    other = _dep(b[0], b[1], b[2])
    total = own.upfront_cost + own.running_monthly * horizon - own.residual_value + sum(s.total_cost for s in grown)
    own = own.model_copy(update={"growth": grown, "total_cost": total})
    if on_b:
        own, other = other, own
    for x, y in ((own, other), (other, own)):
        assert breakeven_within(x, y, horizon, asm) == _scan(x, y, horizon, asm)
    with_steps = own if own.growth else other
    assert cost_by_month(with_steps, horizon, horizon, asm) == pytest.approx(with_steps.total_cost, rel=1e-9, abs=1e-6)


def test_each_cloud_cost_says_its_price_group() -> None:
    """Issue 28: the on-demand median of every provider class against a reserved median of hyperscalers only is not
    a like-for-like comparison: each cloud option names its group (commitment, provider classes and counts), and a
    reserved median above the all-provider on-demand median says the groups are not alike."""
    rows = [CloudPrice(gpu_id="h100-sxm-80gb", provider="Hyper", tier="hyperscaler", price_per_gpu_hour=6.0,
                       source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Hyper", tier="hyperscaler", kind="reserved-1y",
                       price_per_gpu_hour=4.5, source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Neo", price_per_gpu_hour=2.5, source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Vast", tier="marketplace", price_per_gpu_hour=2.0,
                       source="t", as_of=D)]
    use = Usage(horizon_months=12, production=True, serving=True, utilization=0.6, tokens_per_s=1000.0)
    deps = {d.provider: d for d in compare(CFG, use, rows, [], assumptions(), "USD", ["cloud"])}
    assert deps["cloud on-demand"].price_group == "on-demand: 1 hyperscaler, 1 GPU cloud, 1 marketplace"
    reserved = deps["cloud reserved-1y"]
    assert reserved.price_group == "reserved-1y: 1 hyperscaler"
    # 4.5 reserved against the 2.5 median of all three on demand, and against the same provider's 6.0
    assert any("not alike" in a for a in reserved.assumptions)
    assert any("same provider(s) on demand: 6.00" in a and "saves 25%" in a for a in reserved.assumptions)
    # a like-for-like group says nothing more
    alike = compare(CFG, use, CLOUD, [], assumptions(), "USD", ["cloud"])
    assert not any("not alike" in a for d in alike for a in d.assumptions)


def _shaped(provider: str, usd: float, gpus: int | None) -> CloudPrice:
    return CloudPrice(gpu_id="h100-sxm-80gb", provider=provider, price_per_gpu_hour=usd, source="t", as_of=D,
                      instance_gpus=gpus)


SHAPED = [_shaped("One-GPU VM", 9.0, 1), _shaped("Eight-GPU server", 4.0, 8), _shaped("Unsized", 3.0, None)]
TRAIN = Usage(horizon_months=12, production=False, serving=False, utilization=0.5)


def test_a_server_is_priced_only_from_instances_that_hold_it() -> None:
    """Issue 28: an 8-GPU server is not priced from 1-GPU VMs: the 1-GPU quote is left out of the median (and said
    to be), the 8-GPU and the unsized quotes stay; a 1-GPU configuration takes all three."""
    eight = next(d for d in compare(CFG, TRAIN, SHAPED, [], assumptions(), "USD", ["cloud"]))
    assert eight.providers == ["Eight-GPU server", "Unsized"] and eight.price_per_gpu_hour == pytest.approx(3.5)
    line = next(a for a in eight.assumptions if a.startswith("instance shape"))
    assert "left out 1 quote(s) for smaller instances (One-GPU VM: 1 GPU(s))" in line
    assert "1 of 2 quote(s) used state no instance size" in line
    one = CFG.model_copy(update={"gpus_per_server": 1, "price": 40_000.0})
    single = next(d for d in compare(one, TRAIN, SHAPED, [], assumptions(), "USD", ["cloud"]))
    assert single.providers == ["Eight-GPU server", "One-GPU VM", "Unsized"]
    assert single.price_per_gpu_hour == pytest.approx(4.0)


def test_a_serving_replica_needs_only_its_own_gpus_on_one_machine() -> None:
    """Serving replicas of tp x pp GPUs (here 1) can run on separate instances: `together` says how many GPUs must
    share a machine, and 1-GPU quotes then price an 8-GPU serving server."""
    cfg = CFG.model_copy(update={"together": 1})
    serve = Usage(horizon_months=12, production=True, serving=True, utilization=0.6, tokens_per_s=1000.0)
    dep = next(d for d in compare(cfg, serve, SHAPED, [], assumptions(), "USD", ["cloud"]))
    assert dep.providers == ["Eight-GPU server", "One-GPU VM", "Unsized"]


def test_no_cloud_option_when_every_quote_is_for_a_smaller_instance() -> None:
    from gpuplan.core.cost.tco import shape_gap

    small = [_shaped("One-GPU VM", 9.0, 1), _shaped("Two-GPU VM", 8.0, 2)]
    assert not compare(CFG, TRAIN, small, [], assumptions(), "USD", ["cloud"])
    gap = shape_gap("h100-sxm-80gb", 8, small)
    assert gap is not None and "at most 2 GPU(s), fewer than the 8" in gap
    assert shape_gap("h100-sxm-80gb", 2, small) is None and shape_gap("h100-sxm-80gb", 8, SHAPED) is None


def test_a_reservation_is_compared_like_for_like_with_its_own_class_on_demand() -> None:
    """Issue 28: a hyperscaler reservation (4.5) set against the all-provider on-demand median (2.5, GPU clouds and
    marketplaces in it) looks dearer than renting on demand; like for like, against hyperscalers on demand (median
    of 6.0 and 7.0 = 6.5), it saves 31%. The comparison names the class; a reservation dearer than its own class on
    demand says so, and the choice says when its cloud options come from different classes."""
    rows = [CloudPrice(gpu_id="h100-sxm-80gb", provider="Hyper A", tier="hyperscaler", price_per_gpu_hour=6.0,
                       source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Hyper B", tier="hyperscaler", price_per_gpu_hour=7.0,
                       source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Hyper A", tier="hyperscaler", kind="reserved-1y",
                       price_per_gpu_hour=4.5, source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Neo", price_per_gpu_hour=2.5, source="t", as_of=D),
            CloudPrice(gpu_id="h100-sxm-80gb", provider="Vast", tier="marketplace", price_per_gpu_hour=2.0,
                       source="t", as_of=D)]
    use = Usage(horizon_months=12, production=True, serving=True, utilization=0.6, tokens_per_s=1000.0)
    deps = compare(CFG, use, rows, [], assumptions(), "USD", ["cloud"])
    reserved = next(d for d in deps if d.provider == "cloud reserved-1y")
    line = next(a for a in reserved.assumptions if a.startswith("like for like:"))
    assert line == ("like for like: hyperscaler on demand, median 6.50 USD/GPU-hour of 2 price(s); the reserved-1y "
                    "commitment saves 31%")
    chosen = choose(deps, use)
    assert chosen is not None and any("different provider classes" in r for r in chosen.reasons)
    # a reservation dearer than its own class on demand is said to cost more, not hidden in a median
    dear = [r if r.kind != "reserved-1y" else r.model_copy(update={"price_per_gpu_hour": 7.15}) for r in rows]
    reserved = next(d for d in compare(CFG, use, dear, [], assumptions(), "USD", ["cloud"])
                    if d.provider == "cloud reserved-1y")
    assert any(a.endswith("the reserved-1y commitment costs 10% more") for a in reserved.assumptions)
    # one class throughout: nothing to point out
    alike = [r for r in rows if r.tier == "hyperscaler"]
    deps = compare(CFG, use, alike, [], assumptions(), "USD", ["cloud"])
    chosen = choose(deps, use)
    assert chosen is not None and not any("different provider classes" in r for r in chosen.reasons)
