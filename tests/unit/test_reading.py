"""catalog.reading: YAML is read by libyaml when PyYAML has it, to the same data as the pure-Python parser, and a
text libyaml refuses gets the pure parser's error (what the boundary tests check, tests/fuzz/test_boundary.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuplan.catalog import reading
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.catalog.reading import Unreadable, parse

ROOT = Path(__file__).resolve().parents[2]
YAML_FILES = sorted({*map(example_path, example_names()), *ROOT.glob("tests/**/*.yaml"),
                     *ROOT.glob("benchmarks/*.yaml")})


@pytest.mark.skipif(reading._FastLoader is None, reason="PyYAML without libyaml")
@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_libyaml_reads_every_file_as_the_pure_parser(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert yaml.load(text, Loader=reading._FastLoader) == yaml.load(text, Loader=reading._Loader)


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: 1\na: 2\n", "a:\n  b: 1\n   c: 2\n", "- a\nb: 1\n",
                                  "x: {y: 1, y: 2}\n"])
def test_a_text_yaml_refuses_gets_the_pure_parsers_error(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Unreadable) as fast:
        parse(text, "yaml")
    monkeypatch.setattr(reading, "_FastLoader", None)
    with pytest.raises(Unreadable) as pure:
        parse(text, "yaml")
    assert str(fast.value) == str(pure.value)
    assert "line" in str(pure.value)


# --- a fast path for large files (issue #26: a 100x user catalog in under 0.5 s, as JSON or TOML) ----------------

@pytest.mark.parametrize("text", ['{"gpu": [{"id": "x", "memory_gib": 80.0, "tdp_w": 700, "ecc": true, "a": null}]}',
                                  '[1, 2.5, "three", {"d": [true, false]}]', '  {"unicode": "café \\u00e9"}\n'])
def test_yaml_that_is_json_reads_as_yaml_would(text: str) -> None:
    assert parse(text, "yaml") == yaml.load(text, Loader=reading._Loader)


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', "{a: 1, b: [x, y]}", '{"when": 2026-12-01}'])
def test_json_looking_yaml_that_json_refuses_is_read_as_yaml(text: str) -> None:
    # a duplicate key is YAML's error too; a flow mapping of YAML and a YAML date are YAML's data
    try:
        expected = yaml.load(text, Loader=reading._Loader)
    except yaml.YAMLError:
        with pytest.raises(Unreadable, match="given twice"):
            parse(text, "yaml")
        return
    assert parse(text, "yaml") == expected


def test_a_user_catalog_reads_the_same_as_json_toml_and_yaml(tmp_path: Path) -> None:
    import json

    import rtoml

    from gpuplan.catalog.hardware import builtin_catalog, load_catalog

    rows = []
    for g in list(builtin_catalog().gpus.rows.values())[:5]:
        row = g.model_dump(mode="json", exclude_none=True, exclude={"price": {"amount", "currency"}})
        rows.append({**row, "id": g.id + "-mine", "aliases": []})
    data = {"schema_version": 1, "gpu": rows}
    files = {"json": json.dumps(data), "toml": rtoml.dumps(data), "yaml": yaml.safe_dump(data)}
    loaded = {}
    for kind, text in files.items():
        path = tmp_path / f"mine.{kind}"
        path.write_text(text, encoding="utf-8")
        loaded[kind] = load_catalog([path]).gpus.rows
    assert loaded["json"] == loaded["toml"] == loaded["yaml"]
    assert {r["id"] for r in rows} <= set(loaded["json"])
    assert reading.kind_of("A.JSON") == "json" and reading.kind_of("a.yml") == "yaml" and reading.kind_of("a") == "toml"
