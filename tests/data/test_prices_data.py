"""Hygiene of the deployment-comparison data: data/prices.toml (cloud GPU-hour prices, dedicated hosting offers)
and data/tco.toml (cost-model assumptions), read with tomllib and validated with the schema's own models.

Checks bookkeeping (schema, catalog GPU ids, sources, past dates, unique ids), that every GPU the former
rental_prices.toml priced keeps an on-demand price, that discounts point the right way (spot and reserved below
on-demand for the same GPU and provider, 3-year below 1-year), that prices are per GPU-hour and plausible, and that
each assumption is present with a plausible value.
"""

from __future__ import annotations

import datetime as dt
import statistics
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.schema.prices import Assumption, CloudPrice, HostingOffer

DATA = Path(__file__).resolve().parents[2] / "src" / "gpuplan" / "data"
PRICES_RAW = tomllib.loads((DATA / "prices.toml").read_text(encoding="utf-8"))
TCO_RAW = tomllib.loads((DATA / "tco.toml").read_text(encoding="utf-8"))

CLOUD = [CloudPrice.model_validate(r) for r in PRICES_RAW.get("cloud", [])]
HOSTING = [HostingOffer.model_validate(r) for r in PRICES_RAW.get("hosting", [])]
ASSUMPTIONS = [Assumption.model_validate(r) for r in TCO_RAW.get("assumption", [])]
BY_ID = {a.id: a for a in ASSUMPTIONS}

GPUS = builtin_catalog().gpus.rows
TODAY = dt.date.today()
#: a rough EUR -> USD factor for plausibility bounds only (data/fx.toml: 1 EUR = 1.0824 USD, 2024 average)
USD_PER = {"USD": 1.0, "EUR": 1.0824}
HYPERSCALERS = ("AWS", "Azure", "GCP", "Oracle")
#: the GPUs the former data/rental_prices.toml priced (prices.toml replaced it): each keeps an on-demand USD price
FORMERLY_PRICED = {
    "a10-24gb", "a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm-40gb", "a100-sxm-80gb", "a10g-24gb", "a40-48gb",
    "b200-180gb", "h100-nvl-94gb", "h100-pcie-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "l4-24gb", "l40-48gb",
    "l40s-48gb", "rtx-3090-24gb", "rtx-4090-24gb", "rtx-6000-ada-48gb", "rtx-a6000-48gb", "t4-16gb", "v100-sxm2-16gb",
}

#: every assumption tco.toml carries, with the plausible range of its value
RANGES: dict[str, tuple[float, float]] = {
    "pue": (1.0, 2.5),
    "electricity_usd_per_kwh": (0.02, 0.5),
    "electricity_eur_per_kwh": (0.02, 0.6),
    "average_draw_fraction": (0.3, 1.0),
    "depreciation_years": (2.0, 10.0),
    "residual_value_fraction": (0.0, 0.6),
    "colocation_usd_per_kw_month": (20.0, 1000.0),
    "staff_fte_per_server": (0.0, 1.0),
    "staff_usd_per_fte_year": (20_000.0, 400_000.0),
    "spare_fraction_production": (0.0, 0.3),
    "utilization_experiment": (0.01, 0.5),
    "utilization_production": (0.3, 1.0),
    "cloud_storage_usd_per_tb_month": (5.0, 300.0),
    "cloud_egress_usd_per_gb": (0.0, 0.5),
    "cloud_commitment_discount_1y": (0.05, 0.7),
    "cloud_commitment_discount_3y": (0.1, 0.85),
    "shared_capacity_performance_factor": (0.5, 1.0),
    "cluster_interconnect_fraction": (0.0, 0.5),
}
#: inputs of the cost model with no sourced default (tco.toml's header says so); the model counts them as 0
UNSOURCED = {"idle_draw_fraction", "install_fraction", "support_fraction_per_year"}


def _usd(price: float, currency: str) -> float:
    return price * USD_PER[currency]


# -- bookkeeping -----------------------------------------------------------------------------------------------


