"""`gpuplan estimate` with a GPU: the speed part of the output (training tokens/s, step time, wall time and
GPU-hours; inference time to first token and decoding rates), for every built-in example, and a user's own GPU
row through --catalog. Properties and consistency only: the calibration constants change, the contract not."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan.catalog.hardware import load_catalog
from gpuplan.catalog.loader import example_names, example_path, load_speed_model
from gpuplan.cli import app

WIDE = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
SM = load_speed_model()


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env=WIDE)


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load(example_path(name).read_text())


def is_training(name: str) -> bool:
    return example(name)["workload"]["task"] != "inference"


def estimate_json(*args: str) -> dict[str, Any]:
    r = cli("estimate", *args, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def gpu_args(name: str) -> list[str]:
    """Examples without a hardware section get one H100."""
    return [] if (example(name).get("hardware") or {}).get("gpu") else ["--gpu", "h100-sxm-80gb"]


TRAINING = [n for n in example_names() if is_training(n)]
INFERENCE = [n for n in example_names() if not is_training(n)]


def within(value: float, span: list[float]) -> bool:
    lo, hi = span
    return lo <= value <= hi


def test_examples_cover_training_and_inference() -> None:
    assert len(TRAINING) >= 4 and "llama3-70b-serving" in INFERENCE


@pytest.mark.parametrize("name", TRAINING)
def test_training_example_has_speed(name: str) -> None:
    d = estimate_json("--example", name, *gpu_args(name))
    t, c = d["time"], d["compute"]
    assert d["inference"] is None
    assert t["tokens_per_s"] > 0 and t["step_seconds"] > 0
    assert within(t["tokens_per_s"], t["tokens_per_s_range"])
    assert within(t["step_seconds"], t["step_seconds_range"])
    # the ranges are the calibration spread (SpeedParams.range_low/high) around the value, nothing more
    lo, hi = t["tokens_per_s_range"]
    assert lo == pytest.approx(t["tokens_per_s"] * SM.params.range_low)
    assert hi == pytest.approx(t["tokens_per_s"] * SM.params.range_high)
    gpus = d["hardware"]["gpus"]
    assert t["tokens_per_s_per_gpu"] == pytest.approx(t["tokens_per_s"] / gpus)
    assert 0 < t["mfu"] < 1 and 0 < t["efficiency"] <= 1
    assert c["flops_per_token"] > 0 and c["hardware_flops_per_token"] >= c["flops_per_token"]
    parts = t["step_breakdown_s"]
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(t["step_seconds"], rel=1e-6)
    # tokens/s = the tokens of one step / its time
    w, dp = d["workload"], d["hardware"]["layout"]["dp"]
    if d["model"]["model_type"] != "resnet":
        step_tokens = t["tokens_per_s"] * t["step_seconds"]
        per = 2 if w["task"] == "dpo" else 1  # DPO's batches count pairs: a chosen and a rejected sequence each
        assert step_tokens >= per * w["micro_batch_size"] * w["sequence_length"] * dp * (1 - 1e-9)
        if w.get("global_batch_size"):
            assert step_tokens == pytest.approx(per * w["global_batch_size"] * w["sequence_length"], rel=1e-9)


@pytest.mark.parametrize("name", TRAINING)
def test_training_example_with_a_length_has_wall_time_and_gpu_hours(name: str) -> None:
    ex = example(name)
    if not (ex["workload"].get("tokens") or (ex["workload"].get("epochs") and ex.get("data", {}).get("samples"))):
        pytest.skip("the example gives no training length")
    d = estimate_json("--example", name, *gpu_args(name))
    t, c = d["time"], d["compute"]
    gpus = d["hardware"]["gpus"]
    assert t["tokens"] > 0 and t["steps"] >= 1
    if ex["workload"].get("tokens"):
        assert t["tokens"] == ex["workload"]["tokens"]
    assert t["wall_hours"] > 0 and t["gpu_hours"] > 0
    assert t["gpu_hours"] == pytest.approx(t["wall_hours"] * gpus, rel=1e-9)
    assert within(t["wall_hours"], t["wall_hours_range"]) and within(t["gpu_hours"], t["gpu_hours_range"])
    assert c["flops_total"] == pytest.approx(c["flops_per_token"] * t["tokens"], rel=1e-9)
    # the run takes at least tokens / throughput (whole steps, and goodput < 1 on long runs only add time)
    assert 0 < t["goodput"] <= 1
    assert t["wall_hours"] * 3600 >= t["tokens"] / t["tokens_per_s"] * (1 - 1e-9)
    assert t["wall_hours"] == pytest.approx(t["steps"] * t["step_seconds"] / 3600 / t["goodput"], rel=1e-9)


def test_training_without_a_length_has_speed_but_no_totals(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("model: {preset: llama-3.1-8b}\nworkload: {task: lora, micro_batch_size: 2, sequence_length: 1024}\n"
                 "hardware: {gpu: a100-sxm-80gb}\n")
    r = cli("estimate", str(p), "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    t = d["time"]
    assert t["tokens_per_s"] > 0
    assert t["wall_hours"] is None and t["gpu_hours"] is None and d["compute"]["flops_total"] is None
    assert "no-training-length" in {n["code"] for n in d["notes"]}


def test_no_gpu_no_speed() -> None:
    d = estimate_json("--example", "llama3-8b-qlora")
    assert d["hardware"]["gpu"] is None and d["time"] is None
    assert d["compute"]["flops_per_token"] > 0  # FLOPs need no GPU


@pytest.mark.parametrize("name", INFERENCE)
def test_inference_example_has_ttft_and_decode_rates(name: str) -> None:
    d = estimate_json("--example", name, *gpu_args(name))
    inf = d["inference"]
    assert d["time"] is None
    assert inf["time_to_first_token_s"] > 0
    assert 0 < inf["decode_tokens_per_s_per_request"] <= inf["aggregate_tokens_per_s"]
    # consistent figures (issue 14): output tokens/s = requests/s x output tokens; Little's law
    out = d["workload"].get("output_tokens", 256)
    assert inf["aggregate_tokens_per_s"] == pytest.approx(inf["requests_per_s"] * out, rel=1e-9)
    assert inf["concurrency"] == pytest.approx(inf["requests_per_s"] * inf["request_latency_s"], rel=0.02)
    for key in ("ttft_s", "itl_s", "e2e_s"):
        assert 0 <= inf[key]["p50"] <= inf[key]["p90"] <= inf[key]["p99"], key
    for key in ("time_to_first_token_s", "decode_tokens_per_s_per_request", "aggregate_tokens_per_s"):
        assert within(inf[key], inf[f"{key}_range"]), key
    assert inf["request_latency_s"] >= inf["time_to_first_token_s"]
    assert inf["decode_bound"] in ("memory-bandwidth", "compute")
    assert d["compute"]["flops_per_token"] > 0


def test_serving_on_twice_the_gpus_adds_a_replica() -> None:
    """The 70B at tp=4 on 8 GPUs: two replicas, each decoding as fast as the one on 4 GPUs."""
    four = estimate_json("--example", "llama3-70b-serving")
    eight = estimate_json("--example", "llama3-70b-serving", "--gpus", "8")
    assert eight["hardware"]["layout"]["tp"] == 4 and eight["hardware"]["layout"]["dp"] == 2
    a, b = four["inference"], eight["inference"]
    assert b["decode_tokens_per_s_per_request"] == pytest.approx(a["decode_tokens_per_s_per_request"], rel=1e-9)
    assert b["aggregate_tokens_per_s"] == pytest.approx(2 * a["aggregate_tokens_per_s"], rel=1e-9)


@pytest.mark.parametrize("gpu", ["a100-sxm-80gb", "rtx-4090-24gb", "v100-sxm2-32gb", "mi300x-192gb"])
def test_gpu_flag_gives_speed_on_other_generations(gpu: str) -> None:
    d = estimate_json("--example", "llama3-8b-qlora", "--gpu", gpu)
    assert d["hardware"]["gpu"] == gpu and d["time"]["tokens_per_s"] > 0


def test_faster_gpu_is_faster_on_the_same_example() -> None:
    """H100 has more dense bf16 and bandwidth than A100 (datasheets, data/gpus.toml)."""
    a100 = estimate_json("--example", "llama3-8b-qlora", "--gpu", "a100-sxm-80gb")["time"]
    h100 = estimate_json("--example", "llama3-8b-qlora", "--gpu", "h100-sxm-80gb")["time"]
    assert h100["tokens_per_s"] > a100["tokens_per_s"]
    assert h100["gpu_hours"] < a100["gpu_hours"]


# --- the user's own GPU row ---------------------------------------------------------------------------------------
def my_gpu(tmp_path: Path, scale: float) -> Path:
    row = load_catalog().gpus.rows["h100-sxm-80gb"].model_dump(mode="json")
    row.update(id="my-accel", name="My accelerator", aliases=["myacc"])
    row["memory_bandwidth_gbs"] *= scale
    row["tflops"] = {k: (v * scale if v is not None else None) for k, v in row["tflops"].items()}
    row["interconnect"]["bandwidth_gbs"] *= scale
    f = tmp_path / "mine.yaml"
    f.write_text(yaml.safe_dump({"gpu": [row]}, sort_keys=False))
    return f


def test_user_gpu_row_via_catalog(tmp_path: Path) -> None:
    f = my_gpu(tmp_path, 2.0)
    before = f.read_bytes()
    mine = estimate_json("--example", "llama3-8b-qlora", "--gpu", "my-accel", "--catalog", str(f))
    h100 = estimate_json("--example", "llama3-8b-qlora", "--gpu", "h100-sxm-80gb")
    assert mine["hardware"]["gpu"] == "my-accel"
    assert mine["time"]["tokens_per_s"] > h100["time"]["tokens_per_s"]  # twice every throughput
    assert mine["time"]["tokens_per_s"] <= 2 * h100["time"]["tokens_per_s"] * (1 + 1e-9)  # launches do not scale
    assert mine["memory"] == h100["memory"]  # same memory size
    by_alias = estimate_json("--example", "llama3-8b-qlora", "--gpu", "myacc", "--catalog", str(f))
    assert by_alias["time"] == mine["time"]
    assert f.read_bytes() == before


def test_user_gpu_unknown_without_its_catalog(tmp_path: Path) -> None:
    r = cli("estimate", "--example", "llama3-8b-qlora", "--gpu", "my-accel")
    assert r.exit_code == 2 and "unknown gpu 'my-accel'" in r.stderr


def test_bad_user_catalog_on_estimate(tmp_path: Path) -> None:
    f = my_gpu(tmp_path, 1.0)
    data = yaml.safe_load(f.read_text())
    data["gpu"][0]["generation"] = "hoper"
    f.write_text(yaml.safe_dump(data))
    r = cli("estimate", "--example", "llama3-8b-qlora", "--gpu", "my-accel", "--catalog", str(f))
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and str(f) in err and "my-accel" in err and "generation" in err


# --- text ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["llama3-8b-full-finetune", "llama3-70b-serving"])
def test_text_output_mentions_tokens_per_second(name: str) -> None:
    r = cli("estimate", "--example", name)
    assert r.exit_code == 0, r.output
    assert "tokens/s" in r.stdout


def test_text_output_training_names_time_and_gpu_hours() -> None:
    r = cli("estimate", "--example", "llama3-8b-full-finetune")
    assert r.exit_code == 0, r.output
    for word in ("Training:", "per step", "GPU-hours", "wall", "MFU"):
        assert word in r.stdout, word
    r = cli("estimate", "--example", "llama3-70b-serving")
    for word in ("first token", "per request", "requests/s"):
        assert word in r.stdout, word


def test_text_and_json_agree_on_tokens_per_second() -> None:
    d = estimate_json("--example", "llama3-8b-full-finetune")
    r = cli("estimate", "--example", "llama3-8b-full-finetune")
    assert f"{d['time']['tokens_per_s']:,.0f} tokens/s" in r.stdout
    assert not math.isnan(d["time"]["mfu"])
