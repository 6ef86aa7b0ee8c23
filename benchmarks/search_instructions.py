"""Search cost in CPU instructions, counted by valgrind's callgrind: deterministic where wall-clock time is not (on
a shared 2-core machine `search_latency.py`'s figures move by 30 % from run to run). For each example, the
instructions of one warm `plan` search (`core/search/explore.search` run three times in one `plan` against once,
halved), per configuration counted (`stats.candidates_evaluated`), and what `gpuplan plan --example
llama3-8b-qlora` and `gpuplan --help` cost in all.

Needs valgrind on PATH; each example takes about a minute under it. Compare two trees with --src:

With --plan, a whole warm `api.plan()` (three against one, halved) in place of the search. With --no-gc, the
cyclic garbage collector is off in the counted process: `api.plan` pauses it while it plans and the collections it
owes run after, at points that move with every allocation the process made before (a change that saves work can
count several million instructions more because a collection of older objects falls in the counted plans, or
less); off, the count is the plan's own work alone.

Run: python benchmarks/search_instructions.py [--src PATH/TO/src] [--cli] [--plan] [EXAMPLE ...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
SEARCH = """
from gpuplan.api import PLAN_TOP, plan
from gpuplan.catalog.loader import example_path
import gpuplan.core.advise as advise
search = advise.search
def repeated(*a, **k):
    for _ in range({n} - 1):
        search(*a, **k)
    return search(*a, **k)
plan(example_path({example!r}), top=PLAN_TOP)
advise.search = repeated
print(plan(example_path({example!r}), top=PLAN_TOP).stats.candidates_evaluated)
"""
#: a whole warm `plan()` (the API call: the project read, the search, deployments, checklist, result): run `n` times
PLAN = """
from gpuplan.api import PLAN_TOP, plan
from gpuplan.catalog.loader import example_path
plan(example_path({example!r}), top=PLAN_TOP)
for _ in range({n}):
    result = plan(example_path({example!r}), top=PLAN_TOP)
print(result.stats.candidates_evaluated)
"""


def env(src: Path) -> dict[str, str]:
    # bytecode cached (as an installed package has it), one hash seed (dict and set costs do not move)
    return dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="", PYTHONHASHSEED="0",
                PYTHONPYCACHEPREFIX=str(Path("/tmp") / f"gpuplan-pyc-{hashlib.md5(str(src).encode()).hexdigest()[:8]}"))


def instructions(args: list[str], src: Path, no_gc: bool = False) -> tuple[int, str]:
    """(instructions, stdout) of `python ARGS` under callgrind."""
    if no_gc and args[:1] == ["-c"]:
        args = ["-c", "import gc; gc.disable()\n" + args[1]]
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *args],
                       env=env(src), capture_output=True, text=True, check=True)
    line = next(ln for ln in p.stderr.splitlines() if "Collected" in ln)
    return int(line.split()[-1]), p.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", type=Path, default=SRC, help="the src folder of the tree to measure")
    ap.add_argument("--cli", action="store_true", help="also count `plan --example llama3-8b-qlora` and `--help`")
    ap.add_argument("--plan", action="store_true", help="count a whole warm `api.plan()` of each example instead of "
                                                         "its search")
    ap.add_argument("--no-gc", action="store_true", help="count with the cyclic garbage collector off (the plan's "
                                                           "own work, without the collections it leaves to run)")
    ap.add_argument("examples", nargs="*", default=["llama2-7b-pretrain", "llama3-70b-lora",
                                                    "llama3-8b-full-finetune", "llama3-8b-qlora", "vit-imagenet"])
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on PATH (apt install valgrind)")
    for warm in (["-m", "gpuplan", "--help"], ["-m", "gpuplan", "plan", "--example", "llama3-8b-qlora"]):
        subprocess.run([sys.executable, *warm], env=env(a.src), check=True, capture_output=True)  # compile the
        # bytecode of every module the counts import once, outside them
    what = "plan()" if a.plan else "search"
    print(f"{'example':26s} {'configs':>8s} {'M instructions / ' + what:>24s} {'k instructions / config':>24s}")
    template = PLAN if a.plan else SEARCH
    for ex in a.examples:
        once, out = instructions(["-c", template.format(n=1, example=ex)], a.src, a.no_gc)
        thrice, _ = instructions(["-c", template.format(n=3, example=ex)], a.src, a.no_gc)
        per, configs = (thrice - once) / 2, int(out.split()[-1])
        print(f"{ex:26s} {configs:8,d} {per / 1e6:24.1f} {per / configs / 1e3:24.1f}")
    if a.cli:
        for cmd in (["plan", "--example", "llama3-8b-qlora"], ["--help"]):
            n, _ = instructions(["-m", "gpuplan", *cmd], a.src)
            print(f"gpuplan {' '.join(cmd)}: {n / 1e6:,.0f} M instructions")


if __name__ == "__main__":
    main()
