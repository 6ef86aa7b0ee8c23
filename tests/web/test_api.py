"""The JSON API through a real `gpuplan serve` (uvicorn on a free port): it answers what the CLI prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan.catalog.loader import example_names, example_path
from gpuplan.cli import app
from gpuplan.schema.project import Project

from .conftest import Api

EXAMPLES = example_names()


def example(name: str) -> dict:
    return yaml.safe_load(example_path(name).read_text(encoding="utf-8"))


def timeless(plan: dict) -> dict:
    """A plan without its one measured quantity: how long the search took on this run."""
    assert plan["stats"].pop("search_seconds") >= 0
    return plan


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("name", EXAMPLES)
def test_plan_is_what_the_cli_prints(client: Api, name: str) -> None:
    code, out, _ = cli("plan", "--example", name, "--format", "json")
    assert code == 0
    status, body, _ = client.call("POST", "/api/plan", example(name))
    assert status == 200
    assert timeless(body) == timeless(json.loads(out))


def test_plan_options_are_the_cli_flags(client: Api) -> None:
    code, out, _ = cli("plan", "--example", "llama3-70b-lora", "--format", "json", "--objective", "time", "--top", "3",
                       "--headroom", "0.2")
    assert code == 0
    status, body, _ = client.call("POST", "/api/plan?objective=time&top=3&headroom=0.2", example("llama3-70b-lora"))
    assert status == 200 and timeless(body) == timeless(json.loads(out))
    assert len(body["candidates"]) == 3 and body["objective"] == "time"


def test_as_of_is_the_cli_flag_and_the_server_default_is_pinned(client: Api) -> None:
    # the server inherits the suite's $GPUPLAN_AS_OF (tests/conftest.py); ?as_of= is `plan --as-of`
    status, body, _ = client.call("POST", "/api/plan", example("llama3-8b-qlora"))
    assert status == 200 and body["as_of"] == "2026-12-01"
    code, out, _ = cli("plan", "--example", "llama3-8b-qlora", "--format", "json", "--as-of", "2027-12-01")
    assert code == 0
    status, body, _ = client.call("POST", "/api/plan?as_of=2027-12-01", example("llama3-8b-qlora"))
    assert status == 200 and body["as_of"] == "2027-12-01" and timeless(body) == timeless(json.loads(out))
    status, body, _ = client.call("POST", "/api/plan?as_of=tomorrow", example("llama3-8b-qlora"))
    assert status == 422 and body["error"]["loc"] == ["query", "as_of"]


def test_estimate_is_what_the_cli_prints(client: Api) -> None:
    code, out, _ = cli("estimate", "--example", "llama3-8b-qlora", "--gpu", "l40s", "--format", "json")
    assert code == 0
    status, body, _ = client.call("POST", "/api/estimate?gpu=l40s", example("llama3-8b-qlora"))
    assert status == 200 and body == json.loads(out)


@pytest.mark.parametrize("name", ["gpus", "cpus", "platforms", "drives", "nics", "models"])
def test_catalog_is_what_the_cli_prints(client: Api, name: str) -> None:
    code, out, _ = cli("catalog", name, "--json")
    assert code == 0
    status, body, _ = client.call("GET", f"/api/catalog/{name}")
    assert status == 200 and body == json.loads(out) and len(body) > 5


def test_catalog_filters_and_rows(client: Api) -> None:
    code, out, _ = cli("catalog", "gpus", "--where", "memory_gb>=80", "--where", "market_class=datacenter", "--json")
    status, body, _ = client.call("GET", "/api/catalog/gpus?where=memory_gb%3E%3D80&where=market_class%3Ddatacenter")
    assert code == 0 and status == 200 and body == json.loads(out)
    assert body and all(g["memory_gb"] >= 80 for g in body)
    status, row, _ = client.call("GET", "/api/catalog/gpus/h100")  # an alias
    assert status == 200 and row["id"] == "h100-sxm-80gb" and row["source"] and row["as_of"]
    status, err, _ = client.call("GET", "/api/catalog/gpus/h1OO-sxm")
    assert status == 404 and err["error"]["code"] == "unknown-name"
    status, err, _ = client.call("GET", "/api/catalog/gpu")
    assert status == 404 and err["error"]["suggestions"] == ["gpus"]


def test_a_bad_field_is_named_with_what_is_allowed(client: Api) -> None:
    project = example("llama3-8b-qlora")
    project["workload"]["task"] = "finetune"
    status, body, _ = client.call("POST", "/api/plan", project)
    err = body["error"]
    assert status == 422 and err["field"] == "workload.task" and err["loc"] == ["workload", "task"]
    assert "full-finetune" in err["message"]
    code, _, stderr = cli("plan", str(_write(project)), "--format", "json")
    assert code == 2 and err["detail"] in stderr  # the same words as the CLI


def test_an_unknown_preset_gets_did_you_mean(client: Api) -> None:
    project = example("llama3-8b-qlora")
    project["model"] = {"preset": "lama-3.1-8b"}
    status, body, _ = client.call("POST", "/api/plan", project)
    assert status == 422 and body["error"]["code"] == "unknown-name"
    assert body["error"]["field"] == "model.preset" and "llama-3.1-8b" in body["error"]["suggestions"]


def test_nothing_fits_is_409_with_the_binding_constraint(client: Api) -> None:
    project = example("llama3-8b-qlora")
    project["goals"]["budget"] = {"amount": 1, "currency": "EUR"}
    status, body, _ = client.call("POST", "/api/plan", project)
    code, _, stderr = cli("plan", str(_write(project)))
    assert status == 409 and code == 1 and body["error"]["code"] == "infeasible"
    assert body["error"]["message"] in " ".join(stderr.split())


@pytest.mark.parametrize("raw", [b"[1, 2]", b"not json", b"\"a project\""])
def test_a_body_that_is_not_a_project(client: Api, raw: bytes) -> None:
    status, body, _ = client.call("POST", "/api/plan", raw=raw)
    assert status == 422 and "error" in body and body["error"]["message"]


@pytest.mark.parametrize("model,field", [({"trace": "os:getcwd"}, "model.trace"),
                                         ({"hf_config": "/etc/passwd"}, "model.hf_config")])
def test_the_server_runs_no_user_code_and_reads_no_user_file(client: Api, model: dict, field: str) -> None:
    project = {"model": model, "workload": {"task": "inference"}}
    status, body, _ = client.call("POST", "/api/plan", project)
    assert status == 422 and body["error"]["field"] == field and "model.config" in body["error"]["message"]


def test_a_pasted_config_plans_like_its_preset(client: Api) -> None:
    from gpuplan.catalog.loader import find_preset

    project = example("llama3-8b-qlora")
    status, by_preset, _ = client.call("POST", "/api/plan", project)
    project["model"] = {"config": find_preset("llama-3.1-8b").config}
    status2, by_config, _ = client.call("POST", "/api/plan", project)
    assert status == status2 == 200
    assert by_config["recommendation"]["gpu_id"] == by_preset["recommendation"]["gpu_id"]
    assert by_config["recommendation"]["memory"] == by_preset["recommendation"]["memory"]


@pytest.mark.parametrize("fmt,lang", [("html", "en"), ("md", "en"), ("html", "fr")])
def test_report_is_what_the_cli_writes(client: Api, fmt: str, lang: str) -> None:
    code, out, _ = cli("plan", "--example", "llama3-70b-serving", "--format", fmt, "--lang", lang)
    assert code == 0
    status, text, headers = client.call("POST", f"/api/report?format={fmt}&lang={lang}", example("llama3-70b-serving"))
    assert status == 200 and text.strip() == out.strip()
    assert headers["content-type"].startswith("text/html" if fmt == "html" else "text/markdown")


def test_summary_lines_are_the_plans(client: Api) -> None:
    from gpuplan.report.plan import layout_text, time_text
    from gpuplan.schema.plan import Candidate

    status, plan, _ = client.call("POST", "/api/plan", example("llama3-70b-lora"))
    status2, summary, _ = client.call("POST", "/api/summary", example("llama3-70b-lora"))
    assert status == status2 == 200
    rec = Candidate.model_validate(plan["recommendation"])
    rows = {r["key"]: r["value"] for r in summary["rows"]}
    assert summary["gpu_id"] == rec.gpu_id and rows["layout"] == layout_text(rec) and rows["time"] == time_text(rec)
    assert rec.gpu_name in rows["gpu"] and rec.server.platform_name in rows["server"]



def test_summary_in_french(client: Api) -> None:
    """?lang=fr: the page's summary rows and verdict in French (issue #27), the same figures."""
    status, summary, _ = client.call("POST", "/api/summary?lang=fr", example("llama3-70b-lora"))
    assert status == 200 and summary["verdict"].startswith("Louer ")
    rows = {r["key"]: r for r in summary["rows"]}
    assert rows["memory"]["label"] == "Mémoire par GPU" and "Gio" in rows["memory"]["value"]
    assert client.call("POST", "/api/summary?lang=de", example("llama3-70b-lora"))[0] == 422