def test_files_have_schema_version_and_only_known_tables() -> None:
    assert PRICES_RAW["schema_version"] == 1
    assert TCO_RAW["schema_version"] == 1
    assert set(PRICES_RAW) <= {"schema_version", "cloud", "hosting"}
    assert set(TCO_RAW) <= {"schema_version", "assumption"}
    assert len(CLOUD) >= 100 and len(HOSTING) >= 8 and len(ASSUMPTIONS) >= 15


def test_rows_name_catalog_gpus() -> None:
    for row in [*CLOUD, *HOSTING]:
        assert row.gpu_id in GPUS, (row.provider, row.gpu_id)


@pytest.mark.parametrize("rows", [CLOUD, HOSTING, ASSUMPTIONS], ids=["cloud", "hosting", "assumption"])
def test_sources_non_empty_and_dates_past(rows: list) -> None:
    for row in rows:
        assert row.source.strip(), row
        assert dt.date(2014, 1, 1) <= row.as_of <= TODAY, row
        if row.notes is not None:
            assert row.notes.strip(), row


def test_ids_unique() -> None:
    for ids in ([h.id for h in HOSTING], [a.id for a in ASSUMPTIONS]):
        dup = [i for i, n in Counter(ids).items() if n > 1]
        assert not dup, dup
    keys = Counter((c.gpu_id, c.provider, c.kind, c.as_of) for c in CLOUD)
    dup = [k for k, n in keys.items() if n > 1]
    assert not dup, f"two prices for one GPU, provider, kind and date: {dup}"


def test_formerly_priced_gpus_keep_an_on_demand_usd_price() -> None:
    priced = {c.gpu_id for c in CLOUD if c.kind == "on-demand" and c.currency == "USD"}
    assert FORMERLY_PRICED <= priced, FORMERLY_PRICED - priced
    # a row moved to another GPU id says which id it had
    moved = [c for c in CLOUD if c.provider == "Oblivus Cloud" and c.as_of == dt.date(2025, 3, 3)]
    assert [c.gpu_id for c in moved] == ["a100-pcie-80gb"] and moved[0].notes and "a100-pcie-40gb" in moved[0].notes


def test_tiers_follow_the_provider() -> None:
    for c in CLOUD:
        if c.provider.startswith(HYPERSCALERS):
            assert c.tier == "hyperscaler", c.provider
        elif "vast.ai" in c.provider.lower() or "salad" in c.provider.lower():
            assert c.tier == "marketplace", c.provider
        else:
            assert c.tier != "hyperscaler", c.provider


# -- prices --------------------------------------------------------------------------------------------------


def test_cloud_prices_are_per_gpu_hour_and_plausible() -> None:
    """Per GPU-hour, not per 8-GPU instance: between $0.05 and $20, and within 0.001%-0.1% of the GPU's purchase
    price per hour where the catalog has one (an H100 at $30k: $0.30-$30 per hour)."""
    for c in CLOUD:
        usd = _usd(c.price_per_gpu_hour, c.currency)
        assert 0.05 <= usd <= 20.0, c
        price = GPUS[c.gpu_id].price
        if price is not None and c.kind == "on-demand":
            assert price.usd * 1e-5 <= usd <= price.usd * 1e-3, (c, price.usd)


def test_every_kind_is_represented() -> None:
    kinds = Counter(c.kind for c in CLOUD)
    assert kinds["on-demand"] >= 80 and kinds["spot"] >= 10
    assert kinds["reserved-1y"] >= 5 and kinds["reserved-3y"] >= 5
    assert Counter(c.tier for c in CLOUD).keys() == {"hyperscaler", "specialist", "marketplace"}


def _on_demand(c: CloudPrice) -> list[CloudPrice]:
    """The on-demand rows a spot or reserved row is measured against: same GPU and provider, the same date when
    there is one, else the newest."""
    rows = [o for o in CLOUD if o.kind == "on-demand" and o.gpu_id == c.gpu_id and o.provider == c.provider]
    same = [o for o in rows if o.as_of == c.as_of]
    return same or sorted(rows, key=lambda o: o.as_of)[-1:]


