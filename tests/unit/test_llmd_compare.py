"""benchmarks/llmd_compare.py runs llm-d's capacity planner offline (a local config.json, gpuplan's parameter counts
in place of its Hub lookup) beside gpuplan's largest fitting batch. Skipped without the optional llm-d-planner."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("planner.capacity_planner")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # imports transformers, runs a model or llm-d
BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_llmd_capacity_offline_beside_gpuplan():
    compare = _load("llmd_compare")
    cp = compare._import_planner()
    case = next(c for c in compare.setups(compare.load_cases()) if c["model"] == "llama-3.1-8b" and c["tp"] == 1)
    with tempfile.TemporaryDirectory() as tmp:
        llmd = compare.llmd_capacity(cp, case, Path(tmp), 80)
    # Llama 3.1 8B: 32 layers x 2 x 8 KV heads x 128 x 2 bytes per token
    assert llmd["kv_per_token_bytes"] == 32 * 2 * 8 * 128 * 2
    assert llmd["max_concurrent_requests"] > 0
    ours = compare.gpuplan_capacity(case)
    assert ours["max_batch"] > 0
