"""gpuplan's GRPO step time against published runs (benchmarks/rl_cases.yaml, issue #31): each row's error, the
median absolute error, and leaving each source out the median of the other sources' rows. Nothing is fitted to
these rows (no constant of gpuplan is tuned on them), so leaving a source out only drops its rows.

    python benchmarks/rl_accuracy.py            # the table, in the terminal
    python benchmarks/rl_accuracy.py --markdown # the table as docs/accuracy.md shows it
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import yaml

from gpuplan.api import estimate
from gpuplan.catalog.hardware import builtin_catalog

CASES = Path(__file__).with_name("rl_cases.yaml")


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    return list(yaml.safe_load(path.read_text())["cases"])


def project_of(case: dict[str, Any]) -> dict[str, Any]:
    """The gpuplan project a published row describes."""
    return {"name": case["id"], "model": {"preset": case["model"]},
            "workload": {"task": "grpo", "grpo": case["grpo"], "precision": "bf16-mixed", "micro_batch_size": 1,
                         "gradient_checkpointing": case.get("checkpointing", False)},
            "hardware": {"gpu": case["gpu"], "gpus": case["gpus"], "layout": case["layout"]}}


def predict(case: dict[str, Any], catalog: Any = None) -> dict[str, float]:
    """gpuplan's step seconds for `case`, with the rollout's and the training pass's parts."""
    r = estimate(project_of(case), catalog=catalog or builtin_catalog())
    assert r.time is not None
    parts = r.time.step_breakdown_s
    rollout = parts.get("rollout_prefill", 0.0) + parts.get("rollout_decode", 0.0)
    return {"step_s": r.time.step_seconds, "rollout_s": rollout, "log_probs_s": parts.get("log_probs", 0.0),
            "train_s": r.time.step_seconds - rollout - parts.get("log_probs", 0.0),
            "fits": float(bool(r.memory.fits))}


def rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    catalog = builtin_catalog()
    out = []
    for c in cases:
        p = predict(c, catalog)
        measured = c["measured"]["step_s"]
        out.append({**c, "predicted": p, "error": p["step_s"] / measured - 1})
    return out


def loso(done: list[dict[str, Any]]) -> dict[str, float]:
    """Leaving each source out: the median absolute error of the other sources' rows."""
    sources = sorted({r["source"] for r in done})
    return {s: statistics.median(abs(r["error"]) for r in done if r["source"] != s) for s in sources}


def source_name(url: str) -> str:
    """owner/repo@commit of a source URL pinned to a commit."""
    parts = url.split("/")
    return f"{parts[3]}/{parts[4]}@{url.split('/blob/')[1][:7]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    done = rows(load_cases())
    if args.markdown:
        print("| row | framework | GPUs | sequences x tokens | measured s | gpuplan s (rollout / log-probs / train) "
              "| error |")
        print("|---|---|---|---|---|---|---|")
    for r in done:
        g, p = r["grpo"], r["predicted"]
        n, cap = g["prompts_per_step"] * g["group_size"], g["prompt_length"] + g["response_length"]
        mean = g["prompt_length"] + g.get("mean_response_length", g["response_length"])
        seqs = f"{n:,} x {mean:,} mean / {cap:,} cap" if r["lengths"] == "mean" else f"{n:,} x {cap:,} (cap)"
        if args.markdown:
            print(f"| {r['id']} | {r['framework']} | {r['gpus']} x {r['gpu']} | {seqs} "
                  f"| {r['measured']['step_s']:,.1f} "
                  f"| {p['step_s']:,.0f} ({p['rollout_s']:,.0f} / {p['log_probs_s']:,.0f} / {p['train_s']:,.0f}) "
                  f"| {r['error']:+.0%} |")
        else:
            print(f"{r['id']:<40} {r['gpus']:>4} x {r['gpu']:<14} {seqs:<26} measured {r['measured']['step_s']:>7.1f} s"
                  f"  gpuplan {p['step_s']:>7.1f} s (rollout {p['rollout_s']:.0f}, log-probs {p['log_probs_s']:.0f}, "
                  f"train {p['train_s']:.0f})  {r['error']:+.0%}")
    med = statistics.median(abs(r["error"]) for r in done)
    by = loso(done)
    print(f"\n{len(done)} rows, {len(by)} sources, {len({r['framework'] for r in done})} frameworks: median |error| "
          f"{med:.0%}; leaving each source out (median of the others' rows): "
          + ", ".join(f"{source_name(s)} {v:.0%}" for s, v in by.items()))
    for kind in ("mean", "cap"):
        sub = [abs(r["error"]) for r in done if r["lengths"] == kind]
        if sub:
            print(f"  rows given the {kind} length: {len(sub)}, median |error| {statistics.median(sub):.0%}")


if __name__ == "__main__":
    main()
