"""`gpuplan prices` (issue 28): the rows in force with age and source, and the import of a SkyPilot vms.csv into the
user's CSV price file, reporting mapped and skipped rows and keeping what the file held."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

from typer.testing import CliRunner

from gpuplan.cli import app

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "skypilot"
MINE = ("table,gpu_id,provider,kind,price_per_gpu_hour,currency,source,as_of\n"
        "cloud,h100-sxm-80gb,Our reseller,on-demand,2.10,EUR,quote 2026-Q4 #1182,2026-11-20\n"
        "cloud,l4-24gb,AWS g6.xlarge,on-demand,0.99,USD,an old quote,2026-01-10\n")


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), terminal_width=200)


def _vms(tmp_path: Path, sub: str = "") -> Path:
    """The AWS fixture, dated (its modification time is its as_of) before the pinned plan date."""
    path = tmp_path / sub / "aws" / "vms.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "aws" / "vms.csv", path)
    stamp = dt.datetime(2026, 11, 15, 12).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def test_rows_in_force_carry_age_source_and_origin(tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    mine.write_text(MINE, encoding="utf-8")
    res = run("prices", "--gpu", "l4", "--prices", str(mine), "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["as_of"] == "2026-12-01"
    rows = data["rows"]
    assert rows and all(r["gpu_id"] == "l4-24gb" for r in rows)
    old = next(r for r in rows if r["source"] == "an old quote")
    assert old["origin"] == "your file" and old["stale"] and old["age_days"] == (dt.date(2026, 12, 1)
                                                                                 - dt.date(2026, 1, 10)).days
    assert any(r["origin"] == "built-in" and r["source"] for r in rows)
    text = run("prices", "--gpu", "l4", "--prices", str(mine))
    assert text.exit_code == 0 and "an old quote" in text.output and "months old !" in text.output


def test_import_maps_skips_and_keeps_what_the_file_held(tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    mine.write_text(MINE, encoding="utf-8")
    res = run("prices", "--import", str(_vms(tmp_path)), "--into", str(mine), "--format", "json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    mapped = {(r["gpu_id"], r["provider"], r["kind"]) for r in report["rows"]}
    assert ("h100-sxm-80gb", "AWS p5.48xlarge", "on-demand") in mapped
    assert ("l4-24gb", "AWS g6.xlarge", "on-demand") in mapped
    why = {s["name"]: s["why"] for s in report["skipped"]}
    assert "not in gpuplan's catalog" in why["Inferentia2"] and "CPU-only" in why["(none)"]
    # the user's reseller row is kept; the old AWS g6.xlarge on-demand row is replaced, and kept in the backup
    assert report["kept"] == 1 and report["replaced"] == 1
    assert Path(report["backup"]).read_text(encoding="utf-8") == MINE
    merged = run("prices", "--prices", str(mine), "--gpu", "h100-sxm-80gb", "--format", "json")
    assert merged.exit_code == 0, merged.output
    providers = {r["provider"] for r in json.loads(merged.output)["rows"] if r["origin"] == "your file"}
    assert {"Our reseller", "AWS p5.48xlarge"} <= providers
    again = run("prices", "--import", str(_vms(tmp_path, "b")),
                "--into", str(mine))
    assert again.exit_code == 0 and Path(str(mine) + ".bak.1").exists()  # a second import keeps a second copy


def test_import_refuses_a_non_csv_target_and_a_half_command(tmp_path: Path) -> None:
    res = run("prices", "--import", str(_vms(tmp_path)), "--into", str(tmp_path / "mine.yaml"))
    assert res.exit_code != 0 and "give --into a .csv file" in res.output
    assert not (tmp_path / "mine.yaml").exists()
    half = run("prices", "--import", str(_vms(tmp_path, "x")))
    assert half.exit_code != 0 and "--into" in half.output
