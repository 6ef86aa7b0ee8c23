"""Search speed of `gpuplan plan`: every built-in example against the built-in catalog and against 10x and 100x
synthetic ones (each GPU row copied under new ids, platforms alike), as configurations per second and
microseconds per configuration (stats.candidates_evaluated / stats.search_seconds), to show the search stays
fast and grows linearly with the catalog.

The built-in catalog's figure is the median over `--rounds` passes over all the examples, `--repeat` runs of each
per pass: a shared machine slows down for stretches of several seconds, which a pass that runs one example
after another puts on one row alone.

Run: python benchmarks/search_latency.py [--markdown] [--repeat 5] [--rounds 3] [--large-repeat 1 (0: built-in alone)]
"""

from __future__ import annotations

import argparse
import statistics

from gpuplan.api import PLAN_TOP, plan
from gpuplan.catalog.hardware import Catalog, Origin, Table, builtin_catalog
from gpuplan.catalog.loader import example_names, example_path
from gpuplan.errors import InfeasibleError
from gpuplan.schema.hardware import Gpu


def synthetic(factor: int) -> Catalog:
    """The built-in catalog with each GPU `factor` times (copies get new ids and no aliases); platforms that name
    compatible GPUs name the copies too."""
    base = builtin_catalog()
    rows: dict[str, Gpu] = {}
    origins: dict[str, Origin] = {}
    copies: dict[str, list[str]] = {}
    for gid, g in base.gpus.rows.items():
        for k in range(factor):
            nid = gid if k == 0 else f"{gid}-syn{k}"
            rows[nid] = g if k == 0 else g.model_copy(update={"id": nid, "aliases": [], "name": f"{g.name} #{k}"})
            origins[nid] = Origin(file="synthetic")
            copies.setdefault(gid, []).append(nid)
    platforms = {pid: (p if not p.compatible_gpu_ids else p.model_copy(update={
        "compatible_gpu_ids": [c for g in p.compatible_gpu_ids for c in copies.get(g, [g])]}))
        for pid, p in base.platforms.rows.items()}
    return base.model_copy(update={
        "gpus": Table[Gpu](kind="gpu", rows=rows, origins=origins),
        "platforms": base.platforms.model_copy(update={"rows": platforms}),
    })


def run(name: str, catalog: Catalog, repeat: int) -> tuple[float, int, str]:
    """(median stats.search_seconds, stats.candidates_evaluated, outcome) of `gpuplan plan` on one example, with
    the candidates the CLI shows by default."""
    times, evaluated, outcome = run_all(name, catalog, repeat)
    return statistics.median(times), evaluated, outcome


def run_all(name: str, catalog: Catalog, repeat: int) -> tuple[list[float], int, str]:
    """Each run's stats.search_seconds (nan: infeasible), stats.candidates_evaluated and the outcome."""
    times = []
    evaluated = 0
    outcome = ""
    for _ in range(repeat):
        try:
            res = plan(example_path(name), catalog=catalog, top=PLAN_TOP)
            evaluated = res.stats.candidates_evaluated
            times.append(res.stats.search_seconds)
            outcome = f"{len(res.candidates)} shown"
        except InfeasibleError:
            outcome = "infeasible"
            times.append(float("nan"))
    return times, evaluated, outcome


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--repeat", type=int, default=5, help="runs per example and pass on the built-in catalog")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the examples on the built-in catalog (the "
                    "figure is the median of all their runs)")
    ap.add_argument("--large-repeat", type=int, default=1, help="runs per example on the 10x and 100x catalogs "
                    "(0: the built-in catalog alone)")
    a = ap.parse_args()
    if a.repeat < 1 or a.rounds < 1 or a.large_repeat < 0:
        ap.error("--repeat and --rounds take 1 or more; --large-repeat 0 (no synthetic catalogs) or more")
    cats = {"built-in": (builtin_catalog(), a.repeat)}
    if a.large_repeat:
        cats |= {"10x": (synthetic(10), a.large_repeat), "100x": (synthetic(100), a.large_repeat)}
    plan(example_path(example_names()[0]))  # warm the caches (data files, presets)
    builtin: dict[str, tuple[list[float], int, str]] = {}
    for _ in range(a.rounds):  # the built-in catalog, in passes over all the examples
        for name in example_names():
            times, ev, outcome = run_all(name, cats["built-in"][0], a.repeat)
            builtin[name] = (builtin.get(name, ([], 0, ""))[0] + times, ev, outcome)
    rows, rates, growth = [], [], []
    for name in example_names():
        r = [name]
        secs = {}
        for label, (cat, rep) in cats.items():
            if label == "built-in":
                times, ev, outcome = builtin[name]
                sec = statistics.median(times)
            else:
                sec, ev, outcome = run(name, cat, rep)
            secs[label] = (sec, ev)
            if outcome == "infeasible":  # no stats to count: the row says so and the median leaves it out
                r += ["infeasible", "-", "-", "-"]
                continue
            r += [f"{ev:,}", f"{sec * 1e3:,.1f}", f"{ev / sec:,.0f}", f"{sec / ev * 1e6:,.1f}"]
            if label == "built-in":
                rates.append(ev / sec)
        if a.large_repeat:
            (s10, e10), (s100, e100) = secs["10x"], secs["100x"]
            if e10 and e100:
                growth.append((s100 / s10, e100 / e10))
                r += [f"{s100 / s10:,.1f}x / {e100 / e10:,.1f}x"]
            else:
                r += ["-"]
        rows.append(r)
    head = ["example"] + [f"{lab} {h}" for lab in cats for h in ("configs", "ms", "configs/s", "us/config")] + \
        (["100x vs 10x: time / configs"] if a.large_repeat else [])
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        for r in rows:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
    print(f"\nmedian over the examples, built-in catalog: {statistics.median(rates):,.0f} configurations per second")
    if growth:
        print("time from the 10x to the 100x catalog, per configuration counted: "
              + ", ".join(f"{t / c:.2f}" for t, c in growth) + " (1.00 = linear)")


if __name__ == "__main__":
    main()
