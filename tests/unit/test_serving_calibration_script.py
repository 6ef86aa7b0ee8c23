"""scripts/serving_calibration.py: its --dry-run runs every code path on the CPU with a tiny config and writes the
JSON the GPU run writes; its static-cache decode gives the logits of a plain forward over the whole sequence;
without CUDA (and without --dry-run) it stops with a clear message."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # imports transformers, runs a model or llm-d
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "serving_calibration.py"


def _load():
    spec = importlib.util.spec_from_file_location("serving_calibration", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["serving_calibration"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_writes_the_results(tmp_path):
    out = tmp_path / "dry.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)], capture_output=True,
                          check=False, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["schema_version"] == 1 and data["dry_run"] is True
    assert data["method"]["cache"] in ("static", "dynamic")
    assert [p["prompt_tokens"] for p in data["prefill"]] == [8, 16]
    assert {(d["batch"], d["context"]) for d in data["decode"]} == {(1, 16), (2, 16), (1, 32), (2, 32)}
    for d in data["decode"]:
        assert d["decode_step_s_median"] > 0 and d["decode_steps_timed"] == 2
        assert d["kv_cache_bytes_at_end"] > 0


def test_static_cache_decode_matches_a_full_forward():
    sc = _load()
    torch.manual_seed(0)
    with torch.inference_mode():
        dec = sc.Decoder(torch, transformers, sc.TINY, "cpu", torch.float32)
        ids = torch.randint(0, sc.TINY["vocab_size"], (2, 12))
        cache = dec.new_cache(2, 16)
        dec.forward(ids[:, :10], 0, cache)
        step1 = dec.forward(ids[:, 10:11], 10, cache)
        step2 = dec.forward(ids[:, 11:12], 11, cache)
        full = dec.model(input_ids=ids).logits
    assert torch.allclose(step1[:, -1], full[:, 10], atol=1e-4)
    assert torch.allclose(step2[:, -1], full[:, 11], atol=1e-4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_without_cuda_it_says_so(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "x.json")], capture_output=True,
                          check=False, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr and "--dry-run" in proc.stderr
    assert not (tmp_path / "x.json").exists()
