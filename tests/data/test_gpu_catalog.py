"""Hygiene of the built-in GPU catalog (src/gpuplan/data/gpus.toml), read through the real loader.

Checks coverage (the GPU families a buyer asks about), bookkeeping (unique ids, unambiguous aliases, dates,
sources), the units conventions the file's header states (dense throughput, FP32-accumulate tensor rates, GiB
that fit inside the decimal GB), a few datasheet values, and that a bad or overriding row in a user's catalog file
is reported the way gpuplan promises (file, row and field; `origins[id].overrides_builtin`).
"""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import pytest

from gpuplan.catalog.hardware import load_catalog
from gpuplan.errors import CatalogError
from gpuplan.schema.hardware import Gpu

DATA_FILE = Path(__file__).resolve().parents[2] / "src" / "gpuplan" / "data" / "gpus.toml"
CATALOG = load_catalog()
GPUS: dict[str, Gpu] = CATALOG.gpus.rows
ROWS = list(GPUS.values())
IDS = [g.id for g in ROWS]

EARLIEST = dt.date(2015, 1, 1)
TODAY = dt.date.today()

#: one id per family the catalog must cover (NVIDIA datacenter, workstation, consumer, AMD Instinct, Intel Gaudi)
REQUIRED_IDS = {
    # NVIDIA Volta / Turing / Ampere datacenter
    "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-32gb", "t4-16gb", "a10-24gb", "a10g-24gb", "a30-24gb",
    "a40-48gb", "a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm-40gb", "a100-sxm-80gb",
    # Ada datacenter
    "l4-24gb", "l40-48gb", "l40s-48gb", "l20-48gb",
    # Hopper
    "h100-pcie-80gb", "h100-sxm-80gb", "h100-nvl-94gb", "h200-sxm-141gb", "h200-nvl-141gb", "h20-96gb", "gh200-96gb",
    # Blackwell datacenter, Blackwell Ultra (issue 28)
    "b200-180gb", "gb200-186gb", "b300-288gb", "gb300-288gb",
    # workstation
    "rtx-a6000-48gb", "rtx-6000-ada-48gb", "rtx-pro-6000-server-96gb", "rtx-pro-6000-ws-96gb", "rtx-pro-6000-maxq-96gb",
    # consumer
    "rtx-3090-24gb", "rtx-4090-24gb", "rtx-5090-32gb",
    # AMD Instinct (CDNA 4: issue 28), Intel Gaudi
    "mi355x-288gb", "mi350x-288gb",
    "mi250x-128gb", "mi300x-192gb", "mi325x-256gb", "gaudi2-96gb", "gaudi3-128gb",
}

#: the rows that existed before the hardware catalog, with the memory other tests depend on
LEGACY_MEMORY_GIB = {
    "h100-sxm-80gb": 79.6, "h100-pcie-80gb": 79.6, "h200-sxm-141gb": 139.8, "a100-sxm-80gb": 79.2,
    "a100-sxm-40gb": 39.4, "l40s-48gb": 44.5, "a10g-24gb": 22.0, "v100-sxm2-16gb": 15.8, "rtx-4090-24gb": 23.6,
    "l4-24gb": 22.0,
}

#: plausible dense ceiling: no shipping part reaches 2.3 dense BF16/FP16 tensor TFLOPS per watt (B200: 2.25);
#: a sparse figure entered by mistake doubles the ratio (B200 4.5, H100 PCIe 4.3, L4 3.4)
DENSE_TFLOPS_PER_WATT = 3.0

#: each halving of precision at most doubles the tensor rate (FP8 vs BF16, INT8 vs FP16, FP4 vs FP8); 2.03 allows
#: the L40S datasheet's own pair, 733 / 362.05 = 2.025
HALVING_RATIO = 2.03

NVIDIA_DATACENTER_AMPERE_PLUS = ("ampere", "ada", "hopper", "blackwell")

#: Blackwell Ultra's NVFP4 runs at about 3x its FP8 rate (GB300 NVL72: 1.1 EFLOPS dense FP4 vs 360 PFLOPS FP8 per
#: 72 GPUs), not 2x: the one exception to the halving rule, held to that 3x
BLACKWELL_ULTRA_FP4_RATIO = 3.1


def _tensor16(g: Gpu) -> float:
    return g.tflops.bf16 or g.tflops.fp16