def test_project_download_loads_as_the_same_project(client: Api, tmp_path: Path) -> None:
    project = example("llama3-8b-full-finetune")
    status, text, headers = client.call("POST", "/api/project", project)
    assert status == 200 and headers["content-type"].startswith("application/yaml")
    assert yaml.safe_load(text) == project
    path = tmp_path / "p.yaml"
    path.write_text(text)
    code, out, _ = cli("plan", str(path), "--format", "json")
    assert code == 0 and timeless(json.loads(out)) == timeless(client.call("POST", "/api/plan", project)[1])
    bad = {**project, "workload": {**project["workload"], "micro_batch_size": 0}}
    status, body, _ = client.call("POST", "/api/project", bad)
    assert status == 422 and body["error"]["field"] == "workload.micro_batch_size"


def test_scenarios_are_saved_listed_and_deleted(client: Api) -> None:
    a = client.call("POST", "/api/scenarios?name=same", example("llama3-8b-qlora"))
    b = client.call("POST", "/api/scenarios?name=same", example("llama3-70b-lora"))
    assert a[0] == b[0] == 201 and a[1]["id"] != b[1]["id"]  # saving never replaces
    listed = client.call("GET", "/api/scenarios")[1]
    ids = [s["id"] for s in listed]
    assert a[1]["id"] in ids and b[1]["id"] in ids
    got = client.call("GET", f"/api/scenarios/{b[1]['id']}")[1]
    assert got["project"] == example("llama3-70b-lora") and got["name"] == "same"
    assert client.call("DELETE", f"/api/scenarios/{a[1]['id']}")[0] == 204
    assert client.call("GET", f"/api/scenarios/{a[1]['id']}")[0] == 404
    assert client.call("DELETE", f"/api/scenarios/{a[1]['id']}")[0] == 404
    bad = client.call("POST", "/api/scenarios?name=x", {"model": {"preset": "x"}, "workload": {"task": "lora",
                                                                                               "micro_batch_size": 0}})
    assert bad[0] == 422 and bad[1]["error"]["field"] == "workload.micro_batch_size"
    assert all(s["name"] != "x" for s in client.call("GET", "/api/scenarios")[1])


