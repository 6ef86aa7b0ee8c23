"""/openapi.json: FastAPI's schema, with the project's own JSON schema for every body that is a project, narrowed
to what the web API takes, and every status code each operation answers documented with the error shape."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from gpuplan.schema.project import Project
from gpuplan.web.errors import ECHO_LIMIT

#: POST endpoints whose body is a project (documented with the project's JSON schema)
PROJECT_BODIES = ("/api/plan", "/api/summary", "/api/estimate", "/api/report", "/api/project", "/api/scenarios")
#: the longest project name the web API takes
NAME_LIMIT = ECHO_LIMIT
#: the model sources the web API takes (model.trace and model.hf_config are for the command line)
WEB_MODEL_SOURCES = ("preset", "config", "hf_id")

ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error", "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {
            "code": {"type": "string"}, "message": {"type": "string"},
            "field": {"type": "string"}, "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
            "detail": {"type": "string"}, "allowed": {"type": ["string", "null"]},
            "suggestions": {"type": "array", "items": {"type": "string"}}}}},
}
#: what each status means, for the operations that answer it
STATUSES = {
    "400": "The Host header names another machine (a page of another site whose name is rebound here)",
    "404": "An unknown name or id in the URL (with suggestions)",
    "409": "Nothing satisfies the project (the binding constraint and the gap); for a save: the store is full",
    "413": "The request body is over the limit (2 MB), or a scenario over 256 KB",
    "422": "A bad project or parameter: `error.field` names it, with what is allowed",
    "500": "A failure of gpuplan or of the server's --catalog/--prices files (code: internal)",
    "503": "A model.hf_id neither reachable nor cached, or a plan over the time budget (code: timeout)",
}


def _answered(path: str, method: str) -> list[str]:
    codes = ["400", "422", "500"]
    if method == "post":
        codes += ["413"]
    if "{" in path or path == "/api/estimate":  # a name in the URL or the ?gpu= query
        codes += ["404"]
    if path in PROJECT_BODIES:
        codes += ["503"]  # a Hub model
        if path in ("/api/plan", "/api/summary", "/api/report"):
            codes += ["409"]
    if path == "/api/scenarios" and method == "post":
        codes += ["409"]
    return sorted(set(codes))


def web_model_schema(model: dict[str, Any], presets: Iterable[str]) -> dict[str, Any]:
    """ModelRef as the web API takes it: exactly one of preset (a built-in one), config or hf_id."""
    props = model["properties"]
    out = copy.deepcopy(model)
    out["properties"] = {
        "preset": {"type": "string", "enum": sorted(set(presets)), "title": "Preset",
                   "description": "a built-in model (GET /api/catalog/models), by id or alias"},
        "config": {"type": "object", "title": "Config", "additionalProperties": True, "minProperties": 1,
                   "description": "the content of a Hugging Face config.json"},
        "hf_id": {**_not_null(props["hf_id"]), "title": "Hf Id"},
        "hf_config": {"type": "null", "description": "command line only: reads a file"},
        "trace": {"type": "null", "description": "command line only: runs Python code"},
    }
    out["oneOf"] = [{"required": [k]} for k in WEB_MODEL_SOURCES]
    return out


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    alts = [a for a in prop.get("anyOf", [prop]) if a.get("type") != "null"]
    return dict(alts[0])


def build_openapi(app: FastAPI, presets: Iterable[str]) -> dict[str, Any]:
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    project = Project.model_json_schema(ref_template="#/components/schemas/Project.{model}")
    for name, sub in project.pop("$defs", {}).items():
        components[f"Project.{name}"] = sub
    project["properties"]["name"]["maxLength"] = NAME_LIMIT
    components["Project"] = project
    components["Project.ModelRef"] = web_model_schema(components["Project.ModelRef"], presets)
    components["Error"] = ERROR_SCHEMA
    for path in PROJECT_BODIES:
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        body["schema"] = {"$ref": "#/components/schemas/Project"}
    text = {"schema": {"type": "string"}}
    schema["paths"]["/api/project"]["post"]["responses"]["200"]["content"] = {
        "application/yaml": {"schema": {"$ref": "#/components/schemas/Project"}}}
    schema["paths"]["/api/report"]["post"]["responses"]["200"]["content"] = {"text/html": text,
                                                                              "text/markdown": text}
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            responses = op.setdefault("responses", {})
            for code in _answered(path, method):
                responses[code] = {"description": STATUSES[code], "content": error}
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    return schema


__all__ = ["NAME_LIMIT", "PROJECT_BODIES", "build_openapi", "web_model_schema"]
