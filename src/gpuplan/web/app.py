"""`gpuplan serve`: the JSON API and the page that calls it. A thin shell over gpuplan.api: every number comes
from the same functions as the CLI, and `POST /api/plan` returns exactly what `gpuplan plan --format json`
prints for the same project. The page (static/) does no arithmetic; it only calls these endpoints."""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from fastapi import Body, FastAPI, Query, Request
from fastapi import Path as FastApiPath
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

from gpuplan import api
from gpuplan.catalog.hardware import KINDS
from gpuplan.catalog.listing import catalog_json, models_json
from gpuplan.catalog.loader import example_names, example_path, find_preset, load_presets, parse_project
from gpuplan.errors import InputError, UnknownNameError
from gpuplan.schema.defaults import MEMORY_HEADROOM, Objective
from gpuplan.schema.plan import PlanResult
from gpuplan.schema.result import EstimateResult
from gpuplan.web.errors import NOT_A_PROJECT, GuardMiddleware, StrictJSONResponse, error_body, install_error_handlers
from gpuplan.web.openapi import NAME_LIMIT, build_openapi
from gpuplan.web.planning import PLAN_BUDGET_S, Planner, within_budget
from gpuplan.web.scenarios import MAX_ID, Scenario, ScenarioStore, default_db_path
from gpuplan.web.summary import PlanSummary, summarize

#: the Host headers a server on this machine answers (any port)
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
#: the catalogs the API lists, by the name in the URL (as `gpuplan catalog NAME`)
CATALOGS = {plural: kind for kind, (_, _, plural) in KINDS.items()} | {"models": "models"}
#: the environment variable that hands `serve`'s options to each worker process (`--workers N`)
CONFIG_ENV = "GPUPLAN_SERVE_CONFIG"

ProjectBody = Annotated[dict[str, Any], Body(description="A project, as in a project file (docs/project.md).")]
TopQuery = Annotated[int, Query(ge=1, le=100, description="How many candidates to return.")]
HeadroomQuery = Annotated[float | None, Query(ge=0.0, le=0.8,
                                              description="Fraction of GPU memory kept free (default: the "
                                                          f"project's, else {MEMORY_HEADROOM:.2f}).")]
AsOfQuery = Annotated[datetime.date | None, Query(description="The date the plan is made for (YYYY-MM-DD; default: "
                                                             "the server's $GPUPLAN_AS_OF, else today): quotes older "
                                                             "than six months on it are flagged and weigh less.")]
ScenarioId = Annotated[int, FastApiPath(ge=1, le=MAX_ID, description="A scenario's id (GET /api/scenarios)")]


def web_project(body: Any) -> dict[str, Any]:
    """A project sent to the API. The server runs no user code and reads no user-named file: `model.trace`
    (imports a module) and `model.hf_config` (a path on the server) are for the CLI."""
    if not isinstance(body, dict):
        raise InputError([], NOT_A_PROJECT)
    model = body.get("model")
    if isinstance(model, dict):
        for key, why in (("trace", "runs your Python code"), ("hf_config", "reads a file on the server")):
            if model.get(key) is not None:
                raise InputError(["model", key], f"the web API does not take it ({why}); use the command line, "
                                 "or paste the config.json's content as model.config",
                                 "model.preset, model.config or model.hf_id")
    name = body.get("name")
    if isinstance(name, str) and len(name) > NAME_LIMIT:
        raise InputError(["name"], f"at most {NAME_LIMIT} characters (this one has {len(name):,})")
    return body


def checked_project(body: Any) -> dict[str, Any]:
    """A project that would load as a file and plan: its shape, then its preset (an unknown one is refused by
    every endpoint, as the schema's list of presets says)."""
    project = parse_project(web_project(body))
    if project.model.preset is not None:
        find_preset(project.model.preset)
    return body


