"""Every built-in example's plan as `gpuplan plan --example NAME --format json` writes it, into one folder (one file
per example), to compare two trees byte for byte: a change meant to leave the plans alone (issue #26's speed work)
must leave these files identical. The search's wall-clock seconds (`stats.search_seconds`), which no two runs share,
are written as 0; the date is pinned (the test suite's, 2026-12-01) so the staleness of quotes does not move.

Run: python benchmarks/plan_json.py OUT_DIR [EXAMPLE ...]   then   diff -r OLD_DIR NEW_DIR
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from gpuplan.api import PLAN_TOP, plan
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.report.plan import render_json

AS_OF = datetime.date(2026, 12, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, help="the folder to write NAME.json into")
    ap.add_argument("examples", nargs="*", help="the examples (default: every built-in one)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for name in a.examples or example_names():
        result = plan(example_path(name), top=PLAN_TOP, as_of=AS_OF)
        result = result.model_copy(update={"stats": result.stats.model_copy(update={"search_seconds": 0.0})})
        (a.out / f"{name}.json").write_text(render_json(result) + "\n")
        print(name, result.stats.candidates_evaluated)


if __name__ == "__main__":
    main()
