"""At 80 columns the plan's tables are read whole (issue #27): no layout cut to "t…" or wrapped a letter a line, no
cost or provider cut; what does not fit is left to `--format md` and `--details`, and said so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuplan.catalog.loader import example_names


def section(text: str, start: str, end: str) -> list[str]:
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(end))
    return lines[i:j]


@pytest.mark.parametrize("name", example_names())
def test_the_tables_fit_80_columns_whole(name: str) -> None:
    r = subprocess.run([sys.executable, "-m", "gpuplan", "plan", "--example", name], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    alternatives = section(r.stdout, "Alternatives", "cost as ranked")
    deployments = section(r.stdout, "Deployment costs", "Decision checklist")
    for line in alternatives + deployments:
        assert "…" not in line, line
    rows = [line for line in alternatives if line.startswith("→")]
    assert rows and rows[0].split()[-1] in ("rent", "buy")  # the ranked cost and its basis, whole
    assert "more: --format md" in deployments[0]