# --- coverage and bookkeeping ---------------------------------------------------------------------------------------


def test_catalog_is_large_enough():
    assert len(ROWS) >= 30


def test_every_family_is_covered():
    missing = REQUIRED_IDS - set(IDS)
    assert not missing, f"gpus.toml lacks {sorted(missing)}"


def test_vendors_and_classes_are_all_present():
    assert {g.vendor for g in ROWS} == {"nvidia", "amd", "intel"}
    assert {g.market_class for g in ROWS} == {"datacenter", "workstation", "consumer"}


@pytest.mark.parametrize("gpu_id, gib", sorted(LEGACY_MEMORY_GIB.items()))
def test_legacy_rows_keep_their_memory(gpu_id, gib):
    assert GPUS[gpu_id].memory_gib == gib


def test_legacy_aliases_are_kept():
    expected = {
        "h100": "h100-sxm-80gb", "h100-sxm": "h100-sxm-80gb", "h100-pcie": "h100-pcie-80gb", "h200": "h200-sxm-141gb",
        "a100": "a100-sxm-80gb", "a100-80gb": "a100-sxm-80gb", "a100-40gb": "a100-sxm-40gb", "l40s": "l40s-48gb",
        "a10g": "a10g-24gb", "v100": "v100-sxm2-16gb", "4090": "rtx-4090-24gb", "l4": "l4-24gb",
    }
    for alias, gpu_id in expected.items():
        assert CATALOG.gpus.find(alias, ["gpu"]).id == gpu_id


def test_ids_are_unique():
    raw = [row["id"] for row in tomllib.loads(DATA_FILE.read_text(encoding="utf-8"))["gpu"]]
    assert len(raw) == len(set(raw)) == len(ROWS)


def test_every_name_resolves_to_exactly_one_row():
    owners: dict[str, set[str]] = {}
    for g in ROWS:
        for name in (g.id, *g.aliases):
            owners.setdefault(name.lower(), set()).add(g.id)
    ambiguous = {name: ids for name, ids in owners.items() if len(ids) > 1}
    assert not ambiguous
    for g in ROWS:
        for name in (g.id, *g.aliases):
            assert CATALOG.gpus.find(name, ["gpu"]).id == g.id, name
            assert CATALOG.gpus.find(name.upper(), ["gpu"]).id == g.id, name


@pytest.mark.parametrize("gpu_id", IDS)
def test_dates_are_plausible(gpu_id):
    g = GPUS[gpu_id]
    assert EARLIEST <= g.as_of <= TODAY
    assert EARLIEST <= g.launch_date <= TODAY
    if g.price is not None:
        assert EARLIEST <= g.price.as_of <= TODAY


@pytest.mark.parametrize("gpu_id", IDS)
def test_sources_name_a_document(gpu_id):
    g = GPUS[gpu_id]
    assert g.source.strip() and "http" in g.source
    if g.price is not None:
        assert g.price.source.strip() and g.price.kind.strip()
        assert "http" in g.price.source or "Epoch" in g.price.source


# --- units and conventions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu_id", IDS)
def test_allocatable_gib_within_datasheet_capacity(gpu_id):
    """Datasheet "GB" of HBM/GDDR are binary: an 80 GB card shows at most 80 GiB, and never less than 90% of it."""
    g = GPUS[gpu_id]
    assert 0.9 * g.memory_gb <= g.memory_gib <= g.memory_gb


@pytest.mark.parametrize("gpu_id", IDS)
def test_tensor_rates_are_dense(gpu_id):
    g = GPUS[gpu_id]
    t = g.tflops
    for name in ("bf16", "fp16"):
        value = getattr(t, name)
        if value is not None:
            assert value / g.tdp_w < DENSE_TFLOPS_PER_WATT, f"{name} {value} at {g.tdp_w} W looks like a sparse figure"
    if t.fp8 is not None:
        assert t.fp8 <= HALVING_RATIO * _tensor16(g)
    if t.fp4 is not None and "Blackwell Ultra" in g.name:
        assert t.fp8 is not None and t.fp4 <= BLACKWELL_ULTRA_FP4_RATIO * t.fp8
    elif t.fp4 is not None:
        assert t.fp4 <= 2 * HALVING_RATIO * max(_tensor16(g), t.fp16_fp16_accumulate or 0)
        if t.fp8 is not None and t.fp16_fp16_accumulate is None:
            assert t.fp4 <= HALVING_RATIO * t.fp8
    if t.int8 is not None:
        assert t.int8 <= HALVING_RATIO * max(t.fp16, t.fp16_fp16_accumulate or 0)
    if t.tf32 is not None:
        assert t.tf32 <= _tensor16(g)
    assert t.fp32 <= _tensor16(g)


