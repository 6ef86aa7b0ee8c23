"""Python's cyclic garbage collector around gpuplan's own computations, which allocate many small objects and keep
them to their end (the search's configurations, timed steps and picks; pydantic's schemas as the modules are
imported): the collector walks them again at every threshold and frees almost nothing (reference counting frees
what is dropped). Measured: a fifth to a quarter of the larger searches' time, and about 4 % of a `gpuplan plan`
command (benchmarks/search_latency.py, benchmarks/search_instructions.py); peak memory unchanged.

A command that computes and exits also freezes its objects as it exits (`gc.freeze`), so that the interpreter's
last collection does not walk every module, schema and result to free memory the process is about to give back:
3 % of `gpuplan plan`. What this skips is the finalizers of objects held only in reference cycles; gpuplan's own
files are written and closed by then, and the standard streams are flushed by the interpreter all the same."""

from __future__ import annotations

import atexit
import contextlib
import gc
import threading
from collections.abc import Iterator

_paused = 0  # computations running with the collector paused, and whether it was enabled before the first
_resume = False
_lock = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector paused for the block; it resumes when the last block running in the process (the web app
    runs several) ends, if it was enabled before the first."""
    global _paused, _resume
    with _lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()


#: the commands that run long or run other code (a web server, a model's training step): the collector stays on
LONG_COMMANDS = frozenset({"serve", "trace"})


def command_of(args: list[str]) -> str | None:
    """The command a `gpuplan` command line runs (its first word that is not an option); None for `gpuplan` alone
    or its options (`--help`)."""
    return next((a for a in args if not a.startswith("-")), None)


def for_command(name: str | None) -> None:
    """The `gpuplan` command's policy, set as it starts: off for a command that computes and exits (and its
    objects frozen at exit), on for the LONG_COMMANDS."""
    atexit.unregister(gc.freeze)  # the policy of the last call holds, registered at most once
    if name in LONG_COMMANDS:
        gc.enable()
    else:
        gc.disable()
        atexit.register(gc.freeze)


__all__ = ["LONG_COMMANDS", "collector_paused", "command_of", "for_command"]
