"""The `gpuplan estimate` command as a user runs it: a real subprocess, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.catalog.loader import example_names
from tests.conftest import hf_config

KEYS = ["weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes",
        "other_bytes", "peak_tensor_bytes", "reserved_bytes", "device_bytes"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_example_json_contract() -> None:
    r = run("estimate", "--example", "llama3-8b-qlora", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"]["parameters"] == 8_030_261_248
    assert 0 < d["model"]["trainable_parameters"] < d["model"]["parameters"]
    mem = d["memory"]
    for k in KEYS:
        assert isinstance(mem[k], int) and mem[k] >= 0
    parts = sum(mem[k] for k in KEYS[:6])
    assert parts == mem["peak_tensor_bytes"]
    assert mem["peak_tensor_bytes"] < mem["reserved_bytes"] < mem["device_bytes"]


def test_text_output_names_the_levels() -> None:
    r = run("estimate", "--example", "llama3-8b-qlora")
    assert r.returncode == 0, r.stderr
    for word in ("weights", "activations", "tensor peak", "reserve", "device total"):
        assert word in r.stdout


def test_text_prints_an_emoji_code_as_written(tmp_path: Path) -> None:
    # rich draws `:fire:` as an emoji by default; a project's name is printed as the user wrote it
    (tmp_path / "p.yaml").write_text('name: "team:fire: plan"\nmodel: {preset: llama-3.1-8b}\n'
                                     "workload: {task: inference, batch_size: 1}\n")
    r = run("estimate", str(tmp_path / "p.yaml"))
    assert r.returncode == 0, r.stderr
    assert "team:fire: plan" in r.stdout and "\N{FIRE}" not in r.stdout


def test_list_examples_one_per_line() -> None:
    r = run("estimate", "--list-examples")
    assert r.returncode == 0
    assert r.stdout.split() == example_names() and len(example_names()) >= 6


@pytest.mark.parametrize("name", example_names())
def test_every_example_runs(name: str) -> None:
    r = run("estimate", "--example", name, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory"]["peak_tensor_bytes"] > 0


def test_hf_config_file_and_gpu_flag(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(hf_config("mistral-7b")))
    (tmp_path / "p.yaml").write_text("model: {hf_config: config.json}\nworkload: {task: inference, batch_size: 2, "
                                     "context_length: 4096}\n")
    r = run("estimate", str(tmp_path / "p.yaml"), "--gpu", "a10g", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"]["parameters"] == 7_241_732_096
    # 32 layers x 2 (K,V) x 8 KV heads x 128 x 2 bytes x 4096 tokens x 2 sequences = 1 GiB exactly
    assert d["memory"]["kv_cache_bytes"] == 1 << 30
    assert d["hardware"]["gpu"] == "a10g-24gb" and d["memory"]["fits"] is True  # 13.5 GiB bf16 + 1 GiB KV
    # serving: the headroom is what the engine's share (vLLM's default 90 % of the GPU) leaves
    assert d["memory"]["headroom_bytes"] == int(0.9 * d["hardware"]["gpu_memory_bytes"]) - d["memory"]["device_bytes"]


@pytest.mark.parametrize("content,needle", [
    ("model: {preset: llama-3.1-8b}\nworkload: {task: lora, micro_batch: 2}\n", "did you mean 'micro_batch_size'"),
    ("model: {preset: llama-3.1-8b}\nworkload: {task: finetune}\n", "full-finetune"),
    ("model: {preset: lama-3.1-8b}\nworkload: {task: lora}\n", "did you mean 'llama-3.1-8b'"),
    ("model: {preset: llama-3.1-8b}\nworkload: {task: lora, micro_batch_size: -4}\n", "greater than 0"),
    ("model: {preset: llama-3.1-8b\nworkload: [\n", "not valid YAML"),
    ("- a list\n", "mapping"),
])
def test_bad_input_exit_2_one_line(tmp_path: Path, content: str, needle: str) -> None:
    (tmp_path / "p.yaml").write_text(content)
    r = run("estimate", str(tmp_path / "p.yaml"))
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "p.yaml").read_text() == content  # nothing the user wrote is changed


def test_unknown_gpu_and_missing_file(tmp_path: Path) -> None:
    r = run("estimate", "--example", "llama3-8b-qlora", "--gpu", "h100-sxm")
    assert r.returncode == 0  # an alias
    r = run("estimate", "--example", "llama3-8b-qlora", "--gpu", "h10")
    assert r.returncode == 2 and "unknown gpu 'h10'" in r.stderr and "Traceback" not in r.stderr
    r = run("estimate", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_catalog_lists() -> None:
    r = run("catalog", "models", "--json")
    assert r.returncode == 0
    rows = json.loads(r.stdout)
    assert len(rows) >= 30 and all(row["source"] and row["as_of"] for row in rows)
    r = run("catalog", "gpus", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)
