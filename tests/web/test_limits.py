"""The web API under bad input and at its limits: one JSON error shape for every error (unknown routes, methods,
unreadable bodies, the Host check), validated ids, bounded bodies and echoes, a plan time budget, a plan cache keyed
on the content of the price files, a capped scenario store."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from gpuplan.catalog.loader import example_path

from .conftest import Api, start_server


def example(name: str) -> dict:
    return yaml.safe_load(example_path(name).read_text(encoding="utf-8"))


def is_error(body: object, code: str | None = None) -> bool:
    return (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"]["message"], str)
            and "Traceback" not in body["error"]["message"] and (code is None or body["error"]["code"] == code))


def test_unknown_routes_methods_and_bodies_answer_the_error_shape(client: Api) -> None:
    status, body, _ = client.call("GET", "/api/nothing-here")
    assert status == 404 and is_error(body, "not-found")
    status, body, _ = client.call("GET", "/static/missing.js")
    assert status == 404 and is_error(body, "not-found")
    status, body, headers = client.call("OPTIONS", "/api/scenarios")
    assert status == 405 and is_error(body, "method-not-allowed") and headers["allow"] == "GET, POST"
    status, body, headers = client.call("PUT", "/api/scenarios/1")
    assert status == 405 and is_error(body) and headers["allow"] == "DELETE, GET"
    status, body, _ = client.call("POST", "/api/plan", raw=b"\xff\xfe\x00garbage")
    assert status == 422 and is_error(body, "input-invalid") and body["error"]["field"] == ""
    status, body, _ = client.call("GET", "/api/scenarios", headers={"Host": "evil.example"})
    assert status == 400 and is_error(body, "bad-host")


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("sid", [str(2**70), "9223372036854775808", "0", "-1"])
def test_scenario_ids_are_validated(client: Api, method: str, sid: str) -> None:
    status, body, _ = client.call(method, f"/api/scenarios/{sid}")
    assert status == 422 and is_error(body, "input-invalid") and body["error"]["field"] == "path.scenario_id"


def test_an_unknown_scenario_points_at_what_exists(client: Api) -> None:
    for i in range(13):  # more than 12 known: the catalog's "`gpuplan catalog NAMEs` lists all" would appear
        assert client.call("POST", f"/api/scenarios?name=fill-for-404-{i}", example("vit-imagenet"))[0] == 201
    status, body, _ = client.call("GET", "/api/scenarios/9223372036854775807")
    assert status == 404 and is_error(body, "unknown-name")
    assert "gpuplan catalog" not in body["error"]["message"] and "GET /api/scenarios" in body["error"]["message"]


def _post(base: str, path: str, chunks: int, size: int, length: int | None = None) -> tuple[int, dict]:
    """POST `chunks` x `size` bytes; with `length`, a Content-Length header saying so (and the body cut short),
    else chunked, with no length said."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader(*(("Content-Length", str(length)) if length else ("Transfer-Encoding", "chunked")))
        conn.endheaders()
        try:
            for _ in range(chunks):
                conn.send(b" " * size if length else f"{size:x}\r\n".encode() + b" " * size + b"\r\n")
            if not length:
                conn.send(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed before reading it all
        res = conn.getresponse()
        return res.status, json.loads(res.read())
    finally:
        conn.close()


def test_an_oversized_body_is_413(client: Api) -> None:
    status, body = _post(client.base, "/api/plan", chunks=1, size=10, length=3_000_000)  # said: answered at once
    assert status == 413 and is_error(body, "too-large")
    status, body = _post(client.base, "/api/scenarios?name=big", chunks=40, size=100_000)  # not said: counted
    assert status == 413 and is_error(body, "too-large")
    assert all(s["name"] != "big" for s in client.call("GET", "/api/scenarios")[1])
    assert client.call("POST", "/api/plan", example("vit-imagenet"))[0] == 200  # and the server still answers


def test_long_inputs_are_not_echoed(client: Api) -> None:
    long = "q" * 20_000
    project = example("llama3-8b-qlora")
    for where, body in (("model.preset", {**project, "model": {"preset": long}}), ("name", {**project, "name": long})):
        status, err, _ = client.call("POST", "/api/plan", body)
        assert status == 422 and err["error"]["field"] == where
        text = json.dumps(err)
        assert len(text) < 3000 and not re.search(r"q{201}", text), text[:300]
    status, err, _ = client.call("GET", f"/api/examples/{long[:5000]}")
    assert status == 404 and len(json.dumps(err)) < 3000


def test_a_plan_over_the_time_budget_is_503_and_the_server_goes_on(tmp_path: Path) -> None:
    proc, base = start_server(tmp_path, "--plan-timeout", "0.01")
    try:
        api = Api(base)
        status, body, _ = api.call("POST", "/api/plan", example("llama3-70b-lora"))
        assert status == 503 and is_error(body, "timeout")
        assert api.call("GET", "/api/examples")[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_budget_stops_the_computation() -> None:
    from gpuplan.web.errors import WebError
    from gpuplan.web.planning import within_budget

    def forever() -> None:
        while True:
            pass

    before = threading.active_count()
    with pytest.raises(WebError) as caught:
        within_budget(forever, 0.2)
    assert caught.value.status == 503
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before  # the thread ended: no CPU left spinning
    assert within_budget(lambda: 42, 5) == 42


def test_the_plan_cache_is_keyed_on_the_price_files_content(tmp_path: Path) -> None:
    from gpuplan.web.planning import Planner

    quote = tmp_path / "quote.yaml"
    row = ("hosting:\n  - id: acme-test\n    provider: ACME Hosting\n    gpu_id: h100-sxm-80gb\n    gpus: 8\n"
           "    monthly: {m}\n    setup: 0\n    currency: EUR\n    min_months: 1\n    includes: [power]\n"
           "    source: test quote\n    as_of: 2026-11-01\n")
    quote.write_text(row.format(m=100))
    planner = Planner(price_files=[quote])
    project = example("llama3-70b-serving")
    first = planner.plan(project, None, 3, None)
    assert planner.plan(project, None, 3, None) is first and planner.computed == 1  # cached
    quote.write_text(row.format(m=900))
    second = planner.plan(project, None, 3, None)
    assert planner.computed == 2 and second is not first


def test_the_scenario_store_is_capped(tmp_path: Path) -> None:
    from gpuplan.web.errors import WebError
    from gpuplan.web.scenarios import MAX_SCENARIO_BYTES, ScenarioStore

    store = ScenarioStore(tmp_path / "s.sqlite", max_scenarios=3)
    ids = [store.save(f"s{i}", {"i": i}).id for i in range(3)]
    with pytest.raises(WebError) as full:
        store.save("one more", {"i": 3})
    assert full.value.status == 409 and "delete some" in full.value.message
    store.delete(ids[0])
    store.save("now it fits", {"i": 4})
    with pytest.raises(WebError) as big:
        store.save("big", {"x": "y" * MAX_SCENARIO_BYTES})
    assert big.value.status == 413
    assert [s.name for s in store.list()] == ["s1", "s2", "now it fits"]


def test_a_non_finite_number_or_a_bug_is_a_one_line_internal_error() -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from gpuplan.web.app import json_response
    from gpuplan.web.errors import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)

    @app.get("/inf")
    def inf() -> object:
        return json_response({"score": float("inf")})

    @app.get("/bug")
    def bug() -> object:
        raise RuntimeError("first line\nsecond line")

    test = TestClient(app, raise_server_exceptions=False)
    for path in ("/inf", "/bug"):
        res = test.get(path)
        body = res.json()
        assert res.status_code == 500 and is_error(body, "internal"), res.text
        assert "\n" not in body["error"]["message"] and "Infinity" not in res.text
    assert "second line" not in test.get("/bug").json()["error"]["message"]
