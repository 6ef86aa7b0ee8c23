"""The fuzz tests: a quick variant on every run; the long one (`python -m pytest -m fuzz`) only when asked for."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "fuzz" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="the long fuzz run: python -m pytest -m fuzz tests/fuzz")
    for item in items:
        if item.get_closest_marker("fuzz") is not None:
            item.add_marker(skip)
