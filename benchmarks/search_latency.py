"""Search latency of `gpuplan plan`: every built-in example against the built-in catalog and against a 10x
synthetic one (each GPU row copied ten times under new ids, platforms and prices alike), to show the search
stays well under a second and grows linearly with the catalog.

Run: python benchmarks/search_latency.py [--markdown] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpuplan.api import plan
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
    times = []
    evaluated = 0
    outcome = ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            res = plan(example_path(name), catalog=catalog)
            evaluated = res.stats.candidates_evaluated
            outcome = f"{len(res.candidates)} candidates"
        except InfeasibleError:
            outcome = "infeasible"
        times.append(time.perf_counter() - t0)
    return statistics.median(times), evaluated, outcome


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cats = {"built-in": builtin_catalog(), "10x synthetic": synthetic(10)}
    plan(example_path(example_names()[0]))  # warm the caches (data files, presets)
    rows = []
    for name in example_names():
        r = [name]
        for label, cat in cats.items():
            sec, ev, out = run(name, cat, a.repeat)
            r += [f"{len(cat.gpus.rows)}", f"{sec:.3f} s", f"{ev:,}", out]
        rows.append(r)
    head = ["example", "GPUs", "built-in", "configs", "result", "GPUs", "10x", "configs", "result"]
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


if __name__ == "__main__":
    main()
