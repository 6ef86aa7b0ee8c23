"""The web API's errors: one JSON shape for every error the server answers, whoever raises it (gpuplan, FastAPI's
request checks, Starlette's router, the Host check, the body limit, an unexpected exception):

    {"error": {"code", "message", "field", "loc", "detail", "allowed", "suggestions"}}

`code` and `message` are always there; the others where the error is in a field. No error echoes more than
ECHO_LIMIT characters of what the request sent, and none carries a traceback."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuplan.catalog.hardware import KINDS
from gpuplan.errors import (
    CatalogError,
    GpuplanError,
    HubUnavailableError,
    InfeasibleError,
    InputError,
    UnknownNameError,
    _join_loc,
)

#: the most characters of one input that an error message repeats
ECHO_LIMIT = 200
#: the longest message an error carries
MESSAGE_LIMIT = 1000
#: the largest request body the server reads (bytes); a larger one is answered 413
MAX_BODY_BYTES = 2 * 1024 * 1024
NOT_A_PROJECT = "the request body must be a project: a JSON object with name, model, workload, ..."
#: the names in a URL (an unknown one is a 404)
LOOKUPS = {"catalog", "examples", "scenarios", "models", "--gpu", *KINDS}


class StrictJSONResponse(JSONResponse):
    """JSON as RFC 8259 has it: a NaN or an infinity is a bug (ValueError, answered as an internal error), never
    `Infinity` on the wire nor a silent `null`."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


class WebError(Exception):
    """An error of the web layer itself (not of the project): an HTTP status, a code and a message."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` with every run of more than `limit` characters without a space (an echoed input) shortened, and
    at most MESSAGE_LIMIT characters in all."""
    text = re.sub(rf"\S{{{limit + 1},}}", lambda m: m.group(0)[:limit] + f"… ({len(m.group(0)):,} characters)",
                  " ".join(text.split()))
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "…"


def error_body(exc: GpuplanError) -> dict[str, Any]:
    """An error as the API returns it: the CLI's one line, plus where it is for a form to show it there."""
    out: dict[str, Any] = {"code": exc.code, "message": clip(str(exc))}
    if isinstance(exc, InputError):
        loc = [p if isinstance(p, int) else clip(p) for p in exc.loc]
        out.update(loc=loc, field=clip(_join_loc(exc.loc)), detail=clip(exc.detail),
                   allowed=None if exc.allowed is None else clip(exc.allowed))
        if isinstance(exc, UnknownNameError):
            out["suggestions"] = [clip(s) for s in exc.suggestions]
    return {"error": out}


def gpuplan_status(exc: GpuplanError) -> int:
    if isinstance(exc, InfeasibleError):
        return 409  # the project is valid; nothing satisfies it (the CLI's exit 1)
    if isinstance(exc, HubUnavailableError):
        return 503
    if isinstance(exc, CatalogError):
        return 500  # the server's --catalog/--prices file, not the request
    if isinstance(exc, UnknownNameError) and exc.loc and exc.loc[0] in LOOKUPS:
        return 404  # a name in the URL, not in the project
    return 422


def web_error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return StrictJSONResponse({"error": {"code": code, "message": clip(message)}}, status_code=status,
                              headers=headers)


def internal_error(exc: BaseException) -> JSONResponse:
    """A bug, not the user's doing: still the API's error shape, one line, no traceback."""
    first = (str(exc).splitlines() or [""])[0]
    return web_error(500, "internal", f"gpuplan failed on this request ({type(exc).__name__}"
                                      f"{': ' + first if first else ''}); please report it")


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route answers at this path (Starlette's own 405 names only the first route's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)  # type: ignore[attr-defined]
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    """Every error in the JSON shape."""

    @app.exception_handler(GpuplanError)
    async def _gpuplan_error(_: Request, exc: GpuplanError) -> JSONResponse:
        return StrictJSONResponse(error_body(exc), status_code=gpuplan_status(exc))

    @app.exception_handler(WebError)
    async def _web_error(_: Request, exc: WebError) -> JSONResponse:
        return web_error(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return internal_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _request_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = [str(p) for p in first.get("loc", ()) if p != "body"]
        if first.get("loc", ())[:1] == ("body",) and (not where or first.get("type") == "json_invalid"):
            err = InputError([], NOT_A_PROJECT)
        else:
            err = InputError(where, str(first.get("msg", "invalid request")).removeprefix("Value error, "))
        return StrictJSONResponse(error_body(err), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 405:
            allow = ", ".join(allowed_methods(app, request.scope))
            return web_error(405, "method-not-allowed", f"{request.method} is not answered at {request.url.path} "
                             f"(allowed: {allow})", {"Allow": allow})
        if exc.status_code == 404:
            return web_error(404, "not-found", f"no such address: {request.url.path} (the API is under /api/; "
                             "its schema is at /openapi.json)")
        if exc.status_code == 400:  # FastAPI: a body it could not read (not UTF-8, ...): not a project either
            return StrictJSONResponse(error_body(InputError([], NOT_A_PROJECT)), status_code=422)
        return web_error(exc.status_code, "http", str(exc.detail))


def _error_message(status: int, code: str, message: str) -> tuple[Message, Message]:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    start = {"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                         (b"connection", b"close")]}
    return start, {"type": "http.response.body", "body": body}


class GuardMiddleware:
    """Before anything else reads a request: its Host must be one this server answers (a page of another site
    whose name is rebound to 127.0.0.1 sends its own: 400), and its body at most MAX_BODY_BYTES (413). The body
    is read here, bounded, and handed on whole."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str] | None, max_body: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_body = app, max_body
        self.hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.hosts is not None and _host_name(headers.get("host", "")) not in self.hosts:
            return await _send(send, 400, "bad-host", "this server answers only the names of this machine "
                               "(127.0.0.1, localhost) in the Host header")
        too_large = f"the request body is over the limit of {self.max_body // (1024 * 1024)} MB"
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            return await _send(send, 413, "too-large", too_large)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            body += message.get("body", b"")
            if len(body) > self.max_body:
                return await _send(send, 413, "too-large", too_large)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _send(send: Send, status: int, code: str, message: str) -> None:
    start, body = _error_message(status, code, message)
    await send(start)
    await send(body)


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host


__all__ = ["ECHO_LIMIT", "MAX_BODY_BYTES", "GuardMiddleware", "StrictJSONResponse", "WebError", "clip",
           "error_body", "gpuplan_status", "install_error_handlers", "internal_error"]
