"""A bounded load test of `gpuplan serve` on this machine: N concurrent clients (default 50) post plans for
--seconds each (default 60) in two phases, cached (the same project again: the plan cache answers) and uncached
(a new project name each time: a full search), and print requests/s, p50/p99 latency and errors per phase.

It starts its own server (`gpuplan serve --port 0`, a temporary scenarios file; `--workers N` is passed on) or
uses --url, which must be an address of this machine (127.0.0.1 or localhost): it sends nothing elsewhere.
Each client stops at the deadline (a request in flight finishes, up to --timeout), and the server it started is
stopped at the end.

    python benchmarks/load_test.py                      # 50 clients, 60 s cached + 60 s uncached
    python benchmarks/load_test.py --seconds 10 --workers 2
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from gpuplan.catalog.loader import example_path

PROJECT = "llama3-8b-qlora"


def start_server(tmp: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    log = tmp / "serve.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "serve", "--port", "0", "--db", str(tmp / "s.sqlite"),
                                 "--workers", str(workers)], stderr=err, stdout=subprocess.DEVNULL, text=True,
                                env={**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"(http://127\.0\.0\.1:\d+)/", log.read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("gpuplan serve did not start: " + log.read_text())


class Client(threading.Thread):
    """One client: a kept-alive connection, requests one after another until the deadline."""

    def __init__(self, base: str, n: int, uncached: bool, deadline: float, timeout: float, max_requests: int):
        super().__init__(daemon=True)
        url = urlsplit(base)
        self.host, self.port, self.n, self.uncached = url.hostname, url.port, n, uncached
        self.deadline, self.timeout, self.max_requests = deadline, timeout, max_requests
        self.project = yaml.safe_load(example_path(PROJECT).read_text(encoding="utf-8"))
        self.latencies: list[float] = []
        self.errors: Counter[str] = Counter()

    def run(self) -> None:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        i = 0
        while time.monotonic() < self.deadline and i < self.max_requests:
            i += 1
            name = f"load {self.n}-{i}" if self.uncached else "load cached"
            body = json.dumps({**self.project, "name": name}).encode()
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/api/plan?top=3", body=body, headers={"Content-Type": "application/json"})
                res = conn.getresponse()
                res.read()
                if res.status == 200:
                    self.latencies.append(time.perf_counter() - t0)
                else:
                    self.errors[f"HTTP {res.status}"] += 1
            except (OSError, http.client.HTTPException) as exc:
                self.errors[type(exc).__name__] += 1
                conn.close()
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        conn.close()


def phase(base: str, clients: int, seconds: float, uncached: bool, timeout: float, max_requests: int) -> dict:
    start = time.monotonic()
    threads = [Client(base, n, uncached, start + seconds, timeout, max_requests) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout + 10)
    wall = time.monotonic() - start
    lat = sorted(x for t in threads for x in t.latencies)
    errors = sum((t.errors for t in threads), Counter())
    q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [lat[0] if lat else float("nan")] * 99
    return {"phase": "uncached" if uncached else "cached", "clients": clients, "seconds": round(wall, 1),
            "requests": len(lat) + sum(errors.values()), "ok": len(lat), "requests_per_s": round(len(lat) / wall, 1),
            "p50_s": round(q[49], 3), "p99_s": round(q[98], 3), "errors": dict(errors)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds per phase (default 60)")
    ap.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    ap.add_argument("--workers", type=int, default=1, help="`gpuplan serve --workers` of the server started")
    ap.add_argument("--url", help="a running server on this machine (http://127.0.0.1:PORT) instead of one started")
    ap.add_argument("--phases", default="cached,uncached", help="cached, uncached or both (default)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one request may take (default 60)")
    ap.add_argument("--max-requests", type=int, default=100_000, help="per client, at most (default 100000)")
    args = ap.parse_args(argv)
    if not 1 <= args.clients <= 500 or not 0 < args.seconds <= 3600:
        ap.error("--clients: 1 to 500; --seconds: up to 3600")
    if args.url and urlsplit(args.url).hostname not in ("127.0.0.1", "localhost"):
        ap.error("--url must be on this machine (127.0.0.1 or localhost)")
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = (None, args.url.rstrip("/")) if args.url else start_server(Path(tmp), args.workers)
        try:
            print(f"server {base} ({args.workers} worker(s)), {os.cpu_count()} CPUs, {args.clients} clients, "
                  f"{args.seconds:g} s per phase", flush=True)
            for name in args.phases.split(","):
                out = phase(base, args.clients, args.seconds, name.strip() == "uncached", args.timeout,
                            args.max_requests)
                print(f"{out['phase']:>9}: {out['requests']} requests in {out['seconds']} s, "
                      f"{out['requests_per_s']} req/s, p50 {out['p50_s']} s, p99 {out['p99_s']} s, "
                      f"errors {sum(out['errors'].values())} {out['errors'] or ''}", flush=True)
                print(json.dumps(out), flush=True)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
