"""The GPU calibration: benchmarks/device_cases.yaml holds valid gpuplan projects, scripts/device_calibration.py
resolves them as gpuplan does, and its --smoke mode runs end to end on CPU into a JSON that
benchmarks/device_accuracy.py reads."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuplan.api import estimate
from gpuplan.catalog.loader import parse_project
from gpuplan.schema.project import LoraSpec, Workload

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "benchmarks" / "device_cases.yaml"
SCRIPT = ROOT / "scripts" / "device_calibration.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


script = _load("device_calibration", SCRIPT)


def _tracer_families() -> tuple[set, set, set]:
    """gpuplan.trace.build's model families, read without importing torch."""
    tree = ast.parse((ROOT / "src" / "gpuplan" / "trace" / "build.py").read_text())
    found = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and t.id in ("DECODERS", "SEQ2SEQ", "ENCODERS")}
    return found["DECODERS"], found["SEQ2SEQ"], found["ENCODERS"]
CASE_LIST = yaml.safe_load(CASES.read_text())["cases"]


def test_case_ids_are_unique() -> None:
    ids = [c["id"] for c in CASE_LIST]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASE_LIST, ids=[c["id"] for c in CASE_LIST])
def test_case_is_a_project_the_script_resolves_as_gpuplan(case: dict) -> None:
    parse_project(case["project"])
    est = estimate(case["project"], gpu=yaml.safe_load(CASES.read_text())["gpu"], base_dir=CASES.parent)
    assert est.memory.fits, f"{case['id']} does not fit the calibration GPU by gpuplan's own estimate"
    config = json.loads((CASES.parent / case["project"]["model"]["hf_config"]).read_text())
    w = script.resolve_workload(case["project"]["workload"], config)
    shape = ("batch_size", "context_length") if w["task"] == "inference" else ("micro_batch_size", "sequence_length")
    assert {k: w[k] for k in shape} == {k: est.workload[k] for k in shape}
    if w["task"] == "lora":
        assert w["lora"]["targets"] == ["all-linear"] or set(w["lora"]["targets"]) <= {
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def test_script_defaults_are_gpuplans() -> None:
    fields = Workload.model_fields
    for key, value in script.WORKLOAD_DEFAULTS.items():
        assert fields[key].default == value, key
    lora = LoraSpec()
    assert (lora.rank, lora.alpha, lora.targets) == tuple(script.LORA_DEFAULTS[k] for k in ("rank", "alpha", "targets"))


def test_script_builds_the_tracers_model_classes() -> None:
    assert (script.DECODERS, script.SEQ2SEQ, script.ENCODERS) == _tracer_families()


def test_script_refuses_what_it_cannot_measure() -> None:
    cfg = {"model_type": "llama", "max_position_embeddings": 8192}
    for bad in ({"task": "qlora"}, {"task": "full-finetune", "optimizer": "adamw-8bit"},
                {"task": "full-finetune", "precision": "fp8-mixed"}, {"task": "inference", "prefill_tokens": 512}):
        with pytest.raises(ValueError):
            script.resolve_workload(bad, cfg)


@pytest.mark.trace
def test_smoke_run_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    out = tmp_path / "smoke.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out),
                          "--only", "llama-3.1-8b-lora-r16-mb1-s2048-ckpt",
                          "--only", "llama-3.1-8b-inference-b8-c2048-o128"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["mode"] == "smoke" and {"environment", "cuda_context", "cases", "finished_at"} <= set(doc)
    assert [c["status"] for c in doc["cases"]] == ["ok", "ok"], [c.get("error") for c in doc["cases"]]
    train, infer = doc["cases"]
    assert {"peak_allocated_bytes", "peak_reserved_bytes", "nvml_used_peak_bytes", "after_step_allocated_bytes"} \
        <= set(train["memory"])
    assert {"step_seconds_median", "step_seconds_min", "tokens_per_s"} <= set(train["timing"])
    assert {"prefill_peak_allocated_bytes", "kv_cache_prefill_bytes"} <= set(infer["memory"])
    assert {"time_to_first_token_s", "batch_prefill_seconds_median", "decode_tokens_per_s_per_request"} \
        <= set(infer["timing"])
    assert train["model"]["trainable_dtypes"] == ["float32"]  # PEFT's adapters in fp32, as gpuplan counts them

    bench = _load("device_accuracy", ROOT / "benchmarks" / "device_accuracy.py")
    rep = bench.compare_file(out)
    assert [c.status for c in rep.cases] == ["ok", "ok"]
    for c in rep.cases:  # the model the script built is the one gpuplan counted
        for metric in ("parameters", "trainable parameters", "KV cache after prefill"):
            r = c.row(metric)
            if r is not None and r.measured is not None:
                assert r.error == pytest.approx(0.0), (c.id, metric, r)
    text = bench.render(rep, markdown=True)
    assert "SMOKE" in text and "| case | metric |" in text
