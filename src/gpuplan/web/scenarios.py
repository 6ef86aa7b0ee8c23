"""Saved scenarios: named projects kept in a local SQLite file, for the web page's side-by-side comparison.

Saving never replaces: two scenarios may share a name, and each gets its own id."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

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

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            db.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def save(self, name: str, project: dict[str, Any]) -> Scenario:
        saved_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with closing(self._connect()) as db, db:
            cur = db.execute("INSERT INTO scenario (name, project, saved_at) VALUES (?, ?, ?)",
                             (name, json.dumps(project), saved_at))
            row_id = cur.lastrowid
        assert row_id is not None
        return Scenario(id=row_id, name=name, project=project, saved_at=saved_at)

    def list(self) -> list[Scenario]:
        with closing(self._connect()) as db:
            rows = db.execute("SELECT id, name, project, saved_at FROM scenario ORDER BY id").fetchall()
        return [_scenario(r) for r in rows]

    def get(self, scenario_id: int) -> Scenario | None:
        with closing(self._connect()) as db:
            row = db.execute("SELECT id, name, project, saved_at FROM scenario WHERE id = ?",
                             (scenario_id,)).fetchone()
        return _scenario(row) if row else None

    def delete(self, scenario_id: int) -> bool:
        with closing(self._connect()) as db, db:
            return db.execute("DELETE FROM scenario WHERE id = ?", (scenario_id,)).rowcount > 0


def _scenario(row: tuple[Any, ...]) -> Scenario:
    return Scenario(id=row[0], name=row[1], project=json.loads(row[2]), saved_at=row[3])
