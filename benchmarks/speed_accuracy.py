"""Speed model vs published measurements: GPU-hours of pre-training runs, tokens/s per GPU and runtimes of
pre-training and fine-tuning runs (benchmarks/speed_cases.py says where each comes from).

Prints one row per case: the measurement, gpuplan's prediction and the naive rule (6 x parameters x tokens at
40% of the dense peak), each with its error; then the median and 90th-percentile absolute errors by group,
in-sample, leave-one-out (each case predicted by a speed model fitted without it) and leave-one-source-out
(each source's cases - one publisher or benchmark table, speed_cases.source_group - predicted by a speed model
fitted without any case of that source), when --loo is given (it refits the calibration once per case and
once per source; a fold resets the efficiencies of generations it has no runs of to priors, fit_speed.fit_fold).

--loso gives the leave-one-source-out column alone (one refit per source, about 20; the leave-one-out column's refit
per case is the slow part).

Run: python benchmarks/speed_accuracy.py [--markdown] [--loo | --loso]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed_cases import Case, load_cases, naive, predict, source_group

from gpuplan.catalog.loader import load_speed_model


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


Row = tuple[Case, float, float, float | None, float | None]


def _medp90(xs: list[float]) -> str:
    return f"{100 * statistics.median(xs):.1f}% / {100 * pct(xs, 0.9):.1f}%" if xs else "-"


def summary(rows: list[Row]) -> list[tuple[str, int, str, str, str, str]]:
    out = []
    groups = {"pre-training": lambda c: c.group == "pretrain" and c.calibration,
              "fine-tuning": lambda c: c.group == "finetune" and c.calibration,
              "all calibration runs": lambda c: c.calibration,
              "† checks": lambda c: not c.calibration}
    for name, pick in groups.items():
        sel = [r for r in rows if pick(r[0])]
        if not sel:
            continue
        ours = [abs(rel(p, c.value)) for c, p, *_ in sel]
        nv = [abs(rel(n, c.value)) for c, _, n, *_ in sel]
        loo = [abs(rel(lp, c.value)) for c, _, _, lp, _ in sel if lp is not None]
        loso = [abs(rel(sp, c.value)) for c, *_, sp in sel if sp is not None]
        out.append((name, len(sel), _medp90(ours), _medp90(loo), _medp90(loso), _medp90(nv)))
    return out


def by_source(rows: list[Row]) -> list[tuple[str, str, int, str, str]]:
    """(source, groups, cases, in-sample median, leave-one-source-out median) for the calibration cases."""
    out = []
    for src in sorted({source_group(c) for c, *_ in rows if c.calibration}):
        sel = [r for r in rows if r[0].calibration and source_group(r[0]) == src]
        groups = "/".join(sorted({c.group for c, *_ in sel}))
        ours = [abs(rel(p, c.value)) for c, p, *_ in sel]
        loso = [abs(rel(sp, c.value)) for c, *_, sp in sel if sp is not None]
        signed = [rel(sp, c.value) for c, *_, sp in sel if sp is not None]
        loso_s = (f"{100 * statistics.median(loso):.1f}% (signed {100 * statistics.median(signed):+.1f}%)" if loso
                  else "-")
        out.append((src, groups, len(sel), f"{100 * statistics.median(ours):.1f}%", loso_s))
    return out


#: the classes of runs issue #30 asks the calibration to cover, each a test on a case
CLASSES: list[tuple[str, object]] = [
    ("single consumer / workstation GPU", lambda c: c.gpus == 1 and c.gpu.id.startswith("rtx-")),
    ("pre-training on 1k-16k GPUs", lambda c: c.group == "pretrain" and c.gpus >= 1000),
    ("FP8 across nodes (> 8 GPUs)", lambda c: c.workload.precision == "fp8-mixed" and c.gpus > 8),
    ("MoE (expert parallel)", lambda c: c.arch.moe is not None),
    ("Blackwell (B200, GB200, GB300)", lambda c: c.gpu.generation == "blackwell"),
]


def by_class(rows: list[Row]) -> list[tuple[str, int, str, str, int, str]]:
    """(class, calibration runs, in-sample median / p90, leave-one-source-out median / p90, checks, checks' median
    / p90) for each class of CLASSES: a class with no calibration run is covered by checks only."""
    out = []
    for name, pick in CLASSES:
        sel = [r for r in rows if pick(r[0])]  # type: ignore[operator]
        cal = [r for r in sel if r[0].calibration]
        chk = [r for r in sel if not r[0].calibration]
        ours = [abs(rel(p, c.value)) for c, p, *_ in cal]
        loso = [abs(rel(sp, c.value)) for c, *_, sp in cal if sp is not None]
        checks = [abs(rel(p, c.value)) for c, p, *_ in chk]
        out.append((name, len(cal), _medp90(ours), _medp90(loso), len(chk), _medp90(checks)))
    return out


def explain(c: Case, sm) -> None:  # type: ignore[no-untyped-def]
    from speed_cases import _trainable

    from gpuplan.catalog.loader import load_activation_table
    from gpuplan.core.sizing.speed import estimate_training_speed

    r = estimate_training_speed(c.arch, c.params, c.workload, c.layout, c.gpus, c.gpu, sm, load_activation_table(),
                                trainable=_trainable(c), total_tokens=c.tokens, virtual_stages=c.virtual_stages,
                                expert_parallel=c.expert_parallel)
    t = r.time
    print(c.id, c.kind, c.gpus, c.gpu.id, c.layout, c.workload.model_dump(exclude_defaults=True))
    print(f"measured {fmt(c.value)} {c.metric}; predicted {fmt(predict(c, sm))}; "
          f"tok/s/gpu {t.tokens_per_s_per_gpu:,.0f}"
          f" mfu {t.mfu:.3f} eff {t.efficiency:.3f} step {t.step_seconds:.3f}s")
    print({k: round(v, 4) for k, v in t.step_breakdown_s.items()})
    for x in t.assumptions + c.assumptions:
        print(" -", x)


# LitGPT config_hub/finetune README (measurements.yaml, memory section): runtimes of LoRA and QLoRA runs of the
# same model, data (Alpaca2k), micro-batch and epochs on one A10G: the ratio isolates QLoRA's dequantization
LITGPT_PAIRS = [("llama-2-7b", 2, 32.82, 45.67), ("mistral-7b-v0.1", 2, 31.01, 44.75), ("falcon-7b", 1, 24.84, 50.85),
                ("gemma-2b", 2, 9.41, 12.91)]
# MLPerf Training v4.0-v5.1 Llama-2-70B LoRA, 8 GPUs, median raw minutes (research/hardware.md s10.3): H100 SXM
# 29.4 (11 submissions), H200 SXM 23.3 (12)
MLPERF_H200_VS_H100 = 29.4 / 23.3


def relative_checks(sm) -> list[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    """(check, measured, gpuplan, naive) for ratios where the unknowns of a run cancel."""
    from speed_cases import model_arch

    from gpuplan.catalog.hardware import builtin_catalog
    from gpuplan.catalog.loader import load_activation_table
    from gpuplan.core.sizing.lora import lora_params
    from gpuplan.core.sizing.params import count_params
    from gpuplan.core.sizing.speed import estimate_training_speed
    from gpuplan.schema.project import Layout, Workload

    gpus = builtin_catalog().gpus.rows
    table = load_activation_table()
    out = []
    for preset, mbs, lora_min, qlora_min in LITGPT_PAIRS:
        arch = model_arch(preset)
        p = count_params(arch)
        targets = ["query_key_value"] if preset == "falcon-7b" else ["q_proj", "v_proj"]
        ratios = []
        for seq in (256, 512):
            t = {}
            for task in ("lora", "qlora"):
                w = Workload(task=task, precision="bf16", micro_batch_size=mbs, sequence_length=seq,
                             lora={"rank": 8, "targets": targets})
                r = estimate_training_speed(arch, p, w, Layout(), 1, gpus["a10g-24gb"], sm, table,
                                            trainable=lora_params(arch, 8, targets))
                t[task] = r.time.step_seconds
            ratios.append(t["qlora"] / t["lora"])
        out.append((f"LitGPT {preset} QLoRA / LoRA runtime, 1x A10G", f"{qlora_min / lora_min:.2f}",
                    f"{ratios[1]:.2f}-{ratios[0]:.2f}", "1.00"))
    arch = model_arch("llama-2-70b")
    p = count_params(arch)
    tps = {}
    for gid in ("h100-sxm-80gb", "h200-sxm-141gb"):
        w = Workload(task="lora", precision="fp8-mixed", micro_batch_size=1, sequence_length=8192,
                     global_batch_size=8, lora={"rank": 16, "targets": ["q_proj", "v_proj", "k_proj", "o_proj"]})
        r = estimate_training_speed(arch, p, w, Layout(zero=3), 8, gpus[gid], sm, table,
                                    trainable=lora_params(arch, 16, ["q_proj", "v_proj", "k_proj", "o_proj"]))
        tps[gid] = r.time.tokens_per_s
    out.append(("MLPerf Llama-2-70B LoRA, 8x H200 / 8x H100 speed", f"{MLPERF_H200_VS_H100:.2f}",
                f"{tps['h200-sxm-141gb'] / tps['h100-sxm-80gb']:.2f}", "1.00"))
    return out


def held_out(cases: list[Case], sm, *, loo: bool = True) -> tuple[dict[str, float], dict[str, float]]:  # type: ignore[no-untyped-def]
    """Leave-one-out (unless not `loo`) and leave-one-source-out predictions of the calibration cases (case id ->
    value)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from fit_speed import fit_fold  # type: ignore[import-not-found]

    cal = [c for c in cases if c.calibration]
    loo = {c.id: predict(c, fit_fold([x for x in cal if x.id != c.id], sm)) for c in cal} if loo else {}
    loso: dict[str, float] = {}
    for src in sorted({source_group(c) for c in cal}):
        sm_s = fit_fold([x for x in cal if source_group(x) != src], sm)
        loso.update({c.id: predict(c, sm_s) for c in cal if source_group(c) == src})
    return loo, loso


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs/accuracy.md)")
    ap.add_argument("--loo", action="store_true", help="also leave-one-out: refit without each case")
    ap.add_argument("--loso", action="store_true", help="also leave-one-source-out alone: refit without each source")
    ap.add_argument("--explain", metavar="ID", help="print one case's step breakdown and assumptions")
    a = ap.parse_args()
    sm = load_speed_model()
    cases = load_cases()
    if a.explain:
        explain(next(c for c in cases if c.id == a.explain), sm)
        return
    loo_pred: dict[str, float] = {}
    loso_pred: dict[str, float] = {}
    if a.loo or a.loso:
        loo_pred, loso_pred = held_out(cases, sm, loo=a.loo)
    rows: list[Row] = []
    for c in cases:
        rows.append((c, predict(c, sm), naive(c), loo_pred.get(c.id), loso_pred.get(c.id)))
    head = ["case", "kind", "GPU", "metric", "measured", "gpuplan", "err", "naive 6ND@40%", "err"]
    table = []
    for c, p, n, *_ in rows:
        table.append([c.id + ("" if c.calibration else " †"), c.kind, f"{c.gpus}x {c.gpu.id}", c.metric,
                      fmt(c.value), fmt(p), f"{100 * rel(p, c.value):+.1f}%", fmt(n), f"{100 * rel(n, c.value):+.1f}%"])
    sums = summary(rows)
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in table:
            print("| " + " | ".join(r) + " |")
        print()
        print("| group | cases | gpuplan in-sample median / p90 | leave-one-out median / p90 | "
              "leave-one-source-out median / p90 | naive median / p90 |")
        print("|---|---|---|---|---|---|")
        for s in sums:
            print("| " + " | ".join(map(str, s)) + " |")
        if a.loo or a.loso:
            print("\nBy source (the calibration cases of each; leave-one-source-out: predicted by a model fitted "
                  "without that source):\n")
            print("| source | group | cases | in-sample median | leave-one-source-out median |")
            print("|---|---|---|---|---|")
            for s in by_source(rows):
                print("| " + " | ".join(map(str, s)) + " |")
            print("\nBy class (the classes of issue #30; checks are runs not calibrated on, † above):\n")
            print("| class | calibration runs | in-sample median / p90 | leave-one-source-out median / p90 | checks | "
                  "checks median / p90 |")
            print("|---|---|---|---|---|---|")
            for k in by_class(rows):
                print("| " + " | ".join(map(str, k)) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *table)]
        print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        for r in table:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
        print()
        print(f"{'group':22} {'cases':>5}  {'in-sample med/p90':>18}  {'LOO med/p90':>18}  {'LOSO med/p90':>18}  "
              f"{'naive med/p90':>18}")
        for name, n, o, lo, so, nv in sums:
            print(f"{name:22} {n:>5}  {o:>18}  {lo:>18}  {so:>18}  {nv:>18}")
        if a.loo or a.loso:
            print()
            for src, grp, n, o, so in by_source(rows):
                print(f"  {src:24} {grp:18} {n:>3}  in-sample {o:>7}  LOSO {so}")
        print()
        for name, n, o, so, nc, ck in by_class(rows):
            print(f"  {name:34} {n:>3} runs  in-sample {o:>15}  LOSO {so:>15}  {nc:>3} checks {ck}")
    ratios = relative_checks(sm)
    if a.markdown:
        print("\nRatios where a run's unknowns cancel (gpuplan's LitGPT range: 512- to 256-token samples, the "
              "lengths LitGPT pads Alpaca2k batches to lie between):\n")
        print("| check | measured | gpuplan | naive |")
        print("|---|---|---|---|")
        for r in ratios:
            print("| " + " | ".join(r) + " |")
    else:
        print()
        for r in ratios:
            print(f"{r[0]:52} measured {r[1]:>6}  gpuplan {r[2]:>10}  naive {r[3]}")
    print("\n† not used for calibration (a check only).")


if __name__ == "__main__":
    main()
