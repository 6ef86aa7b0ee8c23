"""Issue 28: the plan can recommend the December 2026 hardware where it wins. The built-in price lists have no
cloud quote for B300, GB300, MI355X or the RTX PRO 6000 Workstation Edition, so each case brings its own quote in
a user price file (as `--prices` does): a quote below the incumbent's makes the new GPU the choice. The quotes are
test inputs, not data."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan import api
from gpuplan.catalog.loader import example_path, load_project


def _quotes(tmp_path: Path, rows: dict[str, float]) -> Path:
    text = "schema_version = 1\n"
    for gpu_id, usd in rows.items():
        text += (f'\n[[cloud]]\ngpu_id = "{gpu_id}"\nprovider = "Test cloud {gpu_id}"\nkind = "on-demand"\n'
                 f'price_per_gpu_hour = {usd}\ncurrency = "USD"\ntier = "specialist"\nsource = "test quote"\n'
                 "as_of = 2026-11-01\n")
    path = tmp_path / "quotes.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _plan(example: str, gpus: list[str], quotes: Path) -> api.PlanResult:
    proj, base = load_project(example_path(example))
    proj = proj.model_copy(update={"constraints": proj.constraints.model_copy(update={"gpus": gpus})})
    return api.plan(proj, base_dir=base, price_files=[quotes])


@pytest.mark.parametrize("example, gpus, new, quote", [
    # 70B LoRA on 8 GPUs: B300 has B200's peak and 60% more memory; at 3 USD/GPU-h it undercuts the B200 quotes
    ("llama3-70b-lora", ["b200-180gb", "b300-288gb"], "b300-288gb", 3.0),
    # 7B pre-training against a 60-day deadline: a GB300 NVL72 rack at 3 USD/GPU-h beats 64 x H200
    ("llama2-7b-pretrain", ["h200-sxm-141gb", "gb300-288gb"], "gb300-288gb", 3.0),
    # QLoRA on one card: the 96 GB workstation card at 0.5 USD/GPU-h against the RTX 4090 quotes
    ("llama3-8b-qlora", ["rtx-4090-24gb", "rtx-pro-6000-ws-96gb"], "rtx-pro-6000-ws-96gb", 0.5),
])
def test_the_new_gpu_wins_with_a_cheaper_quote(tmp_path: Path, example: str, gpus: list[str], new: str,
                                               quote: float) -> None:
    rec = _plan(example, gpus, _quotes(tmp_path, {new: quote})).recommendation
    assert rec is not None and rec.gpu_id == new
    assert rec.deployment is not None and rec.deployment.option == "cloud"
    cloud = next(d for d in rec.deployments if d.provider == "cloud on-demand")
    assert f"Test cloud {new}" in cloud.providers


def test_mi355x_is_recommended_where_it_is_allowed_and_said_to_be_extrapolated(tmp_path: Path) -> None:
    """MI355X's speed is a prior (data/speed.toml cdna4, not calibrated): alone it is recommended, with its 8-way
    UBB platform; against a calibrated H100 it is shown faster and cheaper but ranked after it, and says why."""
    quotes = _quotes(tmp_path, {"mi355x-288gb": 1.5})
    alone = _plan("llama3-8b-full-finetune", ["mi355x-288gb"], quotes).recommendation
    assert alone is not None and alone.gpu_id == "mi355x-288gb" and alone.gpus_per_server == 8
    assert alone.server is not None and alone.server.platform_id == "gigabyte-g893-zx1-aax4"
    both = _plan("llama3-8b-full-finetune", ["h100-sxm-80gb", "mi355x-288gb"], quotes)
    mi = next(c for c in both.candidates if c.gpu_id == "mi355x-288gb")
    h100 = next(c for c in both.candidates if c.gpu_id == "h100-sxm-80gb")
    assert mi.time_hours is not None and h100.time_hours is not None and mi.time_hours < h100.time_hours
    assert mi.evidence is not None and mi.evidence.speed == "extrapolated"
    assert any("extrapolated" in r for r in mi.reasons)


@pytest.mark.parametrize("example, many", [("llama3-8b-qlora", False), ("llama2-7b-pretrain", False),
                                           ("llama3-8b-qlora", True)])
def test_every_stale_quote_a_cost_rests_on_has_its_age_line(tmp_path: Path, example: str, many: bool) -> None:
    """Issue 28: no price row older than six months without an age line in the plan: every quote a rented option's
    median is taken over that is older than six months on the plan's date is named, with its date, in that
    option's warnings (none cut off)."""
    import datetime as dt

    from gpuplan.catalog.prices import STALE_DAYS, load_prices

    files: list[Path] = []
    if many:  # twenty old quotes of the recommended GPU: each is named, the line is not cut off
        text = "schema_version = 1\n" + "".join(
            f'\n[[cloud]]\ngpu_id = "h100-nvl-94gb"\nprovider = "Old reseller number {k:02d}"\nkind = "on-demand"\n'
            f'price_per_gpu_hour = {3 + k / 10}\ncurrency = "USD"\nsource = "test quote"\n'
            f'as_of = 2025-0{1 + k % 5}-01\n'
            for k in range(20))
        (tmp_path / "old.toml").write_text(text, encoding="utf-8")
        files.append(tmp_path / "old.toml")
    book = load_prices(files)
    result = api.plan(example_path(example), top=50, price_files=files)
    as_of = dt.date.fromisoformat(str(result.as_of))
    seen = 0
    for c in result.candidates:
        for d in c.deployments:
            if d.option != "cloud":
                continue
            kind = d.provider.removeprefix("cloud ")
            rows = [p for p in book.cloud if p.gpu_id == c.gpu_id and p.kind == kind and p.provider in d.providers]
            for p in rows:
                if (as_of - p.as_of).days > STALE_DAYS:
                    seen += 1
                    assert any(f"{p.provider} ({p.as_of})" in w for w in d.warnings
                               if w.startswith("prices older than 6 months")), (c.gpu_id, p.provider)
    assert seen > 0  # the built-in lists do hold stale quotes these plans rest on


@pytest.mark.parametrize("gpu", ["l40-48gb", "a10g-24gb"])
def test_a_gpu_without_a_purchase_price_is_never_bought_as_rental(gpu: str) -> None:
    """Issue 28: where the catalog has no purchase price (gpus.toml `no_price`), the plan says why where it would
    price buying, offers no on-premises option and no "Buy" verdict, and its server shows no price: ownership is
    never priced as rental."""
    from gpuplan.catalog.hardware import load_catalog

    reason = load_catalog().gpus.rows[gpu].no_price
    assert reason
    proj, base = load_project(example_path("llama3-8b-qlora"))
    proj = proj.model_copy(update={"constraints": proj.constraints.model_copy(update={"gpus": [gpu]})})
    rec = api.plan(proj, base_dir=base).recommendation
    assert rec is not None and rec.gpu_id == gpu
    assert all(d.option != "on-prem" for d in rec.deployments)
    assert rec.action is not None and rec.action.verb != "buy"
    assert rec.deployment is not None
    gap = next(g for g in rec.deployment.gaps if g.startswith("on-prem:"))
    assert reason in gap and "not replaced by rental" in gap
    assert rec.price is None and rec.server is not None
    assert any(r.startswith("Price: none") and reason in r for r in rec.server.reasons)