def test_reserved_below_on_demand_and_3y_below_1y() -> None:
    reserved = [c for c in CLOUD if c.kind.startswith("reserved")]
    for c in reserved:
        if c.provider.startswith("Qubrid"):  # an annual bare-metal contract: the provider sells no on-demand hour
            continue
        od = _on_demand(c)
        assert od, f"reserved price without an on-demand price to discount: {c}"
        assert all(c.price_per_gpu_hour < o.price_per_gpu_hour for o in od), (c, od)
    by_term: dict[tuple, dict[str, float]] = defaultdict(dict)
    for c in reserved:
        by_term[(c.gpu_id, c.provider, c.as_of)][c.kind] = c.price_per_gpu_hour
    for key, terms in by_term.items():
        if len(terms) == 2:
            assert terms["reserved-3y"] < terms["reserved-1y"], key


def test_spot_below_on_demand() -> None:
    spot = [c for c in CLOUD if c.kind == "spot"]
    compared = 0
    for c in spot:
        od = _on_demand(c)
        assert all(c.price_per_gpu_hour < o.price_per_gpu_hour for o in od), (c, od)
        compared += bool(od)
    assert compared >= len(spot) - 2, "most spot rows must have an on-demand row of the same provider"


def test_reserved_discounts_near_the_commitment_assumptions() -> None:
    """Each dated reserved/on-demand pair of the same date lands within 0-80% off, and their median is near the
    assumed discounts of tco.toml (a sanity link between the two files)."""
    for kind, aid in (("reserved-1y", "cloud_commitment_discount_1y"), ("reserved-3y", "cloud_commitment_discount_3y")):
        offs = []
        for c in CLOUD:
            if c.kind != kind:
                continue
            od = [o for o in _on_demand(c) if o.as_of == c.as_of]
            if od:
                offs.append(1 - c.price_per_gpu_hour / od[0].price_per_gpu_hour)
        assert offs and all(0 < x < 0.8 for x in offs)
        assert abs(statistics.median(offs) - BY_ID[aid].value) < 0.25, (kind, offs)


def test_hosting_offers_plausible() -> None:
    for h in HOSTING:
        assert h.monthly > 0 and h.setup >= 0 and h.gpus >= 1
        per_gpu_hour = _usd(h.monthly, h.currency) / h.gpus / 730
        assert 0.1 <= per_gpu_hour <= 20.0, h
        assert h.setup <= 3 * h.monthly, h
        assert all(i.strip() for i in h.includes), h
        if "annual" in h.id:
            assert h.min_months == 12, h


def test_hosting_covers_the_research_note_offers() -> None:
    ids = {h.id for h in HOSTING}
    assert {"hetzner-gex63", "hetzner-gex131", "ovh-l4-90", "qubrid-8xh200-annual", "qubrid-8xb200-annual"} <= ids
    gex63 = next(h for h in HOSTING if h.id == "hetzner-gex63")
    assert (gex63.currency, gex63.monthly, gex63.setup) == ("EUR", 999.0, 999.0)
    assert gex63.notes and "Max-Q" in gex63.notes  # not exactly the catalog's Server Edition: said in notes
    qubrid = next(h for h in HOSTING if h.id == "qubrid-8xh200-annual")
    assert qubrid.gpus == 8 and qubrid.monthly == pytest.approx(210_240 / 12)


# -- assumptions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aid", sorted(RANGES))
def test_assumption_present_and_plausible(aid: str) -> None:
    assert aid in BY_ID, f"tco.toml lacks {aid}"
    lo, hi = RANGES[aid]
    a = BY_ID[aid]
    assert lo <= a.value <= hi, (aid, a.value)
    assert a.unit.strip()


def test_no_assumption_without_a_range() -> None:
    assert set(BY_ID) <= set(RANGES), set(BY_ID) - set(RANGES)


def test_assumptions_consistent_with_each_other() -> None:
    assert BY_ID["cloud_commitment_discount_3y"].value > BY_ID["cloud_commitment_discount_1y"].value
    assert BY_ID["utilization_production"].value > BY_ID["utilization_experiment"].value
    assert BY_ID["residual_value_fraction"].notes  # an unsourced default must say why


