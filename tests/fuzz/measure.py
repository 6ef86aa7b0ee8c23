"""The long fuzz run, counted: `python -m tests.fuzz.measure [--projects N] [--catalogs N] [--prices N] [--seed S]`.
Prints how many generated files ended in each outcome (ok, gpuplan's error by code, broken property, uncaught
exception) and the distinct uncaught exceptions. docs/reliability.md records its figures."""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
import warnings

from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz import harness
from tests.fuzz import strategies as S

warnings.filterwarnings("ignore")


def _count(strategy, n: int, seed_value: int, run) -> tuple[collections.Counter, collections.Counter]:  # type: ignore[no-untyped-def]
    outcomes: collections.Counter[str] = collections.Counter()
    details: collections.Counter[str] = collections.Counter()

    @seed(seed_value)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def body(doc) -> None:  # type: ignore[no-untyped-def]
        kind, detail = run(doc)
        outcomes[kind.split(":")[0] if kind.startswith("error") else kind] += 1
        if kind in ("uncaught", "broken"):
            details[re.sub(r"\d+", "N", detail)[:140]] += 1

    body()
    return outcomes, details


RUNS = {
    "projects": (S.project_docs(), lambda d: harness.classify(d.data, d.suffix)),
    "schema": (S.schema_docs(), lambda d: harness.classify(d.data, d.suffix)),
    "catalogs": (S.catalog_docs(), lambda d: harness.classify(harness.EXAMPLE, catalog=(d.data, d.suffix))),
    "prices": (S.price_docs(), lambda d: harness.classify(harness.EXAMPLE, prices=(d.data, d.suffix))),
}


def _cli(doc_and_command) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    from tests.fuzz.test_fuzz_cli import run_cli

    doc, command = doc_and_command
    r = run_cli(doc, command)
    if "Traceback" in r.stderr:
        last = r.stderr.strip().splitlines()[-1]
        return "uncaught", f"traceback ({command}): {last[:160]}"
    if r.returncode not in (0, 1, 2):
        return "broken", f"exit code {r.returncode}: {r.stderr.strip()[:160]}"
    return ("ok" if r.returncode == 0 else f"error:{r.returncode}"), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    for name in RUNS:
        parser.add_argument(f"--{name}", type=int, default=0)
    parser.add_argument("--cli", type=int, default=0, help="files through `python -m gpuplan` (a subprocess each)")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args(argv)
    bad = 0
    from hypothesis import strategies as st

    from tests.fuzz.test_fuzz_cli import DOCS

    runs = {**RUNS, "cli": (st.tuples(DOCS, st.sampled_from(["plan", "plan", "estimate"])), _cli)}
    for name, (strategy, run) in runs.items():
        n = getattr(args, name)
        if not n:
            continue
        t = time.perf_counter()
        outcomes, details = _count(strategy, n, args.seed, run)
        print(f"{name}: {sum(outcomes.values())} files in {time.perf_counter() - t:.0f} s: {dict(outcomes)}")
        for detail, k in details.most_common(40):
            print(f"  {k:5d}  {detail}")
        bad += outcomes["uncaught"] + outcomes["broken"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
