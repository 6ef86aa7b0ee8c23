"""`gpuplan serve`: the JSON API and the page that calls it. A thin shell over gpuplan.api: every number comes
from the same functions as the CLI, and `POST /api/plan` returns exactly what `gpuplan plan --format json`
prints for the same project. The page (static/) does no arithmetic; it only calls these endpoints."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from gpuplan import api
from gpuplan.catalog.hardware import KINDS, load_catalog
from gpuplan.catalog.listing import catalog_json, models_json
from gpuplan.catalog.loader import example_names, example_path, parse_project
from gpuplan.errors import (GpuplanError, HubUnavailableError, InfeasibleError, InputError, UnknownNameError,
                            _join_loc)
from gpuplan.schema.defaults import MEMORY_HEADROOM
from gpuplan.schema.plan import PlanResult
from gpuplan.schema.project import Objective, Project
from gpuplan.schema.result import EstimateResult
from gpuplan.web.scenarios import Scenario, ScenarioStore, default_db_path
from gpuplan.web.summary import PlanSummary, summarize

#: the Host headers a server on this machine answers (any port)
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
#: the catalogs the API lists, by the name in the URL (as `gpuplan catalog NAME`)
CATALOGS = {plural: kind for kind, (_, _, plural) in KINDS.items()} | {"models": "models"}
#: POST endpoints whose body is a project (documented with the project's JSON schema)
PROJECT_BODIES = ("/api/plan", "/api/summary", "/api/estimate", "/api/report", "/api/project", "/api/scenarios")

ProjectBody = Annotated[dict[str, Any], Body(description="A project, as in a project file (docs/project.md).")]
TopQuery = Annotated[int, Query(ge=1, le=100, description="How many candidates to return.")]
HeadroomQuery = Annotated[float | None, Query(ge=0.0, le=0.8, description="Fraction of GPU memory kept free "
                                                                           f"(default: the project's, else {MEMORY_HEADROOM:.2f}).")]


def error_body(exc: GpuplanError) -> dict[str, Any]:
    """An error as the API returns it: the CLI's one line, plus where it is for a form to show it there."""
    out: dict[str, Any] = {"code": exc.code, "message": str(exc)}
    if isinstance(exc, InputError):
        out.update(loc=list(exc.loc), field=_join_loc(exc.loc), detail=exc.detail, allowed=exc.allowed)
        if isinstance(exc, UnknownNameError):
            out["suggestions"] = exc.suggestions
    return {"error": out}


def _status(exc: GpuplanError) -> int:
    if isinstance(exc, InfeasibleError):
        return 409  # the project is valid; nothing satisfies it (the CLI's exit 1)
    if isinstance(exc, HubUnavailableError):
        return 503
    if isinstance(exc, UnknownNameError) and exc.loc and exc.loc[0] in _LOOKUPS:
        return 404  # a name in the URL, not in the project
    return 422


def web_project(body: Any) -> dict[str, Any]:
    """A project sent to the API. The server runs no user code and reads no user-named file: `model.trace`
    (imports a module) and `model.hf_config` (a path on the server) are for the CLI."""
    if not isinstance(body, dict):
        raise InputError([], "the request body must be a project: a JSON object with name, model, workload, ...")
    model = body.get("model")
    if isinstance(model, dict):
        for key, why in (("trace", "runs your Python code"), ("hf_config", "reads a file on the server")):
            if model.get(key):
                raise InputError(["model", key], f"the web API does not take it ({why}); use the command line, "
                                 "or paste the config.json's content as model.config",
                                 "model.preset, model.config or model.hf_id")
    return body


