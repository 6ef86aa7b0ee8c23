"""`gpuplan plan PROJECT --have SERVER.yaml` and `--this-machine` as a user runs them (issue #13, point 5): the
owned server's answer first, in the terminal, JSON and the reports; bad input is a one-line error, never a
traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "4x-rtx-4090.yaml"
MISTRAL = ("name: mistral-7b-full-finetune\nmodel: {preset: mistral-7b}\n"
           "workload: {task: full-finetune, precision: bf16-mixed, optimizer: adamw, micro_batch_size: 1,"
           " sequence_length: 2048, gradient_checkpointing: true, epochs: 1}\ndata: {samples: 20000}\n")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def mistral(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("have") / "mistral.yaml"
    path.write_text(MISTRAL)
    return path


def test_have_text_answers_with_the_owned_server_first(mistral: Path) -> None:
    r = run("plan", str(mistral), "--have", str(SERVER))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Traceback" not in out + r.stderr
    head, _, rest = out.partition("If you buy or rent instead")
    assert "The server you have: " in head and "4 x rtx-4090-24gb" in head
    assert "yes: your 4 x rtx-4090-24gb can do it: ZeRO-3 with the optimizer states offloaded to CPU RAM" in \
        " ".join(head.split())
    for way in ("8-bit AdamW", "pure bf16 with 8-bit AdamW", "parameters and optimizer states offloaded"):
        assert way in " ".join(head.split()), way
    assert "What to do, cheapest first" in head and ("Rent " in rest or "Buy " in rest)  # then the plan's action


def test_have_json_adds_one_key(mistral: Path) -> None:
    r = run("plan", str(mistral), "--have", str(SERVER), "--format", "json")
    assert r.returncode == 0, r.stderr
    have = json.loads(r.stdout)["have"]
    assert {"machine", "gpu", "gpus", "can_do", "verdict", "how", "ways", "options"} <= set(have)
    assert have["can_do"] is True and have["how"]["code"] == "zero-3-offload-optimizer"
    assert {o["kind"] for o in have["options"]} >= {"keep", "rent", "replace"}
    plain = run("plan", str(mistral), "--format", "json")
    assert "have" not in json.loads(plain.stdout)


def test_have_markdown_report_opens_with_the_owned_server(mistral: Path) -> None:
    r = run("plan", str(mistral), "--have", str(SERVER), "--format", "md")
    assert r.returncode == 0, r.stderr
    assert r.stdout.index("## The server you have") < r.stdout.index("## Verdict")


def test_this_machine_is_clear_without_a_gpu(mistral: Path) -> None:
    r = run("plan", str(mistral), "--this-machine")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert "The server you have: this machine" in r.stdout
    js = json.loads(run("plan", str(mistral), "--this-machine", "--format", "json").stdout)["have"]
    if js["gpus"]:
        pytest.skip("this machine has an NVIDIA GPU")
    assert js["can_do"] is False and js["verdict"].startswith("no: the machine has no GPU to run it on")
    assert "no: the machine has no GPU" in " ".join(r.stdout.split())
    assert any(o["kind"] == "rent" and o["cost"] for o in js["options"])


@pytest.mark.parametrize(("args", "message"), [
    (("--have", "/nonexistent/server.yaml"), "no such file: /nonexistent/server.yaml"),
    (("--have", str(SERVER), "--this-machine"), "give one of --have FILE"),
])
def test_have_bad_input_is_one_line(mistral: Path, args: tuple[str, ...], message: str) -> None:
    r = run("plan", str(mistral), *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_have_bad_server_file_names_the_field(mistral: Path, tmp_path: Path) -> None:
    bad = tmp_path / "server.yaml"
    bad.write_text(SERVER.read_text().replace("ram_gb", "ram_gib"))
    r = run("plan", str(mistral), "--have", str(bad))
    assert r.returncode == 2
    assert f"{bad}: ram_gib: unknown key 'ram_gib'; did you mean 'ram_gb'?" in " ".join(r.stderr.split())
