"""benchmarks/serving_cases.yaml, the published serving measurements: every row names its source, date and setup
with ids gpuplan knows and positive numbers, and the benchmark's project builder turns every row into a project
that `gpuplan.api.estimate` accepts (issue 14, point 6)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from gpuplan import api
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import load_presets

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "serving_accuracy.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


bench = _load("serving_accuracy", BENCH)
CASES = bench.load_cases()
IDS = [c["id"] for c in CASES]

SETUP = ("engine", "engine_version", "model", "model_as_published", "gpu", "gpu_as_published", "gpus", "tp", "pp",
         "weights_dtype", "kv_cache_dtype", "prompt_tokens", "output_tokens", "batching", "load", "measured",
         "statistic", "table")
MEASURED = {"output_tokens_per_s", "output_tokens_per_s_per_gpu", "itl_s", "ttft_s", "e2e_s"}
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
MODELS = set(load_presets())


def test_enough_rows_and_unique_ids():
    assert len(CASES) >= 25
    assert len(set(IDS)) == len(IDS)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.-]*", i) for i in IDS)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_row_has_source_date_and_setup(case):
    assert str(case["source"]).startswith("https://"), "source must be a URL"
    missing = [k for k in SETUP if case.get(k) in (None, "")]
    assert not missing, f"missing setup fields {missing}"
    as_of = str(case["as_of"])
    assert DATE.match(as_of), f"as_of {as_of!r} is not YYYY-MM[-DD]"
    year, month, *day = (int(x) for x in as_of.split("-"))
    assert dt.date(year, month, day[0] if day else 1) <= dt.date.today()
    assert isinstance(case.get("assumed", []), list)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_row_ids_and_numbers(case):
    catalog = builtin_catalog()
    assert case["gpu"] in catalog.gpus.rows, f"unknown GPU {case['gpu']}"
    assert case["model"] in MODELS, f"unknown model preset {case['model']}"
    assert case["batching"] in ("static", "continuous")
    assert case["statistic"] in ("mean", "p50")
    assert case["weights_dtype"] in ("bf16", "fp16", "fp8", "nvfp4", "mxfp4")
    assert case["kv_cache_dtype"] in ("bf16", "fp16", "fp8")
    for key in ("gpus", "tp", "pp", "prompt_tokens", "output_tokens"):
        assert isinstance(case[key], int) and case[key] > 0, key
    assert case["gpus"] % (case["tp"] * case["pp"]) == 0
    load = case["load"]
    assert ("concurrency" in load) + ("request_rate" in load) + bool(load.get("max")) == 1, load
    for key in ("concurrency", "request_rate", "max_concurrency"):
        if load.get(key) is not None:
            assert load[key] > 0, key
    assert case["measured"] and set(case["measured"]) <= MEASURED
    assert all(isinstance(v, (int, float)) and v > 0 for v in case["measured"].values())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_builder_runs_through_the_api(case):
    batch = 8 if case["load"].get("max") else None
    result = api.estimate(bench.build_project(case, batch)).model_dump(mode="json")
    assert result["inference"], "an inference project returns an inference section"
    pred, keys = bench.read_prediction(result, case)
    assert set(pred) == set(keys) and pred
    assert all(v > 0 for v in pred.values())


def test_benchmark_json_runs():
    rows = [bench.evaluate(c) for c in CASES[:3]]
    assert all("metrics" in r for r in rows)
    assert bench.summarize(rows)
