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
