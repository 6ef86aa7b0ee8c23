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

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {"Content-Type": "application/json"} if data is not None else {}
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={**sent, **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                status, text, headers = res.status, res.read().decode(), dict(res.headers)
        except urllib.error.HTTPError as exc:
            status, text, headers = exc.code, exc.read().decode(), dict(exc.headers)
        ctype = headers.get("content-type", "")
        return status, (json.loads(text) if "json" in ctype and text else text), headers


def start_server(tmp: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """`gpuplan serve --port 0` and its address. Its stderr goes to a file (a pipe nobody reads could fill and
    block the server)."""
    log = tmp / "serve.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "serve", "--port", "0", "--db",
                                 str(tmp / "s.sqlite"), *extra], stderr=err, stdout=subprocess.DEVNULL, text=True,
                                env={**os.environ, "NO_COLOR": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"(http://127\.0\.0\.1:\d+)/", log.read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gpuplan serve did not start: " + log.read_text())


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, base = start_server(tmp_path_factory.mktemp("serve"))
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def client(server: str) -> Api:
    return Api(server)
