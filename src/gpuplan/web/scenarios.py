"""Saved scenarios: named projects kept in a local SQLite file, for the web page's side-by-side comparison.

Saving never replaces: two scenarios may share a name, and each gets its own id. The file is in WAL mode with a
busy timeout, so several server processes (`gpuplan serve --workers N`) save and delete in it at once; the
number of scenarios and the size of each are capped."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gpuplan.web.errors import WebError

#: the most scenarios a store keeps (a save beyond is refused: 409)
MAX_SCENARIOS = 500
#: the largest project a scenario keeps, as JSON (bytes; larger: 413)
MAX_SCENARIO_BYTES = 256 * 1024
#: ids are SQLite INTEGERs
MAX_ID = 2**63 - 1
#: seconds a writer waits for another's lock
BUSY_TIMEOUT_S = 30

_SCHEMA = """CREATE TABLE IF NOT EXISTS scenario (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    project TEXT NOT NULL,
    saved_at TEXT NOT NULL
)"""


class Scenario(BaseModel):
    id: int
    name: str
    project: dict[str, Any]
    saved_at: str


def default_db_path() -> Path:
    """$XDG_DATA_HOME/gpuplan/scenarios.sqlite, else ~/.local/share/gpuplan/scenarios.sqlite."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "gpuplan" / "scenarios.sqlite"


class ScenarioStore:
    """One connection per call, so the store is safe from the server's worker threads."""

    def __init__(self, path: Path, max_scenarios: int = MAX_SCENARIOS) -> None:
        self.path, self.max_scenarios = path, max_scenarios
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db:
            db.execute("PRAGMA journal_mode=WAL")  # readers never block the writer, nor it them
            with db:
                db.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        return db

    def save(self, name: str, project: dict[str, Any]) -> Scenario:
        text = json.dumps(project, allow_nan=False)
        if len(text.encode()) > MAX_SCENARIO_BYTES:
            raise WebError(413, "too-large", f"a scenario keeps a project of at most {MAX_SCENARIO_BYTES // 1024} KB "
                                             "as JSON")
        saved_at = datetime.now(UTC).isoformat(timespec="seconds")
        with closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")  # the count and the insert in one write transaction
            try:
                (count,) = db.execute("SELECT COUNT(*) FROM scenario").fetchone()
                if count >= self.max_scenarios:
                    raise WebError(409, "limit", f"{count} scenarios are saved, the most this server keeps: "
                                                 "delete some first (DELETE /api/scenarios/{id})")
                row_id = db.execute("INSERT INTO scenario (name, project, saved_at) VALUES (?, ?, ?)",
                                    (name, text, saved_at)).lastrowid
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        assert row_id is not None
        return Scenario(id=row_id, name=name, project=project, saved_at=saved_at)

    def list(self) -> list[Scenario]:
        with closing(self._connect()) as db:
            rows = db.execute("SELECT id, name, project, saved_at FROM scenario ORDER BY id").fetchall()
        return [_scenario(r) for r in rows]

    def get(self, scenario_id: int) -> Scenario | None:
        if not 1 <= scenario_id <= MAX_ID:
            return None
        with closing(self._connect()) as db:
            row = db.execute("SELECT id, name, project, saved_at FROM scenario WHERE id = ?",
                             (scenario_id,)).fetchone()
        return _scenario(row) if row else None

    def delete(self, scenario_id: int) -> bool:
        if not 1 <= scenario_id <= MAX_ID:
            return False
        with closing(self._connect()) as db:
            return db.execute("DELETE FROM scenario WHERE id = ?", (scenario_id,)).rowcount > 0


def _scenario(row: tuple[Any, ...]) -> Scenario:
    return Scenario(id=row[0], name=row[1], project=json.loads(row[2]), saved_at=row[3])