def test_scenarios_outlive_the_server(tmp_path: Path) -> None:
    from .conftest import start_server

    proc, base = start_server(tmp_path)
    try:
        saved = Api(base).call("POST", "/api/scenarios?name=kept", example("vit-imagenet"))[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    proc, base = start_server(tmp_path)
    try:
        assert Api(base).call("GET", f"/api/scenarios/{saved['id']}")[1]["name"] == "kept"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_openapi_documents_the_project_body(client: Api) -> None:
    status, schema, _ = client.call("GET", "/openapi.json")
    assert status == 200
    comps = schema["components"]["schemas"]

    def refs(node: object) -> list[str]:
        if isinstance(node, dict):
            return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(schema):
        assert ref.removeprefix("#/components/schemas/") in comps, ref
    body = schema["paths"]["/api/plan"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Project"}
    assert set(comps["Project"]["properties"]) == set(Project.model_fields)
    assert comps["Project.Workload"]["properties"]["task"]["enum"] == [
        "pretrain", "full-finetune", "lora", "qlora", "inference", "dpo", "grpo"]


def test_the_page_loads_nothing_from_elsewhere(client: Api) -> None:
    status, html, headers = client.call("GET", "/")
    assert status == 200 and '<script src="/static/app.js"' in html
    assert "default-src 'self'" in headers["content-security-policy"]
    assert "http://" not in html and "https://" not in html
    status, js, _ = client.call("GET", "/static/app.js")
    assert status == 200 and "/api/plan" in js and "https://" not in js


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path) -> None:
    global TMP
    TMP = tmp_path


def _write(project: dict) -> Path:
    path = TMP / "project.yaml"
    path.write_text(yaml.safe_dump(project))
    return path


def test_a_post_must_say_it_is_json(client: Api) -> None:
    # without a JSON content type another site's page could post without a CORS preflight: refused
    for ctype in ("text/plain", ""):
        status, body, _ = client.call("POST", "/api/scenarios?name=csrf",
                                      raw=json.dumps(example("vit-imagenet")).encode(),
                                      headers={"Content-Type": ctype})
        assert status == 422 and "error" in body, (ctype, status, body)
    assert all(s["name"] != "csrf" for s in client.call("GET", "/api/scenarios")[1])


def test_only_this_machines_names_are_served(client: Api) -> None:
    # a page whose name rebinds to 127.0.0.1 sends its own Host header
    status, _, _ = client.call("GET", "/api/scenarios", headers={"Host": "evil.example"})
    assert status == 400
    assert client.call("GET", "/api/scenarios", headers={"Host": "localhost"})[0] == 200


def test_infinite_or_huge_numbers_are_input_errors(client: Api) -> None:
    project = example("llama3-8b-qlora")
    status, body, _ = client.call("POST", "/api/plan", raw=json.dumps(project).replace(
        '"model_scale": 1.0', '"model_scale": Infinity').encode())
    assert status == 422 and body["error"]["field"] == "growth.model_scale"


def test_a_pasted_config_error_names_its_key(client: Api) -> None:
    status, body, _ = client.call("POST", "/api/plan", {"model": {"config": {"model_type": "llama"}},
                                                        "workload": {"task": "inference"}})
    assert status == 422 and body["error"]["field"] == "model.config.hidden_size"


def test_models_are_not_filtered(client: Api) -> None:
    status, body, _ = client.call("GET", "/api/catalog/models?where=parameters%3E%3D1")
    assert status == 422 and body["error"]["field"] == "where"


def test_serve_checks_its_files_at_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "gpuplan", "serve", "--port", "0", "--db", str(tmp_path / "s.sqlite"),
                          "--prices", str(tmp_path / "missing.csv")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "missing.csv" in run.stderr and "Traceback" not in run.stderr