@pytest.mark.parametrize("gpu_id", IDS)
def test_precisions_match_the_generation(gpu_id):
    g = GPUS[gpu_id]
    if g.generation in ("volta", "turing"):  # no BF16, no TF32 tensor cores
        assert g.tflops.bf16 is None and g.tflops.tf32 is None
    else:
        assert g.tflops.bf16 is not None
    if g.generation in ("volta", "turing", "ampere", "cdna2"):  # no FP8 units
        assert g.tflops.fp8 is None
    if g.generation in ("ada", "hopper", "blackwell", "cdna3", "cdna4", "gaudi2", "gaudi3"):
        assert g.tflops.fp8 is not None
    if g.tflops.fp4 is not None:
        assert g.generation in ("blackwell", "cdna4")


@pytest.mark.parametrize("gpu_id", [g.id for g in ROWS if g.market_class == "consumer"])
def test_geforce_rows(gpu_id):
    g = GPUS[gpu_id]
    assert g.tflops.fp16_fp16_accumulate is not None
    assert g.tflops.fp16_fp16_accumulate == pytest.approx(2 * g.tflops.fp16, rel=0.01)
    assert g.tflops.bf16 == g.tflops.fp16
    assert g.ecc is False
    assert g.datacenter_driver_licence is False
    assert g.mig_instances == 0


def test_fp16_accumulate_rate_is_geforce_only():
    assert all(g.tflops.fp16_fp16_accumulate is None for g in ROWS if g.market_class != "consumer")


@pytest.mark.parametrize("gpu_id", [g.id for g in ROWS if g.vendor == "nvidia" and g.market_class == "datacenter"
                                    and g.generation in NVIDIA_DATACENTER_AMPERE_PLUS])
def test_tf32_is_half_bf16_on_nvidia_datacenter_parts(gpu_id):
    g = GPUS[gpu_id]
    assert g.tflops.tf32 is not None
    assert g.tflops.tf32 == pytest.approx(g.tflops.bf16 / 2, rel=0.02)


@pytest.mark.parametrize("gpu_id", IDS)
def test_interconnect_and_form_factor_agree(gpu_id):
    g = GPUS[gpu_id]
    link = g.interconnect
    if link.kind == "none":
        assert link.domain_gpus == 1
    if link.kind == "nvlink-bridge":
        assert g.form_factor == "pcie" and 2 <= link.domain_gpus <= 4
    if link.kind == "nvlink-switch":
        assert g.form_factor in ("sxm", "superchip") and link.domain_gpus >= 8
    if g.form_factor in ("sxm", "oam", "superchip"):
        assert link.kind != "none"
    if g.vendor == "amd":
        assert link.kind == "infinity-fabric"
    if g.vendor == "intel":
        assert link.kind == "roce-on-die"


def test_mig_where_nvidia_has_it():
    for g in ROWS:
        if g.id.startswith(("a100", "h100", "h200", "b200", "gb200")):
            assert g.mig_instances == 7, g.id
    assert GPUS["a30-24gb"].mig_instances == 4
    assert GPUS["l40s-48gb"].mig_instances == 0
    assert all(g.mig_instances == 0 for g in ROWS if g.vendor != "nvidia")


def test_notes_carry_the_known_caveats():
    assert "180 GB" in GPUS["b200-180gb"].notes and "192 GB" in GPUS["b200-180gb"].notes
    assert "pairs" in GPUS["h100-nvl-94gb"].notes
    assert "ASSUMPTION" in GPUS["rtx-5090-32gb"].notes
    assert "Server Edition" in GPUS["rtx-pro-6000-server-96gb"].name


# --- datasheet spot checks ------------------------------------------------------------------------------------------


