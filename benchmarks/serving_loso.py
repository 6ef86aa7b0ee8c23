"""The two serving constants calibrated on the published rows (data/serving.toml: `decode_kernel_s`,
`attention_bandwidth_ratio`), fitted by a grid search, with leave-one-source-out figures: each source's rows
predicted with the constants fitted on the other sources' rows only. benchmarks/serving_accuracy.py prints both
beside the in-sample figures (and `--fit` prints the fitted values for data/serving.toml).

The loss is the mean over the metrics of the median absolute error (output tokens/s, ITL, TTFT, e2e), each metric
over the rows that give it; a source is a row's `source` URL (the vLLM CI builds are three sources, TensorRT-LLM
0.6.1's document one).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gpuplan.catalog.serving as catalog_serving

#: the grid searched: seconds per decode kernel (CUDA-graph replay floor) and the attention's bandwidth ratio
GRID = {
    "decode_kernel_s": [2.5e-6, 3.0e-6, 3.5e-6, 4.0e-6, 4.5e-6, 5.0e-6, 5.5e-6, 6.465e-6],
    "attention_bandwidth_ratio": [0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0],
}
FITTED_METRICS = ("output_tokens_per_s", "itl_s", "ttft_s", "e2e_s")


@contextmanager
def engine_values(values: dict[str, float]) -> Iterator[None]:
    """Run the API with the engine's constants replaced by `values` (gpuplan.api loads them per call)."""
    base = catalog_serving.load_serving()
    data = base.model_copy(update={"engine": base.engine.model_copy(update=values)})
    original = catalog_serving.load_serving
    catalog_serving.load_serving = lambda: data  # type: ignore[assignment]
    try:
        yield
    finally:
        catalog_serving.load_serving = original  # type: ignore[assignment]


def errors_of(rows: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    """(source, metric, signed error) of every compared metric of `rows`."""
    return [(r["source"], metric, m["error"]) for r in rows for metric, m in r.get("metrics", {}).items()
            if metric in FITTED_METRICS and m["error"] is not None]


def loss(errs: list[tuple[str, str, float]], leave_out: str | None = None) -> float:
    per_metric = {}
    for source, metric, e in errs:
        if source != leave_out:
            per_metric.setdefault(metric, []).append(abs(e))
    return statistics.mean(statistics.median(v) for v in per_metric.values()) if per_metric else float("inf")


def grid_points() -> list[dict[str, float]]:
    keys = list(GRID)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(GRID[k] for k in keys))]


def calibrate(cases: list[dict[str, Any]], evaluate: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Every grid point's rows; the in-sample fit; and per source the fit without it and its rows at that fit."""
    runs = []
    for point in grid_points():
        with engine_values(point):
            rows = [evaluate(c) for c in cases]
        runs.append((point, rows, errors_of(rows)))
    best = min(runs, key=lambda run: loss(run[2]))
    sources = sorted({c["source"] for c in cases})
    held_out: list[dict[str, Any]] = []
    fits: dict[str, dict[str, float]] = {}
    for source in sources:
        point, rows, _ = min(runs, key=lambda run: loss(run[2], leave_out=source))
        fits[source] = point
        held_out += [r for r in rows if r["source"] == source]
    order = {c["id"]: i for i, c in enumerate(cases)}
    held_out.sort(key=lambda r: order[r["id"]])
    return {"fit": best[0], "rows": best[1], "loso_rows": held_out, "loso_fits": fits}


def fit_lines(cal: dict[str, Any]) -> list[str]:
    out = ["fitted in-sample: " + ", ".join(f"{k} = {v:g}" for k, v in cal["fit"].items())]
    for source, point in cal["loso_fits"].items():
        out.append(f"  without {source}: " + ", ".join(f"{k} = {v:g}" for k, v in point.items()))
    return out


__all__ = ["GRID", "calibrate", "engine_values", "fit_lines", "grid_points", "loss"]
