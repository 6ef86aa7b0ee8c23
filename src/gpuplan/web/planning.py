"""Plans for the web API: each within a time budget, and the last ones kept, keyed on everything a plan is
computed from (the project, the options, the content of the --catalog and --prices files, and the date the plan is
made for, which ages prices), so an edited price file is never answered with a plan computed from its old content."""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gpuplan import api
from gpuplan.catalog.hardware import Catalog, load_catalog
from gpuplan.clock import plan_date
from gpuplan.errors import CatalogError
from gpuplan.schema.plan import PlanResult
from gpuplan.web.errors import WebError

T = TypeVar("T")
#: seconds one plan may take before the request is answered 503 and the computation stopped
PLAN_BUDGET_S = 30.0
#: plans kept in memory
CACHE_SIZE = 64


class _Stopped(BaseException):
    """Raised inside a plan's thread when its budget is spent (a BaseException, so that no `except Exception` in
    the computation swallows it)."""


def within_budget(fn: Callable[[], T], budget_s: float) -> T:
    """fn() in a thread of its own; past `budget_s` seconds the thread is stopped (an exception raised in it at
    its next Python instruction, so the CPU is freed) and a 503 is raised."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=run, name="gpuplan-plan", daemon=True)
    thread.start()
    if not done.wait(budget_s):
        if thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Stopped))
        raise WebError(503, "timeout", f"the plan took more than the server's limit of {budget_s:g} s per request; "
                                       "a smaller search is faster: fewer constraints.gpus, max_gpus_per_server, "
                                       "max_servers, or a smaller ?top=")
    if "error" in box:
        raise box["error"]
    return box["value"]


def files_digest(paths: Sequence[Path]) -> str:
    """A digest of the files' content (a file that cannot be read any more is the server's error)."""
    h = hashlib.sha256()
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CatalogError(str(path), f"cannot be read any more: {exc.strerror or exc}") from None
        h.update(str(path).encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


class Planner:
    """The server's plans: the catalog is loaded again when its files change; prices are read by each plan."""

    def __init__(self, catalog_files: Sequence[str | Path] = (), price_files: Sequence[str | Path] = (),
                 budget_s: float = PLAN_BUDGET_S, cache_size: int = CACHE_SIZE) -> None:
        from gpuplan.catalog.prices import load_prices

        self.catalog_files = [Path(p) for p in catalog_files]
        self.price_files = [Path(p) for p in price_files]
        self.budget_s, self.cache_size = budget_s, cache_size
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, PlanResult] = OrderedDict()
        self._catalog_key = files_digest(self.catalog_files)
        # checked once, at start: a bad file stops `serve`
        self._catalog = load_catalog(self.catalog_files, as_of=plan_date())
        load_prices(self.price_files, list(self._catalog.gpus.rows), as_of=plan_date())  # likewise
        self.computed = 0  # plans computed (not answered from the cache): for the tests

    def catalog(self) -> Catalog:
        """The hardware catalog, as its files are now."""
        return self._current()[0]

    def _current(self) -> tuple[Catalog, str]:
        key = files_digest(self.catalog_files)
        with self._lock:
            if key != self._catalog_key:
                self._catalog, self._catalog_key = load_catalog(self.catalog_files, as_of=plan_date()), key
            return self._catalog, key

    def plan(self, project: dict[str, Any], objective: str | None, top: int, headroom: float | None,
             as_of: datetime.date | None = None) -> PlanResult:
        """The plan for `as_of` (plan_date: the server's $GPUPLAN_AS_OF, else today, when None); the page asks for
        the JSON, the summary and the report of one project in a row, so the last plans are kept (results are never
        modified after they are made)."""
        catalog, catalog_key = self._current()
        when = plan_date(as_of)
        text = json.dumps(project, sort_keys=True)
        key = hashlib.sha256(json.dumps([text, objective, top, headroom, catalog_key,
                                         files_digest(self.price_files), when.isoformat()]).encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        result = within_budget(lambda: api.plan(json.loads(text), objective=objective, top=top, headroom=headroom,
                                                catalog=catalog, catalog_files=self.catalog_files,
                                                price_files=self.price_files, as_of=when), self.budget_s)
        with self._lock:
            self.computed += 1
            self._cache[key] = result
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return result


__all__ = ["CACHE_SIZE", "PLAN_BUDGET_S", "Planner", "files_digest", "within_budget"]
