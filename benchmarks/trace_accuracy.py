"""Estimate vs exact trace for the shipped matrix (benchmarks/trace_cases.py): one row per case with the
traced tensor peak, the estimate, the error and the phase each puts the peak in; then median and worst.

Run: python benchmarks/trace_accuracy.py [--markdown]   (needs the `trace` extra; ~2-4 minutes)
"""

from __future__ import annotations

import argparse
import statistics
import sys

from trace_cases import cases
from trace_validation import compare


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default=None, help="substring of case names to run")
    a = ap.parse_args()
    rows, errors = [], []
    for case in cases():
        if a.only and a.only not in case.name:
            continue
        c = compare(case)
        trace_phase = max(c.trace_phases, key=lambda k: c.trace_phases[k])
        errors.append(abs(c.error))
        rows.append((c.name, f"{c.trace_bytes / 2**30:.2f}", f"{c.estimate_bytes / 2**30:.2f}",
                     f"{100 * c.error:+.1f}%", trace_phase, c.estimate_phase))
        print(*rows[-1], sep="  ", file=sys.stderr, flush=True)
    header = ("case", "trace GiB", "estimate GiB", "error", "trace peak phase", "estimate peak phase")
    if a.markdown:
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in [header, *rows]:
            print("  ".join(r))
    print(f"\nmedian absolute error {100 * statistics.median(errors):.1f}%, worst {100 * max(errors):.1f}% "
          f"over {len(errors)} cases")


if __name__ == "__main__":
    main()
