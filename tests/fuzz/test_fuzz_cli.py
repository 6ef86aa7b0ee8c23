"""Generated project files through the real CLI (`python -m gpuplan`, a subprocess each): never a traceback, an
exit code of 0, 1 or 2 (3 would be a bug: the `internal` error), and with --format json, strict JSON on stdout.
The quick variant runs a handful of files; `python -m pytest -m fuzz` runs GPUPLAN_FUZZ_CLI_EXAMPLES (default 500)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import strategies as S

LONG = int(os.environ.get("GPUPLAN_FUZZ_CLI_EXAMPLES", "500"))
QUICK = 6
DOCS = st.one_of(S.project_docs(), S.project_docs(), S.schema_docs())


def _reject(name: str) -> None:
    raise AssertionError(f"{name} in the JSON output")


def run_cli(doc: S.Doc, command: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = doc.write(Path(tmp))
        args = [sys.executable, "-m", "gpuplan", command, str(path), "--format", "json"]
        return subprocess.run(args, capture_output=True, text=True, timeout=300, errors="replace", check=False,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"})


def check_cli(doc: S.Doc, command: str) -> int:
    r = run_cli(doc, command)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode in (0, 1, 2), (r.returncode, r.stderr[-3000:])
    if r.returncode == 0:
        json.loads(r.stdout, parse_constant=_reject)
    else:
        assert r.stderr.startswith("error: ") and r.stdout == "", r.stderr[-2000:]
    return r.returncode


def _fuzz(n: int) -> None:
    codes: list[int] = []

    @settings(max_examples=n, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(DOCS, st.sampled_from(["plan", "plan", "estimate"]))
    def body(doc: S.Doc, command: str) -> None:
        codes.append(check_cli(doc, command))

    body()
    assert 0 in codes and 2 in codes, codes


def test_generated_files_through_the_cli() -> None:
    _fuzz(QUICK)


@pytest.mark.fuzz
def test_long_fuzz_through_the_cli() -> None:
    _fuzz(LONG)