def json_response(data: Any, status_code: int = 200) -> Response:
    """Strict JSON (a non-finite number is an internal error, never `Infinity` nor `null`)."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    elif isinstance(data, list):
        data = [d.model_dump(mode="json") if isinstance(d, BaseModel) else d for d in data]
    return StrictJSONResponse(data, status_code=status_code)


def create_app(*, db_path: Path | None = None, catalog_files: Sequence[str | Path] = (),
               price_files: Sequence[str | Path] = (), allowed_hosts: Sequence[str] | None = LOOPBACK,
               plan_budget_s: float = PLAN_BUDGET_S) -> FastAPI:
    """The API and page. `catalog_files` and `price_files` apply to every request, as `--catalog`/`--prices`
    do on the CLI; scenarios are saved in `db_path` (default: default_db_path()). `allowed_hosts`: the Host
    headers served (a page on another site that rebinds its name to 127.0.0.1 is refused); None: any.
    `plan_budget_s`: the seconds one plan may take (then 503)."""
    planner = Planner(catalog_files, price_files, budget_s=plan_budget_s)  # a bad file stops `serve` here
    store = ScenarioStore(db_path or default_db_path())
    # strict_content_type: a JSON body must say so, so that another site's page cannot post one without a
    # CORS preflight; the UIs of /docs and /redoc load a CDN
    app = FastAPI(title="gpuplan", version=_version(), docs_url=None, redoc_url=None, strict_content_type=True,
                  default_response_class=StrictJSONResponse,
                  description="Which GPU server to get for an AI project, computed and explained. "
                              "`POST /api/plan` returns what `gpuplan plan --format json` prints.")
    app.state.planner, app.state.store = planner, store
    install_error_handlers(app)

    @app.middleware("http")
    async def _no_external_loads(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers.setdefault(
            "Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'self'")
        return response

    app.add_middleware(GuardMiddleware, allowed_hosts=allowed_hosts)  # outermost: before anything reads
    _plan_routes(app, planner)
    _catalog_routes(app, planner)
    _scenario_routes(app, store)
    _page(app)
    presets = [n for p in load_presets().values() for n in (p.id, *p.aliases)]

    def openapi() -> dict[str, Any]:
        if not app.openapi_schema:
            app.openapi_schema = build_openapi(app, presets)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _plan_routes(app: FastAPI, planner: Planner) -> None:
    def plan_result(project: dict[str, Any], objective: str | None, top: int, headroom: float | None,
                    as_of: datetime.date | None) -> PlanResult:
        return planner.plan(web_project(project), objective, top, headroom, as_of)

    @app.post("/api/plan", response_model=None, responses={200: {"model": PlanResult}},
              summary="The plan: what `gpuplan plan --format json` prints")
    def post_plan(project: ProjectBody, objective: Objective | None = None, top: TopQuery = api.PLAN_TOP,
                  headroom: HeadroomQuery = None, as_of: AsOfQuery = None) -> Response:
        return json_response(plan_result(project, objective, top, headroom, as_of))

    @app.post("/api/summary", response_model=None, responses={200: {"model": PlanSummary}},
              summary="The plan's recommendation as labelled lines (the page's verdict box and scenario comparison)")
    def post_summary(project: ProjectBody, objective: Objective | None = None, top: TopQuery = api.PLAN_TOP,
                     headroom: HeadroomQuery = None, as_of: AsOfQuery = None,
                     lang: Literal["en", "fr"] = "en") -> Response:
        return json_response(summarize(plan_result(project, objective, top, headroom, as_of), lang))

    @app.post("/api/estimate", response_model=None, responses={200: {"model": EstimateResult}},
              summary="Memory, FLOPs and speed: what `gpuplan estimate --format json` prints")
    def post_estimate(project: ProjectBody, gpu: str | None = None,
                      gpus: Annotated[int | None, Query(ge=1, le=4096)] = None) -> Response:
        project = web_project(project)
        catalog = planner.catalog()
        result = within_budget(lambda: api.estimate(project, gpu=gpu, gpus=gpus, catalog=catalog), planner.budget_s)
        return json_response(result)

    @app.post("/api/report", response_class=HTMLResponse,
              summary="The plan report: what `gpuplan plan --format html|md` writes")
    def post_report(project: ProjectBody, format: Literal["html", "md"] = "html", lang: Literal["en", "fr"] = "en",
                    objective: Objective | None = None, top: TopQuery = api.PLAN_TOP,
                    headroom: HeadroomQuery = None, as_of: AsOfQuery = None) -> Response:
        from gpuplan.report.document import render_html, render_markdown

        result = plan_result(project, objective, top, headroom, as_of)
        if format == "md":
            return PlainTextResponse(render_markdown(result, lang=lang), media_type="text/markdown; charset=utf-8")
        return HTMLResponse(render_html(result, lang=lang))

    @app.post("/api/project", response_class=PlainTextResponse, summary="The project as a YAML project file")
    def post_project(project: ProjectBody) -> Response:
        checked_project(project)  # a file that would not load is not offered for download
        text = yaml.safe_dump(project, sort_keys=False, allow_unicode=True)
        return PlainTextResponse(text, media_type="application/yaml; charset=utf-8")


def _catalog_routes(app: FastAPI, planner: Planner) -> None:
    @app.get("/api/catalog/{name}", response_model=None, responses={200: {"model": list[dict[str, Any]]}},
             summary="A catalog's rows, as `gpuplan catalog NAME --json`")
    def get_catalog(name: str, where: Annotated[list[str], Query(description="FIELD=V, FIELD>=N, FIELD<=N")] = []  # noqa: B006 - FastAPI's Query default, never mutated
                    ) -> Response:
        kind = _catalog_kind(name)
        if kind == "models" and where:
            raise InputError(["where"], "the models catalog is not filtered (`gpuplan catalog models` neither)")
        return json_response(models_json() if kind == "models" else catalog_json(planner.catalog(), kind, where=where))

    @app.get("/api/catalog/{name}/{row_id}", response_model=None, responses={200: {"model": dict[str, Any]}},
             summary="One row by id or alias, as `gpuplan catalog NAME ID --json`")
    def get_catalog_row(name: str, row_id: str) -> Response:
        kind = _catalog_kind(name)
        return json_response((models_json(row_id) if kind == "models" else
                              catalog_json(planner.catalog(), kind, row_id))[0])

    @app.get("/api/examples", response_model=None, responses={200: {"model": list[dict[str, str]]}},
             summary="The built-in example projects")
    def get_examples() -> Response:
        return json_response([{"name": n, "title": _example_title(n)} for n in example_names()])

    @app.get("/api/examples/{name}", response_model=None, responses={200: {"model": dict[str, Any]}},
             summary="One built-in example project")
    def get_example(name: str) -> Response:
        if name not in example_names():
            raise UnknownNameError(["examples"], "example", name, example_names())
        return json_response(dict(yaml.safe_load(example_path(name).read_text(encoding="utf-8"))))


def _scenario_routes(app: FastAPI, store: ScenarioStore) -> None:
    @app.get("/api/scenarios", response_model=None, responses={200: {"model": list[Scenario]}},
             summary="Saved scenarios")
    def get_scenarios() -> Response:
        return json_response(store.list())

    @app.post("/api/scenarios", response_model=None, responses={201: {"model": Scenario}}, status_code=201,
              summary="Save a scenario (a named project); never replaces one")
    def post_scenario(project: ProjectBody, name: Annotated[str, Query(min_length=1, max_length=200)]) -> Response:
        checked_project(project)
        return json_response(store.save(name, project), status_code=201)

    @app.get("/api/scenarios/{scenario_id}", response_model=None, responses={200: {"model": Scenario}},
             summary="One saved scenario")
    def get_scenario(scenario_id: ScenarioId) -> Response:
        found = store.get(scenario_id)
        if found is None:
            raise _no_scenario(scenario_id)
        return json_response(found)

    @app.delete("/api/scenarios/{scenario_id}", status_code=204, response_class=Response,
                summary="Delete a saved scenario")
    def delete_scenario(scenario_id: ScenarioId) -> Response:
        if not store.delete(scenario_id):
            raise _no_scenario(scenario_id)
        return Response(status_code=204)


def _no_scenario(scenario_id: int) -> UnknownNameError:
    err = UnknownNameError(["scenarios"], "scenario", str(scenario_id), [])
    err.allowed = None
    hint = " (GET /api/scenarios lists the saved ones)"
    err.detail += hint
    err.message = f"scenarios: {err.detail}"
    return err


def _page(app: FastAPI) -> None:
    static = resources.files("gpuplan.web") / "static"

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"))

    app.mount("/static", StaticFiles(directory=str(static)), name="static")


def app_from_env() -> FastAPI:
    """The app of one worker process of `gpuplan serve --workers N` (uvicorn imports it by name, in each
    process): the options are in $GPUPLAN_SERVE_CONFIG (JSON)."""
    conf = json.loads(os.environ[CONFIG_ENV])
    return create_app(db_path=Path(conf["db"]) if conf.get("db") else None, catalog_files=conf.get("catalog", []),
                      price_files=conf.get("prices", []), allowed_hosts=conf.get("allowed_hosts"),
                      plan_budget_s=conf.get("plan_budget_s", PLAN_BUDGET_S))


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


__all__ = ["CATALOGS", "LOOPBACK", "app_from_env", "create_app", "error_body", "web_project"]
