"""`gpuplan plan` in a terminal, as a user runs it (a real subprocess): one screen that agrees with
`--format json`, a memory bar whose parts add up, checklist marks that follow the verdicts, everything else
behind --details, and plain characters when there is no colour."""

from __future__ import annotations

import functools
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpuplan.catalog.loader import example_names
from gpuplan.report.terminal import BAR_WIDTH, progress
from gpuplan.units import GIB

MARK = {"pass": "✓", "warn": "!", "fail": "✗", "not evaluated": "–"}
LINES_MAX = 55
WIDTH = 100
EXAMPLES = example_names()


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    return subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, timeout=120,
                          env={**base, "COLUMNS": str(WIDTH), **env})


@functools.cache
def text(name: str, *extra: str) -> str:
    r = run("plan", "--example", name, *extra)
    assert r.returncode == 0 and r.stderr == "", r.stderr  # no spinner, no warning when stderr is a pipe
    return r.stdout


@functools.cache
def as_json(name: str) -> dict[str, Any]:
    r = run("plan", "--example", name, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def flat(s: str) -> str:
    """Text with its line wraps and indentation undone."""
    return re.sub(r"\s+", " ", s)


def block(out: str, start: str, end: str) -> list[str]:
    """The lines from the first that starts with `start` up to (without) the next that starts with `end`."""
    lines = out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(start))
    j = next(n for n in range(i + 1, len(lines)) if lines[n].startswith(end))
    return lines[i:j]


@pytest.mark.parametrize("name", EXAMPLES)
def test_one_screen_at_100_columns(name: str) -> None:
    lines = text(name).splitlines()
    assert len(lines) <= LINES_MAX, f"{len(lines)} lines"
    assert all(len(line.rstrip()) <= WIDTH for line in lines)
    assert "Traceback" not in text(name)


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_verdict_names_the_json_recommendation(name: str) -> None:
    rec = as_json(name)["recommendation"]
    out = text(name)
    lines = out.splitlines()
    assert lines[0].startswith(f"gpuplan plan: {as_json(name)['project']}")
    # the first line is the action (issue #27): buy the server, or rent the GPUs, as the JSON's action says it
    a = rec["action"]
    verdict = flat(" ".join(block(out, a["verb"].capitalize() + " ", "  ")))
    assert verdict.startswith(flat(a["text"])), (verdict, a["text"])
    s = rec["server"]
    d = rec["deployment"]
    chosen = next(x for x in rec["deployments"] if (x["option"], x["provider"]) == (d["option"], d["provider"]))
    assert (a["option"], a["total_cost"]) == (d["option"], d["total_cost"])
    # a training run states its cost per run, a service what it costs a month, a purchase its price (one story)
    if a["verb"] == "buy":
        money, cost = f"{rec['price']:,.0f}", rec["price"]
    elif rec["time_hours"] is not None:
        money, cost = f"{chosen['cost_per_run']:,.0f} {d['currency']} per run", chosen["cost_per_run"]
    else:
        money, cost = f"{chosen['running_monthly']:,.0f} {d['currency']} a month", chosen["running_monthly"]
    assert a["cost"] == cost
    if d["currency"] == "USD":
        money = "$" + money.replace(" USD", "")
    assert money in verdict
    if a["verb"] == "buy":
        assert verdict.startswith(f"Buy {rec['servers']} x {s['platform_name']} with {rec['gpus_per_server']} x "
                                  f"{rec['gpu_name']}")
    else:  # a rented plan names what is rented, not a chassis to buy; the server stays as what buying would take
        assert s["platform_name"] not in verdict.split(";")[0]
    server = flat(" ".join(block(out, "If you buy" if a["verb"] == "rent" else "Server", "Memory per GPU")))
    # RAM in GB as DIMMs are sold (binary), as the server builder sizes it
    for part in (s["cpu_model"], f"{s['cpu_cores']} cores", f"RAM {s['ram_bytes'] / 2**30:,.0f} GB",
                 f"{s['power_w'] / 1000:,.1f} kW", f"{s['cooling_btu_h']:,.0f} BTU/h", rec["gpu_id"]):
        assert part in server
    for w in s["warnings"]:  # the server's warnings stay in the summary
        assert flat(w) in flat(out)


