"""The page end to end in headless Chromium (Debian's `chromium`, which .ci/run installs), driven by Playwright,
against a real `gpuplan serve`. Without Chromium these tests skip, unless GPUPLAN_REQUIRE_BROWSER=1 (CI sets it)
makes its absence a failure."""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpuplan.catalog.loader import example_path

from .conftest import Api

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("GPUPLAN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("GPUPLAN_REQUIRE_BROWSER") == "1":
        raise RuntimeError("GPUPLAN_REQUIRE_BROWSER=1 but no chromium: install Debian's chromium package")
    pytest.skip("no chromium (Debian package `chromium`); .ci/run installs it", allow_module_level=True)

# a closed network: without these, Chromium keeps trying to reach Google's services
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, f"the page raised: {errors}"


def example(name: str) -> dict:
    return yaml.safe_load(example_path(name).read_text(encoding="utf-8"))


def link_project(url: str) -> dict:
    """The project the page put in its URL (the shared link)."""
    text = url.split("#project=", 1)[1]
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def link_for(server: str, project: dict) -> str:
    text = base64.urlsafe_b64encode(json.dumps(project).encode()).decode().rstrip("=")
    return f"{server}/#project={text}"


def planned(page: Any, project_name: str) -> None:
    """Wait until the page shows the plan of the named project."""
    page.wait_for_function("name => document.querySelector('#status').textContent.startsWith('Plan for ' + name)",
                           arg=project_name)


def shown_recommendation(page: Any) -> tuple[str, int, int]:
    el = page.locator("#recommended-gpu")
    return (el.get_attribute("data-gpu-id"), int(el.get_attribute("data-gpus-per-server")),
            int(el.get_attribute("data-servers")))


def api_recommendation(client: Api, project: dict) -> tuple[str, int, int]:
    status, plan, _ = client.call("POST", "/api/plan", project)
    assert status == 200, plan
    rec = plan["recommendation"]
    return rec["gpu_id"], rec["gpus_per_server"], rec["servers"]


def test_the_page_plans_the_default_example_as_the_api_does(page: Any, server: str, client: Api) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    project = link_project(page.url)
    assert project == example("llama3-8b-qlora")
    assert shown_recommendation(page) == api_recommendation(client, project)
    # the heading says the action the plan supports (issue #27: it said "Get" a server the plan rents)
    status, plan, _ = client.call("POST", "/api/plan", project)
    verb = plan["recommendation"]["action"]["verb"]
    assert page.locator("#summary h2").inner_text().startswith({"rent": "Rent ", "buy": "Buy "}[verb])
    frame = page.frame_locator("#report")
    assert frame.locator("h1").inner_text().endswith("llama3-8b-qlora")
    assert frame.locator("figure svg").count() == 4  # the report's figures, in the page


def test_filling_the_form_changes_the_plan(page: Any, server: str, client: Api) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.select_option("#example", "llama3-70b-serving")
    planned(page, "llama3-70b-serving")
    assert page.locator('[data-path="workload.context_length"]').is_visible()
    assert not page.locator('[data-path="workload.micro_batch_size"]').is_visible()  # a training field
    before = link_project(page.url)
    page.fill('[data-path="workload.batch_size"]', "8")
    page.press('[data-path="workload.batch_size"]', "Enter")  # commits the field (change event)
    page.wait_for_selector("#change:not([hidden])")
    assert "workload.batch_size to 8" in page.inner_text("#change")
    after = link_project(page.url)
    assert after["workload"]["batch_size"] == 8 and before["workload"]["batch_size"] != 8
    assert {k: v for k, v in after.items() if k != "workload"} == {k: v for k, v in before.items() if k != "workload"}
    assert shown_recommendation(page) == api_recommendation(client, after)
    page.select_option('[data-path="goals.objective"]', "time")
    page.wait_for_function("() => document.querySelector('#change').textContent.includes('goals.objective')")
    planned(page, "llama3-70b-serving")
    assert link_project(page.url)["goals"]["objective"] == "time"
    assert shown_recommendation(page) == api_recommendation(client, link_project(page.url))


def test_a_bad_input_is_explained_next_to_its_field(page: Any, server: str) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.fill('[data-path="workload.micro_batch_size"]', "0")
    page.press('[data-path="workload.micro_batch_size"]', "Enter")
    slot = page.locator('[data-err-for="workload.micro_batch_size"]')
    slot.wait_for(state="visible")
    assert "greater than 0" in slot.inner_text()
    assert page.get_attribute('[data-path="workload.micro_batch_size"]', "aria-invalid") == "true"
    assert page.locator("#summary").is_hidden()
    page.fill('[data-path="workload.micro_batch_size"]', "2")
    page.press('[data-path="workload.micro_batch_size"]', "Enter")
    planned(page, "llama3-8b-qlora")
    assert slot.inner_text() == ""
    page.fill("#model-preset", "lama-3.1-8b")
    page.press("#model-preset", "Enter")
    preset_slot = page.locator('[data-err-for="model.preset"]')
    preset_slot.wait_for(state="visible")
    assert "did you mean 'llama-3.1-8b'" in preset_slot.inner_text()


def test_a_shared_link_opens_the_same_plan(page: Any, server: str, client: Api) -> None:
    project = example("vit-imagenet")
    project["goals"]["deadline_days"] = 20
    page.goto(link_for(server, project))
    planned(page, "vit-imagenet")
    assert page.input_value('[data-path="goals.deadline_days"]') == "20"
    assert link_project(page.url) == project
    assert shown_recommendation(page) == api_recommendation(client, project)
    page.click("#share")
    assert link_project(page.input_value("#share-link")) == project


def test_a_broken_link_says_so(page: Any, server: str) -> None:
    page.goto(server + "/#project=bm90IGpzb24")  # base64 of "not json"
    page.wait_for_selector("#form-error:not(:empty)")
    assert "could not be read" in page.inner_text("#form-error")


def test_a_pasted_config_is_planned(page: Any, server: str, client: Api) -> None:
    from gpuplan.catalog.loader import find_preset

    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.check("input[name=model-source][value=config]")
    page.fill("#model-config", "{not json")
    page.locator("#model-config").dispatch_event("change")
    assert "not valid JSON" in page.inner_text('[data-err-for="model.config"]')
    config = find_preset("mistral-7b").config
    page.fill("#model-config", json.dumps(config))
    page.locator("#model-config").dispatch_event("change")
    page.wait_for_function("() => document.querySelector('#change').textContent.includes('model.config')")
    planned(page, "llama3-8b-qlora")
    project = link_project(page.url)
    assert project["model"] == {"config": config}
    assert shown_recommendation(page) == api_recommendation(client, project)


def test_downloads_are_the_project_and_its_report(page: Any, server: str, client: Api) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    with page.expect_download() as got:
        page.click("#download-project")
    assert got.value.suggested_filename == "llama3-8b-qlora.yaml"
    assert yaml.safe_load(open(got.value.path(), encoding="utf-8")) == example("llama3-8b-qlora")
    page.select_option("#lang", "fr")
    with page.expect_download() as got:
        page.click("#download-report")
    html = open(got.value.path(), encoding="utf-8").read()
    assert got.value.suggested_filename == "llama3-8b-qlora-plan.html"
    assert html.startswith("<!DOCTYPE html>") and 'lang="fr"' in html[:200]


def test_saved_scenarios_compare_side_by_side(page: Any, server: str, client: Api) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    names = []
    for ex in ("llama3-70b-lora", "llama3-8b-full-finetune"):  # not the example already shown: its name would
        # match planned() before the reload, whose form fill then rewrites the scenario name
        page.select_option("#example", ex)
        planned(page, ex)
        name = f"e2e {ex}"
        page.fill("#scenario-name", name)
        with page.expect_response(lambda r: r.url.split("?")[0].endswith("/api/scenarios")
                                  and r.request.method == "POST") as saved:
            page.click("#save-scenario")
        assert saved.value.status == 201, saved.value.text()
        page.wait_for_selector(f"#scenario-list li:has-text('{name}')")
        names.append(name)
    for name in names:
        page.locator(f"#scenario-list li:has-text('{name}') input[type=checkbox]").check()
    page.click("#compare")
    page.wait_for_selector("#comparison:not([hidden])")
    heads = page.locator("#comparison tr").first.locator("th").all_inner_texts()
    assert heads[1:] == names
    gpu_cells = page.locator("#comparison tr[data-key=gpu] td").all_inner_texts()
    for ex, cell in zip(("llama3-70b-lora", "llama3-8b-full-finetune"), gpu_cells):
        summary = client.call("POST", "/api/summary", example(ex))[1]
        assert cell == next(r["value"] for r in summary["rows"] if r["key"] == "gpu")


def test_the_software_stack_changes_the_time(page: Any, server: str, client: Api) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    options = page.locator('[data-path="workload.stack"] option').all_inner_texts()
    assert options[1:] == ["tuned", "eager"] and options[0].startswith("(default: tuned")  # from the schema
    before = page.inner_text('#summary-rows dd[data-key="time"]')
    # the plan times a QLoRA on its default framework, the HF Trainer's eager stack (issue #30): tuned is the change
    page.select_option('[data-path="workload.stack"]', "tuned")
    page.wait_for_function("() => document.querySelector('#change').textContent.includes('workload.stack')")
    planned(page, "llama3-8b-qlora")
    project = link_project(page.url)
    assert project["workload"]["stack"] == "tuned"
    summary = client.call("POST", "/api/summary", project)[1]
    after = page.inner_text('#summary-rows dd[data-key="time"]')
    assert after == next(r["value"] for r in summary["rows"] if r["key"] == "time") and after != before


def test_a_budget_without_an_amount_is_asked_for_not_dropped(page: Any, server: str) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.fill('[data-path="goals.budget.amount"]', "")
    page.press('[data-path="goals.budget.amount"]', "Enter")  # no amount: no budget, currency and period go too
    planned(page, "llama3-8b-qlora")
    assert "budget" not in link_project(page.url).get("goals", {})
    assert page.input_value('[data-path="goals.budget.currency"]') == ""
    page.select_option('[data-path="goals.budget.currency"]', "USD")  # a currency alone: the amount is missing
    slot = page.locator('[data-err-for="goals.budget.amount"]')
    slot.wait_for(state="visible")
    assert "required" in slot.inner_text().lower()
    page.fill('[data-path="goals.budget.amount"]', "50000")
    page.press('[data-path="goals.budget.amount"]', "Enter")
    planned(page, "llama3-8b-qlora")
    assert link_project(page.url)["goals"]["budget"] == {"currency": "USD", "amount": 50000}


def test_editing_a_loaded_scenario_leaves_the_saved_one(page: Any, server: str, client: Api) -> None:
    saved = example("llama3-8b-full-finetune")
    made = client.call("POST", "/api/scenarios?name=e2e-kept", saved)[1]
    other = client.call("POST", "/api/scenarios?name=e2e-other", example("llama3-8b-qlora"))[1]
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    row = page.locator(f"#scenario-list li[data-id='{made['id']}']")
    row.locator("button", has_text="Load").click()
    planned(page, "llama3-8b-full-finetune")
    page.fill('[data-path="workload.sequence_length"]', "512")
    page.press('[data-path="workload.sequence_length"]', "Enter")
    page.wait_for_function("() => document.querySelector('#change').textContent.includes('sequence_length')")
    edited = page.inner_text('#summary-rows dd[data-key="memory"]')
    row.locator("input[type=checkbox]").check()
    page.locator(f"#scenario-list li[data-id='{other['id']}'] input[type=checkbox]").check()
    page.click("#compare")
    page.wait_for_selector("#comparison:not([hidden])")
    cell = page.locator("#comparison tr[data-key=memory] td").first.inner_text()
    summary = client.call("POST", "/api/summary", saved)[1]
    assert cell == next(r["value"] for r in summary["rows"] if r["key"] == "memory") != edited


def test_the_serving_example_shows_its_latency_percentiles_against_the_objective(page: Any, server: str,
                                                                                  client: Api) -> None:
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    assert not page.locator("#serving-latency").is_visible()  # a training plan has no latency table
    page.select_option("#example", "llama3-70b-serving")
    planned(page, "llama3-70b-serving")
    table = page.locator("#serving-latency")
    table.wait_for(state="visible")
    rows = [[td.inner_text() for td in tr.locator("td").all()] for tr in table.locator("tbody tr").all()]
    assert [r[0] for r in rows] == ["time to first token", "inter-token latency", "end to end"]
    status, plan, _ = client.call("POST", "/api/plan", link_project(page.url))
    assert status == 200, plan
    inf = plan["candidates"][0]["inference"]
    for row, key in zip(rows, ("ttft_s", "itl_s", "e2e_s")):
        p50, p90, p99 = (float(x) for x in row[1:4])
        assert p50 <= p90 <= p99
        assert [p50, p90, p99] == pytest.approx([inf[key][q] for q in ("p50", "p90", "p99")], rel=1e-2)
    # the example's objective is target_latency_s: 30 s end to end at p90; the other two have none
    assert rows[2][4] == "30 at p90"
    assert rows[0][4] == rows[1][4] == "none"
    assert "p50" in table.inner_text() and "p99" in table.inner_text()


def test_the_pages_labels_follow_the_language(page: Any, server: str, client: Api) -> None:
    """Issue #27: the report switched to French while the page's own labels stayed English."""
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.select_option("#lang", "fr")
    assert page.locator("html").get_attribute("lang") == "fr"
    assert page.locator("fieldset legend").first.inner_text() == "Projet"
    assert page.locator("#plan-button").inner_text() == "Planifier"
    status, plan, _ = client.call("POST", "/api/plan", link_project(page.url))
    verb = plan["recommendation"]["action"]["verb"]
    assert page.locator("#summary h2").inner_text().startswith({"rent": "Louer ", "buy": "Acheter "}[verb])
    page.select_option("#lang", "en")
    assert page.locator("fieldset legend").first.inner_text() == "Project"
    assert page.locator("#plan-button").inner_text() == "Plan"


def test_a_chat_service_for_200_users_with_its_slo_is_planned_on_the_page(page: Any, server: str,
                                                                          client: Api) -> None:
    """Issue #29: the form offered batch size and target latency only, so a chat service for 200 users with a TTFT
    objective could not be entered. It takes users, think time, arrival rate, use case, engine and the SLO."""
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.select_option("#example", "llama3-70b-serving")
    planned(page, "llama3-70b-serving")
    for path, value in (("workload.users", "200"), ("workload.think_time_s", "20"),
                        ("workload.context_length", "2448"), ("workload.output_tokens", "400"),
                        ("workload.slo.ttft_s", "2"), ("workload.slo.itl_s", "0.05"),
                        ("workload.target_latency_s", "")):
        page.fill(f'[data-path="{path}"]', value)
    page.select_option('[data-path="workload.use_case"]', "chat")
    page.click("#plan-button")
    # the plan shown is the service's: its latency table holds the project's own objectives
    page.wait_for_function("() => { const td = document.querySelector('#serving-latency tbody tr td:last-child');"
                           " return td && td.textContent === '2 at p90'; }")
    project = link_project(page.url)
    w = project["workload"]
    assert (w["users"], w["think_time_s"], w["use_case"], w["slo"]) == (200, 20, "chat", {"ttft_s": 2, "itl_s": 0.05})
    assert "target_latency_s" not in w
    assert shown_recommendation(page) == api_recommendation(client, project)
    status, plan, _ = client.call("POST", "/api/plan", project)
    inf = plan["recommendation"]["inference"]
    assert inf["load"] == "users" and inf["objectives"]["origins"]["ttft"] == "slo"


def test_the_serving_example_draws_latency_against_load_with_its_slo(page: Any, server: str, client: Api) -> None:
    """Issue #29: the page draws the recommendation's latency_curve, one panel per latency, each percentile a line
    through the API's points, the example's objective (30 s end to end at p90) across its panel and the planned
    load marked; a training plan draws none."""
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    assert not page.locator("#latency-chart").is_visible()
    page.select_option("#example", "llama3-70b-serving")
    planned(page, "llama3-70b-serving")
    chart = page.locator("#latency-chart")
    chart.wait_for(state="visible")
    status, plan, _ = client.call("POST", "/api/plan", link_project(page.url))
    assert status == 200, plan
    curve = plan["recommendation"]["latency_curve"]
    assert [s.get_attribute("data-metric") for s in chart.locator("svg").all()] == ["ttft", "itl", "e2e"]
    for metric in ("ttft", "itl", "e2e"):
        paths = chart.locator(f'svg[data-metric="{metric}"] path.series')
        assert [int(p.get_attribute("data-percentile")) for p in paths.all()] == curve["percentiles"] == [50, 90]
        for p in paths.all():  # a vertex per point of the API's curve
            assert p.get_attribute("d").count("L") == len(curve["points"]) - 1
        planned_line = chart.locator(f'svg[data-metric="{metric}"] line.planned')
        assert float(planned_line.get_attribute("data-value")) == pytest.approx(
            plan["recommendation"]["inference"]["requests_per_s"])
    # the SLO line: the end-to-end objective only, at its value, drawn within the panel
    slo = chart.locator('svg[data-metric="e2e"] line.slo')
    assert slo.count() == 1 and float(slo.get_attribute("data-value")) == 30
    box, panel = slo.bounding_box(), chart.locator('svg[data-metric="e2e"]').bounding_box()
    assert box is not None and panel is not None and panel["y"] < box["y"] < panel["y"] + panel["height"]
    assert chart.locator('svg[data-metric="ttft"] line.slo').count() == 0
    assert "p90" in chart.inner_text()


def test_a_prefix_cache_hit_rate_is_entered_on_the_page(page: Any, server: str, client: Api) -> None:
    """Issue #29: the serving form takes the prefix-cache hit rate (workload.prefix_cache.hit_rate), validated as
    the CLI validates it, and the plan is made with it."""
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    page.select_option("#example", "llama3-70b-serving")
    planned(page, "llama3-70b-serving")
    field = '[data-path="workload.prefix_cache.hit_rate"]'
    page.fill(field, "1.5")
    page.click("#plan-button")
    page.wait_for_function("() => document.querySelector('[data-err-for=\"workload.prefix_cache.hit_rate\"]')"
                           ".textContent.length > 0")
    page.fill(field, "0.5")
    page.click("#plan-button")
    page.wait_for_function("() => location.hash.length > 0 && document.querySelector('#status').textContent"
                           ".startsWith('Plan for')")
    page.wait_for_function("() => !document.querySelector('[data-err-for=\"workload.prefix_cache.hit_rate\"]')"
                           ".textContent")
    project = link_project(page.url)
    assert project["workload"]["prefix_cache"] == {"hit_rate": 0.5}
    assert shown_recommendation(page) == api_recommendation(client, project)


def planned_with(page: Any, done: Any) -> dict:
    """Wait until the page's link holds a project `done` accepts and the plan shown is that project's."""
    for _ in range(200):
        if "#project=" in page.url and done(link_project(page.url)):
            break
        page.wait_for_timeout(150)
    project = link_project(page.url)
    errors = "Array.from(document.querySelectorAll('.err')).map(e => e.textContent).filter(t => t).join(' | ')"
    assert done(project), (page.locator("#status").inner_text(), page.evaluate(errors))
    planned(page, project["name"])
    page.wait_for_function("() => !document.querySelector('#status').textContent.includes('…')")
    return project


def test_post_training_sections_are_entered_on_the_page(page: Any, server: str, client: Api) -> None:
    """Issue #31: the form offered tasks dpo and grpo with no fields for their sections. DPO takes its method and
    reference, GRPO its method, KL, group and lengths; each section shows for its own task only, and leaves the
    project when the task changes."""
    page.goto(server + "/")
    planned(page, "llama3-8b-qlora")
    assert not page.locator('[data-path="workload.dpo.reference"]').is_visible()
    assert not page.locator('[data-path="workload.grpo.group_size"]').is_visible()
    page.select_option("#example", "llama3-8b-dpo")
    planned(page, "llama3-8b-dpo")
    assert not page.locator('[data-path="workload.grpo.group_size"]').is_visible()
    page.select_option('[data-path="workload.dpo.reference"]', "precomputed")
    project = planned_with(page, lambda p: p["workload"].get("dpo", {}).get("reference") == "precomputed")
    assert shown_recommendation(page) == api_recommendation(client, project)

    page.select_option('[data-path="workload.task"]', "grpo")
    assert page.locator('[data-path="workload.grpo.group_size"]').is_visible()
    assert not page.locator('[data-path="workload.dpo.reference"]').is_visible()
    page.select_option('[data-path="workload.grpo.kl"]', "false")
    # GRPO's sequences are its prompt + response: the DPO pairs' sequence length is refused, next to the section
    for path, value in (("workload.grpo.group_size", "4"), ("workload.grpo.prompts_per_step", "64"),
                        ("workload.grpo.prompt_length", "256"), ("workload.grpo.response_length", "1024"),
                        ("workload.sequence_length", "")):
        page.fill(f'[data-path="{path}"]', value)
        page.dispatch_event(f'[data-path="{path}"]', "change")
    project = planned_with(page, lambda p: p["workload"].get("grpo", {}).get("kl") is False)
    w = project["workload"]
    assert w["task"] == "grpo" and "dpo" not in w
    assert w["grpo"] == {"group_size": 4, "prompts_per_step": 64, "prompt_length": 256, "response_length": 1024,
                         "kl": False}
    assert shown_recommendation(page) == api_recommendation(client, project)
