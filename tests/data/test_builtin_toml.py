"""The built-in data files are read with rtoml (fast) when it is installed; it must give exactly what the standard
library's tomllib gives, file by file (catalog/reading.py `builtin_toml`)."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from gpuplan.catalog.reading import builtin_toml

FILES = sorted(p.name for p in resources.files("gpuplan.data").iterdir() if p.name.endswith(".toml"))


@pytest.mark.parametrize("name", FILES)
def test_builtin_toml_equals_tomllib(name: str) -> None:
    text = resources.files("gpuplan.data").joinpath(name).read_text(encoding="utf-8")
    assert builtin_toml(text) == tomllib.loads(text)


def test_invalid_toml_still_gets_tomllib_s_error() -> None:
    with pytest.raises(tomllib.TOMLDecodeError):
        builtin_toml("a = [1,\n")
