"""Generated files through the code path the CLI uses (docs/reliability.md): project files (mutated examples,
projects from the project's JSON schema), `--catalog` and `--prices` files. Property: gpuplan's own error, or a
result whose JSON has only finite numbers, non-negative where a quantity cannot be negative.

The quick variant runs on every test run (a few hundred files, derandomized: the same files every time); the long
one, `python -m pytest -m fuzz tests/fuzz`, runs GPUPLAN_FUZZ_EXAMPLES project files (default 10,000) and a fifth of
that of each other kind."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import harness
from tests.fuzz import strategies as S

LONG = int(os.environ.get("GPUPLAN_FUZZ_EXAMPLES", "10000"))
QUICK = {"projects": 150, "schema": 40, "catalogs": 60, "prices": 60}
LONG_SHARE = {"projects": 1.0, "schema": 0.2, "catalogs": 0.2, "prices": 0.2}
HEALTH = list(HealthCheck)

RUNS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], tuple[str, str]]]] = {
    "projects": (S.project_docs(), lambda d: harness.classify(d.data, d.suffix)),
    "schema": (S.schema_docs(), lambda d: harness.classify(d.data, d.suffix)),
    "catalogs": (S.catalog_docs(), lambda d: harness.classify(harness.EXAMPLE, catalog=(d.data, d.suffix))),
    "prices": (S.price_docs(), lambda d: harness.classify(harness.EXAMPLE, prices=(d.data, d.suffix))),
}


def _fuzz(kind: str, n: int) -> None:
    strategy, run = RUNS[kind]
    outcomes: list[str] = []

    @settings(max_examples=n, deadline=None, derandomize=True, database=None, suppress_health_check=HEALTH)
    @given(strategy)
    def body(doc: S.Doc) -> None:
        outcome, detail = run(doc)
        assert outcome not in ("uncaught", "broken"), f"{outcome}: {detail}\n--- file ({doc.suffix}):\n" \
                                                      f"{doc.data[:2000]!r}"
        outcomes.append(outcome)

    body()
    # the generator reaches both ends: some files are valid and planned, some are refused with gpuplan's error
    assert "ok" in outcomes and any(o.startswith("error:") for o in outcomes), set(outcomes)


@pytest.mark.parametrize("kind", list(QUICK))
def test_generated_files_end_in_a_result_or_gpuplans_error(kind: str) -> None:
    _fuzz(kind, QUICK[kind])


@pytest.mark.fuzz
@pytest.mark.parametrize("kind", list(QUICK))
def test_long_fuzz(kind: str) -> None:
    _fuzz(kind, max(QUICK[kind], int(LONG * LONG_SHARE[kind])))


def test_the_property_check_catches_what_it_should() -> None:
    """The checks the fuzz run relies on fail where they must: a non-finite or negative number, an internal
    error, an uncaught exception."""
    with pytest.raises(harness.PropertyBroken, match="non-finite"):
        harness.check_numbers({"a": [1.0, float("inf")]})
    with pytest.raises(harness.PropertyBroken, match="negative"):
        harness.check_numbers({"memory": {"peak_bytes": -1}})
    harness.check_numbers({"memory": {"headroom_bytes": -5}})  # a shortfall may be negative
    from gpuplan.errors import InternalError

    with pytest.raises(harness.PropertyBroken, match="internal"):
        harness.check_error(InternalError("x"))
    assert harness.classify(b"name: [unclosed", ".yaml")[0] == "error:input-invalid"
