"""gpuplan.collector: Python's cyclic collector paused around a computation and restored after it, also when several
run at once (the web app's threads) or one fails; the `gpuplan` command's policy, with the objects of a short
command frozen at exit; and a plan computed with none."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading

import pytest

from gpuplan.api import plan
from gpuplan.catalog.loader import example_path
from gpuplan.collector import LONG_COMMANDS, collector_paused, command_of, for_command


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_a_pause_restores_the_collector_as_it_was() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer computation still runs
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()  # it was off before: it stays off


def test_a_failing_computation_still_resumes_the_collector() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_the_collector_resumes_when_the_last_of_several_threads_ends() -> None:
    inside, release = threading.Barrier(3), [threading.Event(), threading.Event()]

    def work(k: int) -> None:
        with collector_paused():
            inside.wait()
            release[k].wait()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    release[0].set()
    threads[0].join()
    assert not gc.isenabled()  # the other one still computes
    release[1].set()
    threads[1].join()
    assert gc.isenabled()


def test_the_command_keeps_the_collector_only_for_long_commands() -> None:
    for_command("plan")
    assert not gc.isenabled()
    for name in sorted(LONG_COMMANDS):
        gc.disable()
        for_command(name)
        assert gc.isenabled()
    for_command(None)  # `gpuplan` alone: its help
    assert not gc.isenabled()


def test_a_plan_computes_without_collections() -> None:
    plan(example_path("llama2-7b-pretrain"))  # warm: the schema and the data files
    started: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        plan(example_path("llama2-7b-pretrain"))
        inside = list(started)
        started.clear()
        junk = [[object()] for _ in range(50_000)]  # the collector is back: enough young objects trigger it
        del junk
    finally:
        gc.callbacks.remove(seen)
    # the search, paused, would start about 25 collections; loading the project and the report around it, not
    # paused, at most a couple
    assert len(inside) <= 2, inside
    assert started, "the collector did not resume after the plan"


#: a process that sets a command's policy, then leaves a reference cycle whose finalizer says when it is collected
_EXIT = """
import gc, sys
from gpuplan.collector import for_command
for name in sys.argv[1:]:
    for_command(name)
class Cycle:
    def __del__(self):
        print("collected", flush=True)
c = Cycle()
c.self = c
del c
"""


@pytest.mark.parametrize(("commands", "collected"), [(["plan"], False), (["serve"], True), (["plan", "serve"], True),
                                                     (["serve", "plan"], False)])
def test_a_short_command_exits_without_the_last_collection(commands: list[str], collected: bool) -> None:
    # the interpreter's last collection finalizes the cycle, unless the (last) command froze its objects at exit
    out = subprocess.run([sys.executable, "-c", _EXIT, *commands], capture_output=True, text=True, check=True).stdout
    assert ("collected" in out) is collected, out


#: `gpuplan --help` run through the entry point, counting the collections that start on the way
_ENTRY = """
import gc, sys
started = []
gc.callbacks.append(lambda phase, info: started.append(info["generation"]) if phase == "start" else None)
sys.argv = ["gpuplan", "--help"]
from gpuplan.__main__ import main
started.clear()  # importing the entry point's own module (the collector's) may start some
try:
    main()
except SystemExit:
    pass
print("collections", len(started))
"""


def test_the_entry_point_sets_the_policy_before_the_commands_are_imported() -> None:
    # typer, rich and the command modules allocate enough on import to start several collections, unless the
    # collector is already off when they are imported
    out = subprocess.run([sys.executable, "-c", _ENTRY], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "collections 0", out[-300:]


def test_the_command_is_the_first_word_that_is_not_an_option() -> None:
    assert command_of(["--debug", "plan", "--example", "x"]) == "plan"
    assert command_of(["--help"]) is None and command_of([]) is None