def test_assumptions_cover_the_cost_model_inputs() -> None:
    """Every data id the cost model reads (gpuplan.core.cost.inputs.INPUTS) is in tco.toml, or is one of the inputs the
    file's header lists as unsourced."""
    tco = pytest.importorskip("gpuplan.core.cost.inputs")
    wanted = {data_id for _key, data_id, _neutral in tco.INPUTS if data_id}
    missing = wanted - set(BY_ID) - UNSOURCED
    assert not missing, missing
    header = (DATA / "tco.toml").read_text(encoding="utf-8").split("schema_version")[0]
    for aid in UNSOURCED - set(BY_ID):
        assert aid in header, aid


# -- reserved vs on-demand, billing granularity, managed hosting coverage (issue 13) ---------------------------

#: the mainstream datacenter GPUs every deployment comparison needs a managed-hosting (monthly) price for
MAINSTREAM_HOSTED = {"h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "a100-pcie-80gb", "l40s-48gb", "l4-24gb",
                     "b200-180gb", "mi300x-192gb"}


def test_reserved_at_most_on_demand_for_every_provider_with_both() -> None:
    """The loader's rule as a property of the data: every reserved row of a provider that also lists an on-demand
    price for the GPU (same currency) is at most that price."""
    from gpuplan.catalog.price_rules import on_demand_reference

    pairs = [(c, on_demand_reference(c, CLOUD)) for c in CLOUD if c.kind.startswith("reserved")]
    compared = [(c, od) for c, od in pairs if od is not None]
    assert len({c.provider for c, _ in compared}) >= 8
    for c, od in compared:
        assert c.price_per_gpu_hour <= od.price_per_gpu_hour, (c, od)


