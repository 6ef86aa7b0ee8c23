"""`gpuplan serve`: the web page and its JSON API on this machine (FastAPI + uvicorn)."""

import ipaddress
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from gpuplan.cli.common import console, fail
from gpuplan.errors import GpuplanError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on. The default is this machine only; another "
                                           "address lets anyone who reaches it use the page.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: a free one, printed at start).")] = 8000,
    db: Annotated[Path | None, typer.Option(help="SQLite file for saved scenarios (default: "
                                                    "~/.local/share/gpuplan/scenarios.sqlite).")] = None,
    catalog: Annotated[list[Path] | None, typer.Option(
        "--catalog", help="A file of your own catalog rows, used for every request. Repeatable.")] = None,
    prices: Annotated[list[Path] | None, typer.Option(
        "--prices", help="A price list of your own, used for every request. Repeatable.")] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes (each plans on one core; "
                                                              "they share the scenarios file).")] = 1,
    plan_timeout: Annotated[float, typer.Option(min=0.01, max=3600, help="Seconds one plan may take; a longer "
                                                "one is answered 503 and stopped.")] = 30.0,
) -> None:
    """A local web page to fill a project, see its plan with the report's figures, share it as a link, download
    the report and the project file, and compare saved scenarios. The page calls the JSON API (`/api/plan`,
    `/api/estimate`, `/api/catalog/...`; schema at /openapi.json), which returns what the CLI prints as JSON."""
    import socket

    import uvicorn

    from gpuplan.web.app import CONFIG_ENV, LOOPBACK, create_app

    options = {"db_path": db, "catalog_files": catalog or [], "price_files": prices or [],
               "allowed_hosts": LOOPBACK if is_loopback(host) else None, "plan_budget_s": plan_timeout}
    try:
        web = create_app(**options)  # type: ignore[arg-type]
    except GpuplanError as exc:
        fail(exc)
    err = console(stderr=True)
    if not is_loopback(host):
        err.print(f"[yellow]warning[/yellow]: listening on {host}: anyone who can reach this address can use "
                  "the page and read and delete its saved scenarios")
    try:  # bind first, so the address printed is the one served (port 0 picks a free one)
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        fail(GpuplanError(f"--host/--port: cannot listen on {host}:{port}: {exc.strerror or exc}"))
    h, p = sock.getsockname()[:2]
    typer.echo(f"gpuplan serve: http://{f'[{h}]' if ':' in h else h}:{p}/ (API schema at /openapi.json; "
               "Ctrl+C stops)", err=True)
    if workers == 1:
        uvicorn.Server(uvicorn.Config(web, log_level="warning")).run(sockets=[sock])
        return
    # each worker process imports the app by name (uvicorn's rule for workers > 1) and reads the options here
    os.environ[CONFIG_ENV] = json.dumps({"db": str(db) if db else None, "catalog": [str(c) for c in catalog or []],
                                         "prices": [str(p) for p in prices or []],
                                         "allowed_hosts": options["allowed_hosts"], "plan_budget_s": plan_timeout})
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("gpuplan.web.app:app_from_env", factory=True, workers=workers, log_level="warning")
    Multiprocess(config, sockets=[sock]).run()


def register(app: typer.Typer) -> None:
    """Add `serve` to a typer app."""
    app.command("serve")(serve_command)
