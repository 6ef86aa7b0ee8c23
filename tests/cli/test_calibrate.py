"""`gpuplan calibrate` (issue #30, point 4): a bounded benchmark with torch, written as a catalog row that `plan`
and `estimate --rates FILE` then time the GPU with, its evidence "measured". CI has no GPU: torch's CPU device
stands in, through the same code path, and the row says so."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.api import builtin_catalog
from gpuplan.catalog.calibration import Measurement, measured_gpu
from gpuplan.catalog.hardware import load_catalog
from gpuplan.catalog.loader import example_path, load_speed_model

pytest.importorskip("torch")


def cli(*args: str, pre: str = "") -> subprocess.CompletedProcess[str]:
    code = pre + "import sys; from gpuplan.cli import main; sys.argv = ['gpuplan', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def rates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cal") / "rates.toml"
    r = cli("calibrate", "--gpu", "rtx-4090-24gb", "--out", str(out), "--seconds", "2")
    assert r.returncode == 0, r.stderr
    assert "as measured here" in r.stdout
    return out


def test_the_cpu_stands_in_and_the_row_says_so(rates: Path) -> None:
    row = load_catalog([rates]).gpus.rows["rtx-4090-24gb"]
    built_in = builtin_catalog().gpus.rows["rtx-4090-24gb"]
    assert row.measured_here is not None and "the CPU standing in for a GPU" in row.measured_here
    # a 2-core CPU reaches a sliver of a 4090's 165 TFLOPS: the row's peaks are scaled down accordingly
    assert row.tflops.bf16 is not None and built_in.tflops.bf16 is not None
    assert 0 < row.tflops.bf16 < built_in.tflops.bf16 / 50
    assert 0 < row.memory_bandwidth_gbs < built_in.memory_bandwidth_gbs


def test_a_plan_with_the_rates_file_times_the_gpu_as_measured(rates: Path) -> None:
    args = ("estimate", "--example", "llama3-8b-qlora", "--gpu", "rtx-4090-24gb", "--format", "json")
    before = json.loads(cli(*args).stdout)
    after = json.loads(cli(*args, "--rates", str(rates)).stdout)
    assert after["time"]["wall_hours"] > 20 * before["time"]["wall_hours"]
    project = json.loads(json.dumps({"name": "on-a-4090", "model": {"preset": "llama-3-8b"},
                                     "workload": {"task": "qlora", "micro_batch_size": 1, "sequence_length": 1024,
                                                  "tokens": 1e6},
                                     "constraints": {"gpus": ["rtx-4090-24gb"]}}))
    path = rates.parent / "project.json"
    path.write_text(json.dumps(project))
    r = cli("plan", str(path), "--rates", str(rates), "--format", "json")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)["recommendation"]
    assert rec["evidence"]["speed"] == "measured"
    assert rec["evidence"]["reasons"][0].startswith("speed measured here: gpuplan calibrate on CPU")


def test_the_measurement_scales_the_peaks_to_what_was_reached() -> None:
    gpu = builtin_catalog().gpus.rows["h100-sxm-80gb"]
    gen = load_speed_model().generations[gpu.generation]
    assert gpu.tflops.bf16 is not None
    what_the_model_assumes = Measurement(device="NVIDIA H100 80GB HBM3", torch="2.13.0", on=datetime.date(2026, 12, 1),
                                         matmul_tflops=gen.matmul_16bit * gpu.tflops.bf16, matmul_shape="8192^3",
                                         bandwidth_gbs=gen.bandwidth * gpu.memory_bandwidth_gbs)
    same = measured_gpu(gpu, gen, what_the_model_assumes)
    assert same.tflops.bf16 == pytest.approx(gpu.tflops.bf16) and same.memory_bandwidth_gbs == pytest.approx(
        gpu.memory_bandwidth_gbs)
    faster = measured_gpu(gpu, gen, what_the_model_assumes.model_copy(update={"matmul_tflops": 2 * gen.matmul_16bit
                                                                                * gpu.tflops.bf16}))
    assert faster.tflops.fp8 == pytest.approx(2 * (gpu.tflops.fp8 or 0)) and faster.as_of == datetime.date(2026, 12, 1)
    assert "100% of what the speed model assumes" in (same.measured_here or "")


def test_without_torch_it_refuses_and_says_how_to_install_it(tmp_path: Path) -> None:
    r = cli("calibrate", "--gpu", "rtx-4090-24gb", "--out", str(tmp_path / "x.toml"),
            pre="import sys; sys.modules['torch'] = None; ")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "PyTorch, which is not installed" in r.stderr and "pip install torch" in r.stderr
    assert not (tmp_path / "x.toml").exists()


def test_it_never_overwrites_a_file(tmp_path: Path) -> None:
    out = tmp_path / "mine.toml"
    out.write_text("# mine\n")
    r = cli("calibrate", "--gpu", "rtx-4090-24gb", "--out", str(out), "--seconds", "1")
    assert r.returncode == 2 and "--force" in r.stderr and out.read_text() == "# mine\n"
    r = cli("calibrate", "--out", str(tmp_path / "y.toml"), "--device", "cpu", "--seconds", "1")
    assert r.returncode == 2 and "--gpu" in r.stderr  # on the CPU the GPU the rates are for must be named
    assert example_path("llama3-8b-qlora").exists()