def test_h100_sxm_datasheet():
    # NVIDIA H100 Tensor Core GPU datasheet: BF16 1,979 TFLOPS with sparsity -> 989 dense; 3.35 TB/s; 700 W
    g = GPUS["h100-sxm-80gb"]
    assert g.tflops.bf16 == pytest.approx(989, rel=0.01)
    assert g.tflops.fp8 == pytest.approx(1979, rel=0.01)
    assert g.memory_bandwidth_gbs == 3350
    assert g.tdp_w == 700
    assert (g.interconnect.kind, g.interconnect.bandwidth_gbs, g.interconnect.domain_gpus) == ("nvlink-switch", 900, 8)


def test_a100_datasheet():
    # NVIDIA A100 Tensor Core GPU datasheet (r4, 2021): BF16 312 | 624 with sparsity, TF32 156, 2,039 GB/s (80GB SXM)
    g = GPUS["a100-sxm-80gb"]
    assert g.tflops.bf16 == 312 and g.tflops.tf32 == 156
    assert g.memory_bandwidth_gbs == 2039


def test_rtx_4090_whitepaper():
    # NVIDIA Ada GPU architecture whitepaper: RTX 4090 FP16 tensor 330.3 (FP16 accumulate), 165.2 (FP32 accumulate)
    g = GPUS["rtx-4090-24gb"]
    assert g.tflops.bf16 == pytest.approx(165.2, abs=0.05)
    assert g.tflops.fp16_fp16_accumulate == pytest.approx(330.3, abs=0.05)


def test_mi300x_datasheet():
    # AMD Instinct MI300X data sheet: FP16/BF16 1,307.4 TFLOPS (2,614.9 with sparsity), 5.3 TB/s, 192 GB HBM3
    g = GPUS["mi300x-192gb"]
    assert g.tflops.bf16 == pytest.approx(1307.4, abs=0.05)
    assert g.memory_bandwidth_gbs == 5300


def test_b200_datasheet():
    # NVIDIA HGX B200 datasheet: FP16/BF16 36 PFLOPS per 8 GPUs with sparsity -> 2,250 dense per GPU; 180 GB usable
    g = GPUS["b200-180gb"]
    assert g.tflops.bf16 == pytest.approx(2250, rel=0.001)
    assert g.interconnect.bandwidth_gbs == 1800
    assert g.memory_gib < 180


# --- user catalog files ---------------------------------------------------------------------------------------------


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None) + " }"
    raise TypeError(value)