def _legend(out: str) -> tuple[float, float, str, dict[str, tuple[str, float]], float]:
    """(peak GiB, VRAM GiB, the bar, {letter: (label, GiB)}, free GiB) as the summary shows them."""
    mem = block(out, "Memory per GPU", "Alternatives")
    peak, vram = (float(x.replace(",", "")) for x in re.match(r"Memory per GPU +([\d,.]+) of ([\d,.]+) GiB",
                                                               mem[0]).groups())
    bar = next(line.strip() for line in mem if line.startswith("["))
    key = " ".join(mem[mem.index(next(line for line in mem if line.startswith("["))) + 1:])
    parts = {m[0]: (m[1], float(m[2].replace(",", ""))) for m in
             re.findall(r"\b([A-Z]) ([a-zA-Z ]+?) ([\d,]+\.\d)\b", key)}
    free = float(re.search(r"· free ([\d,.]+) GiB", key)[1].replace(",", ""))
    return peak, vram, bar, parts, free


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_memory_bar_adds_up_to_the_peak(name: str) -> None:
    rec = as_json(name)["recommendation"]
    m = rec["memory"]
    peak, vram, bar, parts, free = _legend(text(name))
    assert peak == round(m["device_bytes"] / GIB, 1)
    assert vram == round((m["device_bytes"] + m["headroom_bytes"]) / GIB, 1)
    # the legend's parts (each rounded to 0.1 GiB) sum to the device total, and with the free part to the GPU
    assert abs(sum(v for _, v in parts.values()) - peak) <= 0.05 * (len(parts) + 1)
    assert abs(sum(v for _, v in parts.values()) + free - vram) <= 0.05 * (len(parts) + 2)
    by_label = {label: v for label, v in parts.values()}
    for label, field in (("weights", "weights_bytes"), ("activations", "activations_bytes"),
                         ("KV cache", "kv_cache_bytes"), ("optimizer", "optimizer_bytes")):
        if round(m[field] / GIB, 1) > 0:
            assert by_label[label] == round(m[field] / GIB, 1)
    # the bar draws each part with its letter, in proportion to the GPU's memory
    assert bar.startswith("[") and bar.endswith("]") and len(bar) == BAR_WIDTH + 2
    for letter, (_, gib) in parts.items():
        assert abs(bar.count(letter) - gib / vram * BAR_WIDTH) <= 1.5, (letter, bar)
    # the free part: dotted up to the usable limit, then the headroom the plan keeps free (":")
    kept = as_json(name)["headroom"] * vram
    assert abs(bar.count("·") + bar.count(":") - free / vram * BAR_WIDTH) <= 1.5
    assert abs(bar.count(":") - kept / vram * BAR_WIDTH) <= 1.5 and bar.rstrip("]").endswith(":")
    assert set(bar[1:-1]) <= set(parts) | {"·", ":"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_checklist_marks_follow_the_json_verdicts(name: str) -> None:
    plan = as_json(name)
    lines = block(text(name), "Decision checklist", "Questions")[1:]
    assert len(lines) == len(plan["checklist"])
    for line, item in zip(lines, plan["checklist"]):
        assert line.startswith(f" {MARK[item['verdict']]} {item['item']} ({item['verdict']})"), line
        # its reason: the finding when it passes, else the last reason (where the checklist puts the problem)
        reason = item["reasons"][0] if item["verdict"] == "pass" else item["reasons"][-1]
        assert reason[:30] in line, (line, reason)


@pytest.mark.parametrize("name", EXAMPLES)
def test_alternatives_and_deployments_match_the_json(name: str) -> None:
    plan = as_json(name)
    out = text(name)
    # marks: recommended, on the Pareto front, evidence not adequate (issue #13)
    rows = re.findall(r"^(→| )(\*| )(?:\?| ) +(\S+) +(\d+) × (\d+) ",
                      "\n".join(block(out, "Alternatives", "Deployment")), flags=re.M)
    cands = plan["candidates"][:8]
    assert [(r[2], int(r[3]), int(r[4]), r[1] == "*") for r in rows] == \
        [(c["gpu_id"], c["gpus_per_server"], c["servers"], c["pareto"]) for c in cands]
    assert [r[0] for r in rows] == ["→"] + [" "] * (len(rows) - 1)  # the recommendation ranks first
    deps = flat(" ".join(block(out, "Deployment costs", "Decision checklist")))
    for d in plan["recommendation"]["deployments"]:
        assert f"{d['total_cost']:,.0f} {d['currency']}" in deps
    questions = flat(out.split("\nQuestions\n", 1)[1])
    for f in plan["faq"]:
        assert f["question"] in questions


@pytest.mark.parametrize("name", EXAMPLES)
def test_details_keep_every_reason_reachable(name: str) -> None:
    plan = as_json(name)
    rec = plan["recommendation"]
    summary, details = text(name), flat(text(name, "--details"))
    assert "--details" in summary and summary.splitlines()[:3] == text(name, "--details").splitlines()[:3]
    reasons = (rec["reasons"] + rec["server"]["reasons"] + rec["deployment"]["reasons"]
               + [r for item in plan["checklist"] for r in item["reasons"]]
               + [r for f in plan["faq"] for r in f["reasons"]])
    missing = [r for r in reasons if flat(r) not in details]
    assert not missing
    chosen = {c["gpu_id"] for c in plan["candidates"]}
    for gpu in {r["gpu_id"] for r in plan["rejected"]} - chosen:
        assert f"✗ {gpu}" in details


def test_colour_and_no_colour() -> None:
    """On a colour terminal the bar is coloured blocks; with NO_COLOR the marks and letters carry it alone."""
    colour = run("plan", "--example", "llama3-8b-qlora", FORCE_COLOR="1", TERM="xterm-256color")
    plain = run("plan", "--example", "llama3-8b-qlora", FORCE_COLOR="1", NO_COLOR="1", TERM="xterm-256color")
    assert colour.returncode == plain.returncode == 0
    assert "\x1b[32m" in colour.stdout and "█" in colour.stdout and "[WW" not in colour.stdout
    assert not re.search(r"\x1b\[(3\d|9\d)m", plain.stdout)  # no colour codes at all
    bare = re.sub(r"\x1b\[[0-9;]*m", "", plain.stdout)
    assert "[WW" in bare and " ✓ VRAM validated (pass)" in bare and " ! System synergy (warn)" in bare


def test_the_spinner_shows_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for tty in (False, True):
        err = Tty() if tty else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        with progress("searching GPU servers"):
            pass
        assert ("searching GPU servers" in err.getvalue()) is tty


TRACED = textwrap.dedent("""
    import torch
    from torch import nn

    def net():
        model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 10))
        return model, (torch.randn(64, 512),)
""")


def test_a_traced_plan_fits_the_screen(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "user_terminal_models.py").write_text(TRACED)
    (tmp_path / "p.yaml").write_text("name: traced\nmodel: {trace: 'user_terminal_models:net'}\n"
                                     "workload: {task: full-finetune, precision: bf16-mixed}\n")
    r = subprocess.run([sys.executable, "-m", "gpuplan", "plan", "p.yaml"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env={**os.environ, "COLUMNS": str(WIDTH),
                                                      "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split()[0] in ("Rent", "Buy") and len(lines) <= LINES_MAX
    assert any(line.startswith("[") and line.rstrip().endswith("]") for line in lines)
    assert "mb=" not in r.stdout  # a traced layout has no micro-batch
