"""Several writers at once: the SQLite scenarios file (WAL mode, busy timeout) under parallel saves and deletes
from several processes, and `gpuplan serve --workers N` (uvicorn worker processes sharing it)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import yaml

from gpuplan.catalog.loader import example_path

from .conftest import Api, start_server

PER_WRITER = 30


def _writer(args: tuple[str, int]) -> list[int]:
    """Save PER_WRITER scenarios, delete every other one; the ids kept."""
    from gpuplan.web.scenarios import ScenarioStore

    path, n = args
    store = ScenarioStore(Path(path))
    saved = [store.save(f"w{n}-{i}", {"writer": n, "i": i}).id for i in range(PER_WRITER)]
    for sid in saved[::2]:
        assert store.delete(sid)
    return saved[1::2]


def test_parallel_saves_and_deletes_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    from gpuplan.web.scenarios import ScenarioStore

    path = tmp_path / "s.sqlite"
    ScenarioStore(path)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        kept = pool.map(_writer, [(str(path), n) for n in range(4)])
    expected = sorted(i for ids in kept for i in ids)
    listed = ScenarioStore(path).list()
    assert sorted(s.id for s in listed) == expected and len(expected) == 4 * PER_WRITER // 2
    assert all(s.name == f"w{s.project['writer']}-{s.project['i']}" and s.project["i"] % 2 for s in listed)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_serve_with_workers_shares_the_scenarios(tmp_path: Path) -> None:
    project = yaml.safe_load(example_path("vit-imagenet").read_text(encoding="utf-8"))
    proc, base = start_server(tmp_path, "--workers", "2")
    try:
        api = Api(base)
        with ThreadPoolExecutor(20) as pool:
            saved = list(pool.map(lambda i: api.call("POST", f"/api/scenarios?name=p{i}", project), range(60)))
        assert all(s[0] == 201 for s in saved)
        ids = [s[1]["id"] for s in saved]
        with ThreadPoolExecutor(20) as pool:
            deleted = list(pool.map(lambda sid: api.call("DELETE", f"/api/scenarios/{sid}")[0], ids[::3]))
        assert deleted == [204] * len(ids[::3])
        listed = {s["id"] for s in api.call("GET", "/api/scenarios")[1]}
        assert listed == set(ids) - set(ids[::3])
        workers = [c for c in psutil.Process(proc.pid).children() if "python" in c.name().lower()]
        assert len(workers) >= 2  # two worker processes answered
        assert api.call("POST", "/api/plan", project)[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