def _user_prices(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_user_reserved_above_on_demand_is_rejected_naming_the_row(tmp_path: Path) -> None:
    from gpuplan.catalog.prices import load_prices
    from gpuplan.errors import CatalogError

    path = _user_prices(tmp_path, "quotes.yaml", """
cloud:
  - {gpu_id: h100-sxm-80gb, provider: Acme GPU, kind: on-demand, price_per_gpu_hour: 2.10, source: quote 1,
     as_of: 2026-11-01}
  - {gpu_id: h100-sxm-80gb, provider: Acme GPU, kind: reserved-1y, price_per_gpu_hour: 2.40, source: quote 2,
     as_of: 2026-11-01}
""")
    with pytest.raises(CatalogError) as err:
        load_prices([path])
    msg = str(err.value)
    assert str(path) in msg and "Acme GPU reserved-1y h100-sxm-80gb" in msg
    assert "2.4 USD" in msg and "2.1 USD" in msg and err.value.field == "price_per_gpu_hour"
    # against a built-in on-demand row of the same provider (AWS p4de: 3.43 USD/GPU-h on 2026-11-09)
    path = _user_prices(tmp_path, "aws.csv",
                        "table,gpu_id,provider,kind,price_per_gpu_hour,source,as_of\n"
                        "cloud,a100-sxm-80gb,AWS p4de.24xlarge,reserved-3y,3.90,our AWS quote,2026-11-20\n")
    with pytest.raises(CatalogError,
                       match=r"aws\.csv, row AWS p4de\.24xlarge reserved-3y a100-sxm-80gb.*3\.9 USD.*3\.43"):
        load_prices([path])
    # a reserved price at or below on-demand, and one of a provider without on-demand, load
    ok = _user_prices(tmp_path, "ok.yaml", """
cloud:
  - {gpu_id: h100-sxm-80gb, provider: Acme GPU, kind: on-demand, price_per_gpu_hour: 2.10, source: q, as_of: 2026-11-01}
  - {gpu_id: h100-sxm-80gb, provider: Acme GPU, kind: reserved-1y, price_per_gpu_hour: 2.10, source: q,
     as_of: 2026-11-01}
  - {gpu_id: h100-sxm-80gb, provider: Other GPU, kind: reserved-3y, price_per_gpu_hour: 9.0, source: q,
     as_of: 2026-11-01}
""")
    assert len(load_prices([ok]).cloud) == len(CLOUD) + 3


def test_billing_granularity_is_sourced_and_plausible() -> None:
    billed = [c for c in CLOUD if c.billing_increment_s is not None or c.minimum_billed_hours is not None]
    for c in billed:
        assert c.billing_source and c.billing_source.strip(), c
        assert not c.kind.startswith("reserved"), c  # a commitment bills every hour of its term
        assert c.billing_increment_s in (1, 60, 3600), c
        assert c.minimum_billed_hours is None or c.minimum_billed_hours <= 1, c
    for c in CLOUD:
        if c.billing_source is not None:
            assert c.billing_increment_s is not None, c
    providers = {c.provider.split()[0] for c in billed}
    assert {"AWS", "GCP", "Azure", "RunPod", "Hyperstack", "DigitalOcean", "Scaleway", "Vultr"} <= providers
    aws = next(c for c in billed if c.provider.startswith("AWS p5"))
    assert (aws.billing_increment_s, aws.minimum_billed_hours) == (1, pytest.approx(1 / 60, rel=1e-3))
    for h in HOSTING:
        if h.billing_increment_s is not None:
            assert h.billing_source, h


def test_managed_hosting_covers_the_mainstream_datacenter_gpus() -> None:
    hosted = {h.gpu_id for h in HOSTING}
    assert MAINSTREAM_HOSTED <= hosted, MAINSTREAM_HOSTED - hosted
    assert hosted & {"h100-pcie-80gb", "h100-nvl-94gb"}
    for h in HOSTING:
        if h.gpu_id in MAINSTREAM_HOSTED and h.as_of < dt.date(2026, 1, 1):
            assert h.notes and "stale" in h.notes, h  # an old quote says so
    hot = next(h for h in HOSTING if h.id == "hotaisle-8xmi300x")
    assert hot.monthly == pytest.approx(3.39 * 8 * 730) and hot.notes and "730" in hot.notes
    hgr = {h.id: h for h in HOSTING if h.id.startswith("ovh-hgr-ai-2")}
    assert [hgr[k].min_months for k in ("ovh-hgr-ai-2-monthly", "ovh-hgr-ai-2-12m", "ovh-hgr-ai-2-24m")] == [1, 12, 24]
    assert hgr["ovh-hgr-ai-2-monthly"].setup == 3317.99 and hgr["ovh-hgr-ai-2-12m"].monthly < 4211.99


# -- SkyPilot catalog vms.csv as --prices (issue 13) ---------------------------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "skypilot"


def _sky(path: Path) -> list[CloudPrice]:
    from gpuplan.catalog.prices import load_prices

    book = load_prices([path], gpu_ids=list(GPUS))
    return book.cloud[len(load_prices().cloud):]


def test_skypilot_vms_csv_is_read_per_gpu_hour() -> None:
    rows = {(c.gpu_id, c.kind): c for c in _sky(FIXTURES / "aws" / "vms.csv")}
    assert set(rows) == {("h100-sxm-80gb", "on-demand"), ("h100-sxm-80gb", "spot"), ("a100-sxm-80gb", "on-demand"),
                         ("l4-24gb", "on-demand"), ("l4-24gb", "spot")}  # CPU and Inferentia rows skipped
    h100 = rows[("h100-sxm-80gb", "on-demand")]
    assert h100.price_per_gpu_hour == pytest.approx(55.04 / 8) and h100.provider == "AWS p5.48xlarge"
    assert h100.tier == "hyperscaler" and h100.currency == "USD"
    assert rows[("h100-sxm-80gb", "spot")].price_per_gpu_hour == pytest.approx((20.784 / 8 + 22.1 / 8) / 2, abs=1e-4)
    mtime = dt.date.fromtimestamp((FIXTURES / "aws" / "vms.csv").stat().st_mtime)
    assert h100.as_of == mtime and "2 SkyPilot rows" in (h100.notes or "")
    runpod = {c.provider: c.gpu_id for c in _sky(FIXTURES / "runpod" / "vms.csv")}
    # RunPod's plain A100-80GB is the PCIe card; its SXM part carries the suffix
    assert runpod["RunPod 1x_A100-80GB_SECURE"] == "a100-pcie-80gb"
    assert runpod["RunPod 8x_A100-80GB-SXM_SECURE"] == "a100-sxm-80gb"
    assert runpod["RunPod 1x_H200-SXM_SECURE"] == "h200-sxm-141gb"
    # the instance's GPU count (AcceleratorCount) is the quote's instance shape (issue 28)
    assert h100.instance_gpus == 8
    shapes = {c.provider: c.instance_gpus for c in _sky(FIXTURES / "runpod" / "vms.csv")}
    assert shapes["RunPod 1x_A100-80GB_SECURE"] == 1 and shapes["RunPod 8x_A100-80GB-SXM_SECURE"] == 8


def test_instance_sizes_are_sourced_and_fit_the_provider_name() -> None:
    """Issue 28: a cloud row's instance_gpus says where it comes from (notes), and agrees with a size its provider
    name states ("8x", "1x", "-8g", "-1g")."""
    import re

    from gpuplan.catalog.prices import load_prices

    sized = [p for p in load_prices().cloud if p.instance_gpus is not None]
    assert len(sized) >= 40
    for p in sized:
        assert p.notes and f"instance_gpus {p.instance_gpus}:" in p.notes, p.provider
        stated = re.search(r"(\d+)x\b|-(\d+)g\b", p.provider)
        if stated:
            assert int(stated.group(1) or stated.group(2)) == p.instance_gpus, p.provider


def test_skypilot_mapping_names_catalog_gpus() -> None:
    from gpuplan.catalog.skypilot import ACCELERATORS, CLOUD_ACCELERATORS

    for gid in [*ACCELERATORS.values(), *(g for m in CLOUD_ACCELERATORS.values() for g in m.values())]:
        assert gid in GPUS, gid


def test_skypilot_maps_every_gpu_the_catalog_knows() -> None:
    """Issue 28: a user's SkyPilot price list can price every catalog GPU (B300, GB300, MI355X... were skipped as
    'not in catalog'), and no catalog GPU's SkyPilot name is on the skip list."""
    from gpuplan.catalog.skypilot import ACCELERATORS, NOT_IN_CATALOG

    assert set(GPUS) - set(ACCELERATORS.values()) == set()
    for name in ("B300", "GB300", "MI355X", "MI350X", "GH200"):
        assert name in ACCELERATORS and not NOT_IN_CATALOG.match(name), name


def test_skypilot_errors_name_the_row(tmp_path: Path) -> None:
    from gpuplan.catalog.prices import load_prices
    from gpuplan.errors import CatalogError

    head = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
    (tmp_path / "lambda").mkdir()
    bad = _user_prices(tmp_path / "lambda", "vms.csv", head + "gpu_1x_h100,H10O,1.0,26,200,2.49,us-east-1,,\n")
    with pytest.raises(CatalogError, match=r"vms\.csv, row 2, field AcceleratorName: unknown SkyPilot "
                                           r"AcceleratorName 'H10O'; did you mean 'H100'"):
        load_prices([bad])
    nan = _user_prices(tmp_path, "lambda.csv", head + "gpu_1x_h100,H100,1.0,26,200,nan,us-east-1,,\n")
    with pytest.raises(CatalogError, match="row 2, field Price: must be a finite number"):
        load_prices([nan])
    nowhere = _user_prices(tmp_path, "vms.csv", head + "gpu_1x_h100,H100,1.0,26,200,2.49,us-east-1,,\n")
    with pytest.raises(CatalogError, match="cannot tell which cloud"):
        load_prices([nowhere])
    dated = _user_prices(tmp_path, "lambda-vms.csv", head.rstrip() + ",as_of\n"
                         "gpu_8x_h100_sxm5,H100,8.0,208,1800,23.92,us-east-1,,,2026-07-27\n")
    [row] = _sky(dated)
    assert (row.provider, row.as_of, row.price_per_gpu_hour) == ("Lambda gpu_8x_h100_sxm5", dt.date(2026, 7, 27), 2.99)


#: datacenter GPUs of the catalog with no managed-hosting (monthly dedicated server) row: searched for on
#: providers' public price pages (OVHcloud, Hetzner, Leaseweb, Cherry Servers, Latitude.sh, Hot Aisle, Vultr,
#: Scaleway, Genesis Cloud, TensorWave, Hyperstack, Voltage Park, Intel Tiber AI Cloud, IBM Cloud) on 2026-12-01
#: and not found published; a plan for one of them says "managed: no managed price" next to its other options
#: (deployment.gaps). Adding a row for one of them means taking it out of this set.
NO_MANAGED_PRICE = {
    "a10-24gb", "a100-pcie-40gb", "a100-sxm-40gb", "a10g-24gb", "a30-24gb", "a40-48gb", "gaudi2-96gb",
    "gaudi3-128gb", "gb200-186gb", "h100-nvl-94gb", "h200-nvl-141gb", "l40-48gb", "mi250x-128gb", "mi325x-256gb",
    "t4-16gb", "v100-pcie-32gb", "v100-sxm2-16gb", "v100-sxm2-32gb",
    # issue 28's rows, not searched for on those pages yet (research/hardware.md s10.5 has a Qubrid 8x B300 annual
    # bare-metal offer, 389,400 USD/yr, not entered)
    "b300-288gb", "gb300-288gb", "gh200-96gb", "h20-96gb", "l20-48gb", "mi350x-288gb", "mi355x-288gb",
}


def test_datacenter_gpus_without_a_managed_price_are_the_known_ones() -> None:
    hosted = {h.gpu_id for h in HOSTING}
    missing = {gid for gid, g in GPUS.items() if g.market_class == "datacenter" and gid not in hosted}
    assert missing == NO_MANAGED_PRICE


def test_a_plan_says_no_managed_price_next_to_the_others() -> None:
    """Issue #13: where managed hosting has no price for the GPU, the report says so beside the options it prices."""
    from gpuplan import api
    from gpuplan.catalog.loader import example_path, load_project

    proj, base = load_project(example_path("llama3-8b-qlora"))
    proj = proj.model_copy(update={"constraints": proj.constraints.model_copy(update={"gpus": ["h100-nvl-94gb"]})})
    rec = api.plan(proj, base_dir=base).recommendation
    assert rec is not None and rec.deployment is not None
    assert {d.option for d in rec.deployments} == {"on-prem", "cloud"}
    assert any(g.startswith("managed: no managed price") and "h100-nvl-94gb" in g for g in rec.deployment.gaps)


def test_aws_h200_is_after_the_mid_2025_cut_and_a_hyperscaler_rents_b200() -> None:
    """Issue 28: AWS's p5en (8 x H200) on-demand rate after its June 2025 price reduction, 63.296 USD per instance
    hour (dstack PR #4110, 2026-08-06) = 7.912 per GPU-hour (the data had 10.60 of 2025-03); and a hyperscaler's B200
    on-demand row (OCI BM.GPU.B200.8, ~128 USD per hour, 2026-04-14), an 8-GPU instance."""
    aws = [p for p in CLOUD if p.gpu_id == "h200-sxm-141gb" and p.provider.startswith("AWS") and p.kind == "on-demand"]
    assert [p.price_per_gpu_hour for p in aws] == [pytest.approx(63.296 / 8)]
    assert aws[0].as_of >= dt.date(2026, 1, 1) and aws[0].instance_gpus == 8
    b200 = [p for p in CLOUD if p.gpu_id == "b200-180gb" and p.tier == "hyperscaler" and p.kind == "on-demand"]
    assert b200 and all(p.instance_gpus == 8 for p in b200)
    assert any(p.provider.startswith("Oracle") and p.price_per_gpu_hour == pytest.approx(128 / 8) for p in b200)
