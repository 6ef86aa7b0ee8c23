"""`gpuplan catalog ...`: listing, JSON rows with their origin, alias lookup, --where filters, the user's own
rows through --catalog, and one-line errors that name the file, the row and the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan.catalog.hardware import builtin_catalog, load_catalog
from gpuplan.cli import app

HARDWARE = ["gpus", "cpus", "platforms", "drives", "nics"]
# wide enough that rich neither truncates ids in the tables nor wraps the one-line messages
WIDE = {"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env=WIDE)


def rows(*args: str) -> list[dict[str, Any]]:
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert isinstance(out, list)
    return out


def assert_one_line_error(r: Any, code: int = 2) -> str:
    assert r.exit_code == code, r.output
    err = r.stderr.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1, err
    assert "Traceback" not in r.output
    return err


def h100_row() -> dict[str, Any]:
    return load_catalog().gpus.rows["h100-sxm-80gb"].model_dump(mode="json")


# --- listing ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [*HARDWARE, "models"])
def test_every_catalog_lists_with_exit_0(kind: str) -> None:
    r = cli("catalog", kind)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip()


@pytest.mark.parametrize("kind", HARDWARE)
def test_json_rows_have_id_source_date_and_origin(kind: str) -> None:
    out = rows("catalog", kind)
    table = builtin_catalog().table(kind.rstrip("s"))
    assert [r["id"] for r in out] == list(table.rows)
    for row in out:
        assert row["id"] and row["source"] and row["as_of"], row["id"]
        assert row["origin"] == {"file": f"gpuplan/data/{kind}.toml", "overrides_builtin": False}


def test_model_json_rows_have_id_source_date_and_origin() -> None:
    # the same row contract as the hardware catalogs: every listed row says where it comes from
    out = rows("catalog", "models")
    assert len(out) >= 30
    for row in out:
        assert row["id"] and row["source"] and row["as_of"], row["id"]
        assert "origin" in row, f"catalog models --json row {row['id']!r} has no origin"


def test_real_subprocess_lists_gpus_as_json() -> None:
    r = subprocess.run([sys.executable, "-m", "gpuplan", "catalog", "gpus", "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {g["id"] for g in out} == set(builtin_catalog().gpus.rows)
    assert all(g["origin"]["file"] == "gpuplan/data/gpus.toml" for g in out)


# --- one row by id or alias ---------------------------------------------------------------------------------------
def test_alias_shows_one_row() -> None:
    out = rows("catalog", "gpus", "h100")
    assert [g["id"] for g in out] == ["h100-sxm-80gb"]
    r = cli("catalog", "gpus", "H100")  # aliases are case-insensitive
    assert r.exit_code == 0, r.output
    assert "h100-sxm-80gb" in r.stdout and "gpuplan/data/gpus.toml" in r.stdout
    assert "a100-sxm-80gb" not in r.stdout


def test_unknown_id_exit_2_with_suggestion() -> None:
    err = assert_one_line_error(cli("catalog", "gpus", "h10"))
    assert "unknown gpu 'h10'" in err and "did you mean" in err and "h100-sxm-80gb" in err


@pytest.mark.parametrize("kind,name", [("cpus", "epyc-9554x"), ("nics", "connectx-77"), ("models", "lama-3.1-8b")])
def test_unknown_id_in_other_catalogs(kind: str, name: str) -> None:
    err = assert_one_line_error(cli("catalog", kind, name))
    assert repr(name) in err and "did you mean" in err


# --- --where ------------------------------------------------------------------------------------------------------
def test_where_market_class_consumer() -> None:
    out = rows("catalog", "gpus", "--where", "market_class=consumer")
    ids = {g["id"] for g in out}
    assert "rtx-4090-24gb" in ids
    assert all(g["market_class"] == "consumer" for g in out)
    expected = {g.id for g in builtin_catalog().gpus.rows.values() if g.market_class == "consumer"}
    assert ids == expected
    # text compares case-insensitively
    assert {g["id"] for g in rows("catalog", "gpus", "--where", "market_class=Consumer")} == expected


def test_where_numeric_on_a_dotted_field() -> None:
    out = rows("catalog", "gpus", "--where", "tflops.bf16>=900")
    assert out and "h100-sxm-80gb" in {g["id"] for g in out}
    assert all(g["tflops"]["bf16"] is not None and g["tflops"]["bf16"] >= 900 for g in out)
    expected = {g.id for g in builtin_catalog().gpus.rows.values() if (g.tflops.bf16 or 0) >= 900}
    assert {g["id"] for g in out} == expected


def test_where_conditions_combine() -> None:
    out = rows("catalog", "gpus", "--where", "market_class=datacenter", "--where", "memory_gib<=48")
    assert out
    assert all(g["market_class"] == "datacenter" and g["memory_gib"] <= 48 for g in out)


def test_where_unknown_field_exit_2_names_it() -> None:
    err = assert_one_line_error(cli("catalog", "gpus", "--where", "nonsense=1"))
    assert "'nonsense'" in err and "did you mean" in err
    err = assert_one_line_error(cli("catalog", "gpus", "--where", "market_clas=consumer"))
    assert "'market_clas'" in err and "'market_class'" in err


def test_where_bad_condition_exit_2() -> None:
    err = assert_one_line_error(cli("catalog", "gpus", "--where", "tflops.bf16>=lots"))
    assert "needs a number" in err


# --- the user's own rows (--catalog) ------------------------------------------------------------------------------
def write_yaml(path: Path, table: str, rows_: list[dict[str, Any]]) -> bytes:
    path.write_text(yaml.safe_dump({table: rows_}, sort_keys=False))
    return path.read_bytes()


def test_user_row_replaces_builtin_and_says_so(tmp_path: Path) -> None:
    row = h100_row()
    row["memory_bandwidth_gbs"] = 4321.0
    f = tmp_path / "mine.yaml"
    before = write_yaml(f, "gpu", [row])

    out = rows("catalog", "gpus", "--catalog", str(f))
    h100 = next(g for g in out if g["id"] == "h100-sxm-80gb")
    assert h100["memory_bandwidth_gbs"] == 4321.0
    assert h100["origin"] == {"file": str(f), "overrides_builtin": True}
    assert len(out) == len(builtin_catalog().gpus.rows)  # replaced, not added
    assert all(g["origin"]["overrides_builtin"] is False for g in out if g["id"] != "h100-sxm-80gb")

    r = cli("catalog", "gpus", "--catalog", str(f))
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if "h100-sxm-80gb" in ln)
    assert "replaces built-in" in line and "4,321" in line
    assert "Your rows replace built-in h100-sxm-80gb" in r.stdout

    r = cli("catalog", "gpus", "h100", "--catalog", str(f))  # one row: the alias still resolves to the user's row
    assert r.exit_code == 0, r.output
    assert "4321" in r.stdout and "replaces the built-in row" in r.stdout and str(f) in r.stdout

    assert f.read_bytes() == before


def test_user_row_in_toml_and_a_new_id(tmp_path: Path) -> None:
    row = h100_row()
    row.update(id="my-h100", name="My H100", aliases=["mine"], memory_bandwidth_gbs=1234.0)
    f = tmp_path / "mine.toml"
    lines = ["[[gpu]]"]
    for k, v in row.items():
        if v is None or isinstance(v, dict):
            continue
        lines.append(f"{k} = {json.dumps(v)}")
    for k in ("tflops", "interconnect", "price"):
        if row.get(k) is not None:
            lines.append(f"[gpu.{k}]")
            lines += [f"{a} = {json.dumps(b)}" for a, b in row[k].items() if b is not None]
    f.write_text("\n".join(lines) + "\n")
    before = f.read_bytes()

    out = rows("catalog", "gpus", "mine", "--catalog", str(f))
    assert [g["id"] for g in out] == ["my-h100"]
    assert out[0]["memory_bandwidth_gbs"] == 1234.0
    assert out[0]["origin"] == {"file": str(f), "overrides_builtin": False}
    r = cli("catalog", "gpus", "--catalog", str(f))
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if "my-h100" in ln)
    assert "(yours)" in line and "replaces" not in line
    assert "Your rows replace" not in r.stdout
    assert f.read_bytes() == before


@pytest.mark.parametrize("field,value,needle", [
    ("memory_bandwidth_gbs", "fast", "field memory_bandwidth_gbs"),
    ("memory_bandwidth_gbs", -5, "field memory_bandwidth_gbs"),
    ("tflops.bf16", "lots", "field tflops.bf16"),
    ("market_class", "gaming", "field market_class"),
    ("colour", "green", "field colour"),
])
def test_bad_user_field_exit_2_names_file_row_and_field(tmp_path: Path, field: str, value: Any,
                                                        needle: str) -> None:
    row = h100_row()
    if "." in field:
        outer, inner = field.split(".")
        row[outer] = {**row[outer], inner: value}
    else:
        row[field] = value
    f = tmp_path / "bad.yaml"
    before = write_yaml(f, "gpu", [row])
    for args in (("catalog", "gpus"), ("catalog", "gpus", "h100"), ("catalog", "gpus", "--json")):
        err = assert_one_line_error(cli(*args, "--catalog", str(f)))
        assert str(f) in err and "row h100-sxm-80gb" in err and needle in err, err
    assert f.read_bytes() == before


def test_bad_user_files_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "typo.yaml"
    f.write_text("gpus: []\n")
    err = assert_one_line_error(cli("catalog", "gpus", "--catalog", str(f)))
    assert str(f) in err and "unknown table 'gpus'" in err and "did you mean 'gpu'" in err
    f = tmp_path / "broken.toml"
    f.write_text("[[gpu]\nid = 1\n")
    err = assert_one_line_error(cli("catalog", "gpus", "--catalog", str(f)))
    assert str(f) in err and "not valid TOML" in err
    err = assert_one_line_error(cli("catalog", "gpus", "--catalog", str(tmp_path / "missing.yaml")))
    assert "missing.yaml" in err and "cannot read" in err


def test_user_alias_that_clashes_with_a_builtin_exit_2(tmp_path: Path) -> None:
    row = h100_row()
    row.update(id="my-gpu", aliases=["a100"])  # 'a100' already names a built-in GPU
    f = tmp_path / "clash.yaml"
    before = write_yaml(f, "gpu", [row])
    err = assert_one_line_error(cli("catalog", "gpus", "--catalog", str(f)))
    assert str(f) in err and "my-gpu" in err and "aliases" in err
    assert f.read_bytes() == before


def test_user_cpu_row_overrides_too(tmp_path: Path) -> None:
    cpu_id, cpu = next(iter(load_catalog().cpus.rows.items()))
    row = cpu.model_dump(mode="json")
    row["name"] = "My renamed CPU"
    f = tmp_path / "cpus.yaml"
    write_yaml(f, "cpu", [row])
    out = rows("catalog", "cpus", cpu_id, "--catalog", str(f))
    assert out[0]["name"] == "My renamed CPU" and out[0]["origin"]["overrides_builtin"] is True


@pytest.mark.parametrize("args", [["catalog", "gpus"], ["catalog", "gpus", "--json"]])
def test_output_to_a_closed_pipe_stops_quietly(args: list[str]) -> None:
    # `gpuplan catalog gpus | head`: the reader leaves before gpuplan writes (its end of the pipe is closed here
    # before the command has started); exit 141 with no error line, not the internal error nor 1 (infeasible)
    p = subprocess.Popen([sys.executable, "-m", "gpuplan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert err == ""
