"""CPU time of the `gpuplan` command as a user runs it, next to the machine's speed at that moment.

Runs `gpuplan plan --example llama3-8b-qlora` and `gpuplan --help` (the targets of issue 12: 0.4 s and 0.2 s of
CPU, user plus system) and a fixed pure-Python loop, in turn, `--runs` times each, and prints the median and the
fastest of each. A shared machine slows down by a third or more for stretches of minutes; the loop moves with it,
so a row whose loop is slow is a slow stretch, not a slower gpuplan. Instruction counts, which do not move, are
`search_instructions.py --cli`.

By default it runs the `gpuplan` script beside this Python (an installed gpuplan, bytecode compiled at install);
--src runs `python -m gpuplan` from another tree instead, with its bytecode cached outside it.

Run: python benchmarks/cli_time.py [--runs 11] [--batches 1] [--pause 0 (seconds between batches)] [--src PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

LOOP = "s = 0\nfor i in range(3_000_000):\n    s += i * i"


def cpu_seconds(cmd: list[str], env: dict[str, str]) -> float:
    """User plus system CPU seconds of one run of `cmd` (its output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def commands(src: Path | None) -> tuple[dict[str, list[str]], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    if src is None:
        gpuplan = [str(Path(sys.executable).with_name("gpuplan"))]
    else:
        gpuplan = [sys.executable, "-m", "gpuplan"]
        cache = Path("/tmp") / f"gpuplan-pyc-{hashlib.md5(str(src).encode()).hexdigest()[:8]}"
        env.update(PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(cache))
    cmds = {"plan --example llama3-8b-qlora": [*gpuplan, "plan", "--example", "llama3-8b-qlora"],
            "--help": [*gpuplan, "--help"], "the loop": [sys.executable, "-c", LOOP]}
    return cmds, env


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11, help="runs of each command in a batch")
    ap.add_argument("--batches", type=int, default=1)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds between batches")
    ap.add_argument("--src", type=Path, help="the src folder of a tree to run instead of the installed gpuplan")
    a = ap.parse_args()
    cmds, env = commands(a.src)
    if a.src is None and not Path(cmds["--help"][0]).exists():
        sys.exit(f"no gpuplan script beside {sys.executable}: install gpuplan in this environment, or give --src")
    for cmd in cmds.values():
        cpu_seconds(cmd, env)  # the bytecode and the page cache, outside the figures
    print("time      " + "  ".join(f"{name + ' (median / fastest, s)':>40s}" for name in cmds))
    for batch in range(a.batches):
        if batch:
            time.sleep(a.pause)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(a.runs):
            for name, cmd in cmds.items():  # in turn, so that a slow stretch reaches all three
                times[name].append(cpu_seconds(cmd, env))
        cells = (f"{sorted(t)[len(t) // 2]:.3f} / {min(t):.3f}" for t in times.values())
        print(time.strftime("%H:%M:%S") + "  " + "  ".join(f"{c:>40s}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
