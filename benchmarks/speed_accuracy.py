"""Speed model vs published measurements: GPU-hours of pre-training runs, tokens/s per GPU and runtimes of
pre-training and fine-tuning runs (benchmarks/speed_cases.py says where each comes from).

Prints one row per case: the measurement, gpuplan's prediction and the naive rule (6 x parameters x tokens at
40% of the dense peak), each with its error; then the median and 90th-percentile absolute errors by group,
in-sample and leave-one-out (each case predicted by a speed model fitted without it, when --loo is given:
slower, it refits the calibration once per case).

Run: python benchmarks/speed_accuracy.py [--markdown] [--loo]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpuplan.catalog.loader import load_speed_model  # noqa: E402

from speed_cases import Case, load_cases, naive, predict  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}"


def rel(pred: float, meas: float) -> float:
    return (pred - meas) / meas


def summary(rows: list[tuple[Case, float, float, float | None]]) -> list[tuple[str, int, str, str, str]]:
    out = []
    groups = {"pre-training": lambda c: c.group == "pretrain" and c.calibration,
              "fine-tuning": lambda c: c.group == "finetune" and c.calibration,
              "all calibration runs": lambda c: c.calibration,
              "† checks": lambda c: not c.calibration}
    for name, pick in groups.items():
        sel = [(c, p, n, loo) for c, p, n, loo in rows if pick(c)]
        if not sel:
            continue
        ours = [abs(rel(p, c.value)) for c, p, _, _ in sel]
        nv = [abs(rel(n, c.value)) for c, _, n, _ in sel]
        loo = [abs(rel(lp, c.value)) for c, _, _, lp in sel if lp is not None]
        loo_s = f"{100 * statistics.median(loo):.1f}% / {100 * pct(loo, 0.9):.1f}%" if loo else "-"
        out.append((name, len(sel), f"{100 * statistics.median(ours):.1f}% / {100 * pct(ours, 0.9):.1f}%",
                    loo_s, f"{100 * statistics.median(nv):.1f}% / {100 * pct(nv, 0.9):.1f}%"))
    return out


def explain(c: Case, sm) -> None:  # type: ignore[no-untyped-def]
    from gpuplan.catalog.loader import load_activation_table
    from gpuplan.core.speed import estimate_training_speed

    from speed_cases import _trainable

    r = estimate_training_speed(c.arch, c.params, c.workload, c.layout, c.gpus, c.gpu, sm, load_activation_table(),
                                trainable=_trainable(c), total_tokens=c.tokens)
    t = r.time
    print(c.id, c.kind, c.gpus, c.gpu.id, c.layout, c.workload.model_dump(exclude_defaults=True))
    print(f"measured {fmt(c.value)} {c.metric}; predicted {fmt(predict(c, sm))}; tok/s/gpu {t.tokens_per_s_per_gpu:,.0f}"
          f" mfu {t.mfu:.3f} eff {t.efficiency:.3f} step {t.step_seconds:.3f}s")
    print({k: round(v, 4) for k, v in t.step_breakdown_s.items()})
    for x in t.assumptions + c.assumptions:
        print(" -", x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs/accuracy.md)")
    ap.add_argument("--loo", action="store_true", help="also leave-one-out: refit without each case")
    ap.add_argument("--explain", metavar="ID", help="print one case's step breakdown and assumptions")
    a = ap.parse_args()
    sm = load_speed_model()
    cases = load_cases()
    if a.explain:
        explain(next(c for c in cases if c.id == a.explain), sm)
        return
    loo_pred: dict[str, float] = {}
    if a.loo:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
        from fit_speed import fit  # type: ignore[import-not-found]

        for c in cases:
            if not c.calibration:
                continue
            sm_c, _ = fit([x for x in cases if x.id != c.id and x.calibration], sm, quiet=True)
            loo_pred[c.id] = predict(c, sm_c)
    rows = []
    for c in cases:
        rows.append((c, predict(c, sm), naive(c), loo_pred.get(c.id)))
    head = ["case", "kind", "GPU", "metric", "measured", "gpuplan", "err", "naive 6ND@40%", "err"]
    table = []
    for c, p, n, _ in rows:
        table.append([c.id + ("" if c.calibration else " †"), c.kind, f"{c.gpus}x {c.gpu.id}", c.metric,
                      fmt(c.value), fmt(p), f"{100 * rel(p, c.value):+.1f}%", fmt(n), f"{100 * rel(n, c.value):+.1f}%"])
    sums = summary(rows)
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in table:
            print("| " + " | ".join(r) + " |")
        print()
        print("| group | cases | gpuplan median / p90 | leave-one-out median / p90 | naive median / p90 |")
        print("|---|---|---|---|---|")
        for s in sums:
            print("| " + " | ".join(map(str, s)) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *table)]
        print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        for r in table:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
        print()
        print(f"{'group':22} {'cases':>5}  {'gpuplan med/p90':>18}  {'LOO med/p90':>18}  {'naive med/p90':>18}")
        for name, n, o, lo, nv in sums:
            print(f"{name:22} {n:>5}  {o:>18}  {lo:>18}  {nv:>18}")
    print("\n† not used for calibration (a check only).")


if __name__ == "__main__":
    main()