def create_app(*, db_path: Path | None = None, catalog_files: Sequence[str | Path] = (),
               price_files: Sequence[str | Path] = (), allowed_hosts: Sequence[str] | None = LOOPBACK) -> FastAPI:
    """The API and page. `catalog_files` and `price_files` apply to every request, as `--catalog`/`--prices`
    do on the CLI; scenarios are saved in `db_path` (default: default_db_path()). `allowed_hosts`: the Host
    headers served (a page on another site that rebinds its name to 127.0.0.1 is refused); None: any."""
    from gpuplan.catalog.prices import load_prices

    catalog = load_catalog(catalog_files)  # checked once, at start: a bad file stops `serve` with its error
    load_prices(price_files, list(catalog.gpus.rows))  # likewise (plans read them again: edits are seen)
    store = ScenarioStore(db_path or default_db_path())
    # strict_content_type: a JSON body must say so, so that another site's page cannot post one without a
    # CORS preflight; the UIs of /docs and /redoc load a CDN
    app = FastAPI(title="gpuplan", version=_version(), docs_url=None, redoc_url=None, strict_content_type=True,
                  description="Which GPU server to get for an AI project, computed and explained. "
                              "`POST /api/plan` returns what `gpuplan plan --format json` prints.")

    @app.exception_handler(GpuplanError)
    async def _gpuplan_error(_: Request, exc: GpuplanError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=_status(exc))

    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        # a bug, not the user's doing: still the API's error shape, never a bare 500 page
        return JSONResponse({"error": {"code": "internal", "message": f"gpuplan failed on this project "
                                       f"({type(exc).__name__}: {exc}); please report it"}}, status_code=500)

    @app.exception_handler(RequestValidationError)
    async def _request_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = [str(p) for p in first.get("loc", ()) if p != "body"]
        if first.get("loc", ())[:1] == ("body",) and not where:
            err = InputError([], "the request body must be a project: a JSON object with name, model, workload, ...")
        else:
            err = InputError(where, str(first.get("msg", "invalid request")).removeprefix("Value error, "))
        return JSONResponse(error_body(err), status_code=422)

    @app.middleware("http")
    async def _no_external_loads(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers.setdefault(
            "Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'self'")
        return response

    @lru_cache(maxsize=64)
    def cached_plan(project_json: str, objective: str | None, top: int, headroom: float | None) -> PlanResult:
        return api.plan(json.loads(project_json), objective=objective, top=top, headroom=headroom, catalog=catalog,
                        catalog_files=catalog_files, price_files=price_files)

    def plan_result(project: dict[str, Any], objective: str | None, top: int, headroom: float | None) -> PlanResult:
        """The plan; the page asks for the JSON, the summary and the report of one project in a row, so the
        last plans are kept (results are never modified after they are made)."""
        return cached_plan(json.dumps(web_project(project), sort_keys=True), objective, top, headroom)

    @app.post("/api/plan", responses={200: {"model": PlanResult}, 409: {"description": "nothing fits"}},
              summary="The plan: what `gpuplan plan --format json` prints")
    def post_plan(project: ProjectBody, objective: Objective | None = None, top: TopQuery = api.PLAN_TOP,
                  headroom: HeadroomQuery = None) -> JSONResponse:
        return JSONResponse(plan_result(project, objective, top, headroom).model_dump(mode="json"))

    @app.post("/api/summary", summary="The plan's recommendation as labelled lines (the page's verdict box and "
                                      "scenario comparison)")
    def post_summary(project: ProjectBody, objective: Objective | None = None, top: TopQuery = api.PLAN_TOP,
                     headroom: HeadroomQuery = None) -> PlanSummary:
        return summarize(plan_result(project, objective, top, headroom))

    @app.post("/api/estimate", responses={200: {"model": EstimateResult}},
              summary="Memory, FLOPs and speed: what `gpuplan estimate --format json` prints")
    def post_estimate(project: ProjectBody, gpu: str | None = None,
                      gpus: Annotated[int | None, Query(ge=1)] = None) -> JSONResponse:
        result = api.estimate(web_project(project), gpu=gpu, gpus=gpus, catalog=catalog)
        return JSONResponse(result.model_dump(mode="json"))

    @app.post("/api/report", response_class=HTMLResponse,
              summary="The plan report: what `gpuplan plan --format html|md` writes")
    def post_report(project: ProjectBody, format: Literal["html", "md"] = "html", lang: Literal["en", "fr"] = "en",
                    objective: Objective | None = None, top: TopQuery = api.PLAN_TOP,
                    headroom: HeadroomQuery = None) -> Response:
        from gpuplan.report.document import render_html, render_markdown

        result = plan_result(project, objective, top, headroom)
        if format == "md":
            return PlainTextResponse(render_markdown(result, lang=lang), media_type="text/markdown; charset=utf-8")
        return HTMLResponse(render_html(result, lang=lang))

    @app.post("/api/project", response_class=PlainTextResponse, summary="The project as a YAML project file")
    def post_project(project: ProjectBody) -> Response:
        parse_project(web_project(project))  # a file that would not load is not offered for download
        text = yaml.safe_dump(project, sort_keys=False, allow_unicode=True)
        return PlainTextResponse(text, media_type="application/yaml; charset=utf-8")

    @app.get("/api/catalog/{name}", summary="A catalog's rows, as `gpuplan catalog NAME --json`")
    def get_catalog(name: str, where: Annotated[list[str], Query(description="FIELD=V, FIELD>=N, FIELD<=N")] = []
                    ) -> list[dict[str, Any]]:  # noqa: B006 (FastAPI copies query defaults)
        kind = _catalog_kind(name)
        if kind == "models" and where:
            raise InputError(["where"], "the models catalog is not filtered (`gpuplan catalog models` neither)")
        return models_json() if kind == "models" else catalog_json(catalog, kind, where=where)

    @app.get("/api/catalog/{name}/{row_id}", summary="One row by id or alias, as `gpuplan catalog NAME ID --json`")
    def get_catalog_row(name: str, row_id: str) -> dict[str, Any]:
        kind = _catalog_kind(name)
        return (models_json(row_id) if kind == "models" else catalog_json(catalog, kind, row_id))[0]

    @app.get("/api/examples", summary="The built-in example projects")
    def get_examples() -> list[dict[str, str]]:
        return [{"name": n, "title": _example_title(n)} for n in example_names()]

    @app.get("/api/examples/{name}", summary="One built-in example project")
    def get_example(name: str) -> dict[str, Any]:
        if name not in example_names():
            raise UnknownNameError(["examples"], "example", name, example_names())
        return dict(yaml.safe_load(example_path(name).read_text(encoding="utf-8")))

    @app.get("/api/scenarios", summary="Saved scenarios")
    def get_scenarios() -> list[Scenario]:
        return store.list()

    @app.post("/api/scenarios", summary="Save a scenario (a named project); never replaces one",
              status_code=201)
    def post_scenario(project: ProjectBody, name: Annotated[str, Query(min_length=1, max_length=200)]) -> Scenario:
        parse_project(web_project(project))
        return store.save(name, project)

    @app.get("/api/scenarios/{scenario_id}", summary="One saved scenario")
    def get_scenario(scenario_id: int) -> Scenario:
        found = store.get(scenario_id)
        if found is None:
            raise UnknownNameError(["scenarios"], "scenario", str(scenario_id), [str(s.id) for s in store.list()])
        return found

    @app.delete("/api/scenarios/{scenario_id}", status_code=204, summary="Delete a saved scenario")
    def delete_scenario(scenario_id: int) -> Response:
        if not store.delete(scenario_id):
            raise UnknownNameError(["scenarios"], "scenario", str(scenario_id), [str(s.id) for s in store.list()])
        return Response(status_code=204)

    static = resources.files("gpuplan.web") / "static"

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"))

    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    def openapi() -> dict[str, Any]:
        """FastAPI's schema, with the project's own JSON schema for every body that is a project."""
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        project = Project.model_json_schema(ref_template="#/components/schemas/Project.{model}")
        for name, sub in project.pop("$defs", {}).items():
            components[f"Project.{name}"] = sub
        components["Project"] = project
        for path in PROJECT_BODIES:
            body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
            body["schema"] = {"$ref": "#/components/schemas/Project"}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


_LOOKUPS = {"catalog", "examples", "scenarios", "models", *KINDS}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuplan")
    except PackageNotFoundError:
        return "0"


def _catalog_kind(name: str) -> str:
    if name not in CATALOGS:
        raise UnknownNameError(["catalog"], "catalog", name, list(CATALOGS))
    return CATALOGS[name]


def _example_title(name: str) -> str:
    """The first comment line of an example file: what it is."""
    first = example_path(name).read_text(encoding="utf-8").splitlines()[0]
    return first.lstrip("# ").strip() if first.startswith("#") else name


__all__ = ["CATALOGS", "create_app", "error_body", "web_project"]
