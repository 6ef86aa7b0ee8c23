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
    from gpuplan.core.sizing.speed import estimate_training_speed

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


# LitGPT config_hub/finetune README (measurements.yaml, memory section): runtimes of LoRA and QLoRA runs of the
# same model, data (Alpaca2k), micro-batch and epochs on one A10G: the ratio isolates QLoRA's dequantization
LITGPT_PAIRS = [("llama-2-7b", 2, 32.82, 45.67), ("mistral-7b-v0.1", 2, 31.01, 44.75), ("falcon-7b", 1, 24.84, 50.85),
                ("gemma-2b", 2, 9.41, 12.91)]
# MLPerf Training v4.0-v5.1 Llama-2-70B LoRA, 8 GPUs, median raw minutes (research/hardware.md s10.3): H100 SXM
# 29.4 (11 submissions), H200 SXM 23.3 (12)
MLPERF_H200_VS_H100 = 29.4 / 23.3


def relative_checks(sm) -> list[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    """(check, measured, gpuplan, naive) for ratios where the unknowns of a run cancel."""
    from gpuplan.catalog.hardware import builtin_catalog
    from gpuplan.catalog.loader import load_activation_table
    from gpuplan.core.sizing.lora import lora_params
    from gpuplan.core.sizing.speed import estimate_training_speed
    from gpuplan.schema.project import Layout, Workload

    from speed_cases import model_arch

    from gpuplan.core.sizing.params import count_params

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
