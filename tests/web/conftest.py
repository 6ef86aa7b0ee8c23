"""A real `gpuplan serve` on a free port of 127.0.0.1, with its scenarios in a temporary SQLite file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class Api:
    """A small JSON client of the running server (urllib: nothing between the test and the socket)."""

    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                status, text, headers = res.status, res.read().decode(), dict(res.headers)
        except urllib.error.HTTPError as exc:
            status, text, headers = exc.code, exc.read().decode(), dict(exc.headers)
        ctype = headers.get("content-type", "")
        return status, (json.loads(text) if "json" in ctype and text else text), headers


def start_server(tmp: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "serve", "--port", "0", "--db", str(tmp / "s.sqlite"),
                             *extra], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if m:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("gpuplan serve did not start: " + (proc.stderr.read() or ""))


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, base = start_server(tmp_path_factory.mktemp("serve"))
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def client(server: str) -> Api:
    return Api(server)