def _user_file(path: Path, **rows_by_id: dict) -> Path:
    lines = ["schema_version = 1", ""]
    for row in rows_by_id.values():
        lines.append("[[gpu]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in row.items() if v is not None]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _row(gpu_id: str, **changes) -> dict:
    row = GPUS["h100-sxm-80gb"].model_dump()
    row.update(id=gpu_id, aliases=changes.pop("aliases", []), **changes)
    return row


def test_a_valid_user_row_is_added(tmp_path):
    path = _user_file(tmp_path / "x.toml", mine=_row("my-h100", name="Our H100", aliases=["ours"]))
    catalog = load_catalog([path])
    assert catalog.gpus.find("ours", ["gpu"]).id == "my-h100"
    assert catalog.gpus.origins["my-h100"].file == str(path)
    assert not catalog.gpus.origins["my-h100"].overrides_builtin
    assert len(catalog.gpus.rows) == len(ROWS) + 1


@pytest.mark.parametrize("change, field", [
    ({"tdp_w": -5}, "tdp_w"),
    ({"tflops": {**GPUS["h100-sxm-80gb"].tflops.model_dump(), "bf16": -1.0}}, "tflops.bf16"),
    ({"colour": "green"}, "colour"),
    ({"form_factor": "mxm"}, "form_factor"),
])
def test_a_bad_user_row_names_file_row_and_field(tmp_path, change, field):
    path = _user_file(tmp_path / "x.toml", bad=_row("bad-gpu", **change))
    with pytest.raises(CatalogError) as info:
        load_catalog([path])
    err = info.value
    assert (err.path, err.row, err.field) == (str(path), "bad-gpu", field)
    assert str(path) in str(err) and "bad-gpu" in str(err) and field in str(err)


def test_a_user_alias_that_clashes_is_reported(tmp_path):
    path = _user_file(tmp_path / "x.toml", clash=_row("my-gpu", aliases=["h100"]))
    with pytest.raises(CatalogError) as info:
        load_catalog([path])
    assert info.value.field == "aliases" and "h100" in str(info.value)


def test_a_user_row_overriding_a_builtin_is_reported(tmp_path):
    builtin = GPUS["h100-sxm-80gb"].model_dump()
    builtin["price"] = {"usd": 25000.0, "as_of": dt.date(2026, 1, 15), "source": "our vendor quote Q-1234",
                        "kind": "quote"}
    path = _user_file(tmp_path / "x.toml", h100=builtin)
    catalog = load_catalog([path])
    origin = catalog.gpus.origins["h100-sxm-80gb"]
    assert origin.overrides_builtin and origin.file == str(path)
    assert catalog.gpus.rows["h100-sxm-80gb"].price.usd == 25000
    assert catalog.gpus.overridden() == ["h100-sxm-80gb"]
    assert catalog.gpus.find("h100", ["gpu"]).price.kind == "quote"
    # the built-in catalog is untouched
    assert not load_catalog().gpus.overridden()
    assert load_catalog().gpus.rows["h100-sxm-80gb"].price.usd != 25000


def test_blackwell_ultra_and_cdna4_as_measured():
    """The memory the MLPerf Training v5.1 system descriptions report (nvidia-smi 275,040 MiB on HGX B300, 284,208
    MiB on GB300, rocm-smi 294,912 MiB on MI350X/MI355X), never more than that; the MI355X's 1,400 W and
    liquid cooling."""
    assert GPUS["b300-288gb"].memory_gib <= 275_040 / 1024 and GPUS["b300-288gb"].memory_gib > 265
    assert GPUS["gb300-288gb"].memory_gib <= 284_208 / 1024 and GPUS["gb300-288gb"].memory_gib > 275
    for gid in ("mi355x-288gb", "mi350x-288gb"):
        assert GPUS[gid].memory_gib <= 294_912 / 1024 and GPUS[gid].generation == "cdna4"
    assert GPUS["mi355x-288gb"].tdp_w == 1400 and GPUS["mi355x-288gb"].cooling == "liquid"
    assert GPUS["gb300-288gb"].interconnect.domain_gpus == 72


#: the datacenter and workstation GPUs without a purchase price (issue 28). Each row says why in the data
#: (`no_price`: what was searched, when, what was found); a plan quotes it where it would price buying
#: (core/cost/deployments._gaps, core/server/steps.price_step). Adding a price means taking the id out of this set
#: and the row's `no_price` out of gpus.toml.
UNPRICED = {
    "a10g-24gb", "l40-48gb", "h200-nvl-141gb", "gb200-186gb", "gb300-288gb", "rtx-pro-6000-server-96gb",
    "mi325x-256gb", "mi350x-288gb", "b300-288gb",
}


def test_every_datacenter_and_workstation_gpu_has_a_price_or_a_reasoned_no_price():
    """Issue 28 done-when: every GPU of market class datacenter or workstation has a purchase price (dated, with
    its source and, where added, its condition) or an explicit, reasoned `no_price` in the data; no row has both."""
    for g in ROWS:
        if g.market_class in ("datacenter", "workstation"):
            assert (g.price is None) != (g.no_price is None), g.id
    unpriced = {g.id for g in ROWS if g.market_class in ("datacenter", "workstation") and g.price is None}
    assert unpriced == UNPRICED
    for gid in UNPRICED:  # each reason says what stands in the way, not only that there is no price
        reason = GPUS[gid].no_price or ""
        assert len(reason) > 40 and any(w in reason for w in ("searched", "sold", "not sold")), gid
    for gid in ("l4-24gb", "l40s-48gb", "rtx-pro-6000-ws-96gb", "rtx-pro-6000-maxq-96gb", "h20-96gb", "l20-48gb",
                "mi355x-288gb"):
        price = GPUS[gid].price
        assert price is not None and price.condition == "new" and price.as_of >= dt.date(2025, 1, 1), gid
    # an analyst's estimate says it is one (HSBC's MI355 ASP, 2025-09-09), not a list or street price
    mi355x = GPUS["mi355x-288gb"].price
    assert mi355x is not None and mi355x.usd == 23_000 and "analyst estimate" in mi355x.kind


def test_a_row_with_a_price_and_a_no_price_reason_is_refused():
    row = GPUS["l4-24gb"].model_dump()
    row["no_price"] = "no dated public price found anywhere"
    with pytest.raises(ValueError, match="no_price"):
        Gpu.model_validate(row)
