"""`gpuplan cost` and `--prices`: the deployment comparison's contract, and price files' errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan.cli import app

runner = CliRunner()


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), terminal_width=200)


def test_cost_json_has_the_contract_keys() -> None:
    res = run("cost", "--example", "llama3-70b-serving", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    cand = data["candidates"][0]
    assert cand["deployment"]["option"] in ("on-prem", "managed", "cloud")
    options = {d["option"] for d in cand["deployments"]}
    assert {"on-prem", "cloud"} <= options
    for d in cand["deployments"]:
        for key in ("option", "provider", "monthly_cost", "total_cost", "cost_per_run", "currency",
                    "breakeven_months_vs", "assumptions"):
            assert key in d
        assert d["currency"] == "EUR"  # the example's budget is in euros
        assert d["total_cost"] >= 0 and d["monthly_cost"] >= 0
        assert d["cost_per_million_tokens"] is not None  # serving
    totals = [d["total_cost"] for d in cand["deployments"]]
    assert totals == sorted(totals)  # cheapest first
    assert cand["deployment"]["total_cost"] == totals[0]


def test_cost_text_rows_add_up() -> None:
    """Each row of `gpuplan cost` shows upfront, running per month, resale and total, the lines that add up
    (docs/cost.md): it showed total / months as "per month" beside the upfront payment."""
    data = json.loads(run("cost", "--example", "llama3-70b-serving", "--format", "json").output)
    out = runner.invoke(app, ["cost", "--example", "llama3-70b-serving"], env={"COLUMNS": "220"}).output
    for d in data["candidates"][0]["deployments"]:
        resale = f"-{d['residual_value']:,.0f}" if d["residual_value"] else "0"
        cells = [f"{d['upfront_cost']:,.0f}", f"{d['running_monthly']:,.0f}", resale, f"{d['total_cost']:,.0f} EUR"]
        row = next(ln for ln in out.splitlines() if d["option"] in ln and cells[-1] in ln)
        shown = [c.strip() for c in row.split("│")]
        i = shown.index(cells[0])
        assert shown[i:i + 4] == cells, row


def test_plan_fills_the_deployment_decision() -> None:
    res = run("plan", "--example", "llama3-70b-serving", "--format", "json", "--top", "2")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["recommendation"]["deployment"]["option"] in ("on-prem", "managed", "cloud")
    item = next(i for i in data["checklist"] if i["item"] == "Deployment decision")
    assert item["verdict"] in ("pass", "warn")
    assert data["recommendation"]["deployment"]["option"] in item["reasons"][0]


def test_a_user_hosting_quote_is_compared(tmp_path: Path) -> None:
    # the serving example's recommendation: find its GPU, then offer that GPU cheaply by the month
    plan = json.loads(run("plan", "--example", "llama3-70b-serving", "--format", "json", "--top", "1").output)
    gpu, per = plan["recommendation"]["gpu_id"], plan["recommendation"]["gpus_per_server"]
    quote = tmp_path / "quotes.yaml"
    quote.write_text(f"""hosting:
  - id: acme-test
    provider: ACME Hosting
    gpu_id: {gpu}
    gpus: {per}
    monthly: 100
    setup: 0
    currency: EUR
    min_months: 1
    includes: [power]
    source: test quote
    as_of: 2026-11-01
""")
    before = quote.read_bytes()
    res = run("cost", "--example", "llama3-70b-serving", "--format", "json", "--prices", str(quote))
    assert res.exit_code == 0, res.output
    deps = json.loads(res.output)["candidates"][0]["deployments"]
    ours = next(d for d in deps if "acme-test" in d["provider"])
    assert ours["option"] == "managed"
    assert ours["total_cost"] == pytest.approx(100 * 36)  # 36-month horizon, nothing else added
    assert deps[0]["provider"] == ours["provider"]  # the cheapest, so chosen
    assert quote.read_bytes() == before


def test_a_stale_price_is_flagged(tmp_path: Path) -> None:
    plan = json.loads(run("plan", "--example", "llama3-70b-serving", "--format", "json", "--top", "1").output)
    gpu = plan["recommendation"]["gpu_id"]
    quote = tmp_path / "old.csv"
    quote.write_text("table,gpu_id,provider,kind,price_per_gpu_hour,currency,source,as_of\n"
                     f"cloud,{gpu},Old Cloud,on-demand,0.01,USD,an old quote,2024-01-01\n")
    res = run("cost", "--example", "llama3-70b-serving", "--format", "json", "--prices", str(quote))
    assert res.exit_code == 0, res.output
    deps = json.loads(res.output)["candidates"][0]["deployments"]
    cloud = next(d for d in deps if d["option"] == "cloud")
    assert any("older than 6 months" in w and "Old Cloud" in w for w in cloud["warnings"])


@pytest.mark.parametrize("content,name,expected", [
    # CSV: the row number counts the header as row 1
    ("table,gpu_id,provider,kind,price_per_gpu_hour,currency,source,as_of\n"
     "cloud,h100-sxm-80gb,X,on-demand,-3,USD,q,2026-11-01\n", "bad.csv", ["bad.csv", "row X", "price_per_gpu_hour"]),
    ("table,gpu_id,provider,kind,price_per_gpu_hour,currency,source,as_of\n"
     "clod,h100-sxm-80gb,X,on-demand,3,USD,q,2026-11-01\n", "typo.csv", ["typo.csv", "row 2", "did you mean 'cloud'"]),
    ("cloud:\n  - {gpu_id: h100-sxm-80gb, provider: X, kind: sometimes, price_per_gpu_hour: 3, source: q, "
     "as_of: 2026-11-01}\n", "kind.yaml", ["kind.yaml", "row X", "kind"]),
    ("hosting:\n  - {id: a, provider: P, gpu_id: h100-sxm-80gb, gpus: 8, source: q, as_of: 2026-11-01}\n",
     "missing.yaml", ["missing.yaml", "row a", "monthly"]),
    ("clouds: []\n", "table.yaml", ["table.yaml", "did you mean 'cloud'"]),
    ("cloud:\n  - {gpu_id: h100-sxm, provider: X, price_per_gpu_hour: 3, source: q, as_of: 2026-11-01}\n",
     "gpu.yaml", ["gpu.yaml", "gpu_id", "did you mean"]),
])
def test_price_file_errors_name_file_row_and_field(tmp_path: Path, content: str, name: str,
                                                   expected: list[str]) -> None:
    f = tmp_path / name
    f.write_text(content)
    res = run("cost", "--example", "llama3-8b-qlora", "--prices", str(f))
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for part in expected:
        assert part in res.output, (part, res.output)
