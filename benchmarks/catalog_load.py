"""How long a large user catalog takes to load (`--catalog FILE`): the built-in GPU rows copied `--factor` times under
new ids (100: 3,300 rows, in two files of at most 2,000 rows each, the per-file limit), written as JSON, TOML and
YAML, each loaded `--repeat` times with `gpuplan.catalog.hardware.load_catalog` (reading, parsing, validating,
merging with the built-in rows). Prints the fastest and the median time per format.

Run: python benchmarks/catalog_load.py [--factor 100] [--repeat 5] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import rtoml
import yaml

from gpuplan.catalog.hardware import builtin_catalog, load_catalog
from gpuplan.catalog.reading import MAX_ROWS


def rows(factor: int) -> list[dict[str, object]]:
    """The built-in GPUs, each `factor` times under new ids, as a user's file would give them."""
    out = []
    for g in builtin_catalog().gpus.rows.values():
        row = g.model_dump(mode="json", exclude_none=True, exclude={"price": {"amount", "currency"}})
        out += [{**row, "id": f"{g.id}-u{k}", "aliases": [], "name": f"{g.name} #{k}"} for k in range(factor)]
    return out


def write(folder: Path, data: list[dict[str, object]]) -> dict[str, list[Path]]:
    """The rows in files of at most MAX_ROWS rows, in each format."""
    parts = [data[i:i + MAX_ROWS] for i in range(0, len(data), MAX_ROWS)]
    dumps = {"json": json.dumps, "toml": rtoml.dumps, "yaml": lambda d: yaml.safe_dump(d, sort_keys=False)}
    out: dict[str, list[Path]] = {}
    for kind, dump in dumps.items():
        for i, part in enumerate(parts):
            path = folder / f"catalog-{i}.{kind}"
            path.write_text(dump({"schema_version": 1, "gpu": part}), encoding="utf-8")
            out.setdefault(kind, []).append(path)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--factor", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    data = rows(a.factor)
    with tempfile.TemporaryDirectory() as tmp:
        files = write(Path(tmp), data)
        table = []
        for kind, paths in files.items():
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                cat = load_catalog(paths)
                times.append(time.perf_counter() - t0)
            assert len(cat.gpus.rows) >= len(data)
            size = sum(p.stat().st_size for p in paths)
            table.append((kind, len(paths), size, min(times), statistics.median(times)))
    head = ("format", "files", "MB", "fastest s", "median s")
    fmt = "| {} | {} | {:.1f} | {:.3f} | {:.3f} |" if a.markdown else "{:<6} {:>5} {:>6.1f} {:>10.3f} {:>9.3f}"
    print(f"{len(data):,} GPU rows ({a.factor}x the built-in catalog)")
    print("| " + " | ".join(head) + " |\n|---|---|---|---|---|" if a.markdown
          else "{:<6} {:>5} {:>6} {:>10} {:>9}".format(*head))
    for kind, n, size, best, median in table:
        print(fmt.format(kind, n, size / 1e6, best, median))


if __name__ == "__main__":
    main()
