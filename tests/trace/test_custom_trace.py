"""`gpuplan trace module:factory`: any PyTorch model, traced under FakeTensorMode, equals the same code run on
real CPU tensors to the byte, and its FLOPs equal the hand count."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from gpuplan.cli import app  # noqa: E402
from gpuplan.errors import InputError  # noqa: E402
from gpuplan.trace.custom import trace_factory  # noqa: E402

pytestmark = pytest.mark.trace

MODELS = textwrap.dedent('''
    import torch
    from torch import nn

    def mlp():
        model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 10))
        return model, (torch.randn(32, 256),)

    def with_loss():
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                          nn.Linear(16 * 8 * 8, 10))
            def forward(self, x, y):
                return {"loss": nn.functional.cross_entropy(self.body(x), y)}
        return Net(), {"x": torch.randn(4, 3, 8, 8), "y": torch.randint(0, 10, (4,))}

    def huge():
        return nn.Linear(100_000, 200_000), (torch.randn(2, 100_000),)  # 20 B parameters: 320 GB with AdamW

    def not_a_pair():
        return 42

    def broken():
        raise ValueError("no weights here")
''')


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "user_models_gp.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_models_gp"


@pytest.mark.parametrize("fn,training", [("mlp", True), ("mlp", False), ("with_loss", True)])
def test_fake_trace_equals_real_cpu_run(models: str, fn: str, training: bool) -> None:
    fake = trace_factory(f"{models}:{fn}", training=training)
    real = trace_factory(f"{models}:{fn}", training=training, fake=False)
    assert fake.peak_bytes == real.peak_bytes
    assert fake.flops_per_step == real.flops_per_step
    assert fake.parameters == real.parameters


def test_mlp_by_hand(models: str) -> None:
    r = trace_factory(f"{models}:mlp", training=True)
    params = 256 * 1024 + 1024 + 1024 * 10 + 10
    assert r.parameters == params
    # AdamW keeps two fp32 states per parameter; the split is taken at the optimizer step's peak
    assert r.optimizer_bytes >= 2 * 4 * params
    # forward 2 x 32 x (256 x 1024 + 1024 x 10); backward: both weight gradients and the second layer's input
    # gradient (the batch itself needs none)
    fwd = 2 * 32 * (256 * 1024 + 1024 * 10)
    assert r.flops_per_step == fwd + fwd + 2 * 32 * 1024 * 10
    inf = trace_factory(f"{models}:mlp", training=False)
    assert inf.flops_per_step == fwd and inf.gradients_bytes == 0


def test_bad_factories_are_input_errors(models: str) -> None:
    with pytest.raises(InputError, match="MODULE:FUNCTION"):
        trace_factory("no-colon")
    with pytest.raises(InputError, match="did you mean 'mlp'"):
        trace_factory(f"{models}:mpl")
    with pytest.raises(InputError, match="must return"):
        trace_factory(f"{models}:not_a_pair")
    with pytest.raises(InputError, match="ValueError: no weights here"):
        trace_factory(f"{models}:broken")


def test_cli(models: str) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["trace", f"{models}:with_loss", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["peak_bytes"] > 0 and data["flops_per_step"] > 0 and data["training"] is True
    res = runner.invoke(app, ["trace", "nowhere_at_all:x"])
    assert res.exit_code == 2 and "cannot import" in res.output and "Traceback" not in res.output


def _project(tmp_path: Path, factory: str, task: str = "full-finetune") -> Path:
    p = tmp_path / "traced.yaml"
    p.write_text(f"name: traced\nmodel: {{trace: '{factory}'}}\nworkload: {{task: {task}, precision: bf16-mixed}}\n")
    return p


def test_a_traced_model_feeds_estimate_and_plan(models: str, tmp_path: Path) -> None:
    runner = CliRunner()
    proj = _project(tmp_path, f"{models}:with_loss")
    res = runner.invoke(app, ["estimate", str(proj), "--gpu", "l4-24gb", "--format", "json"])
    assert res.exit_code == 0, res.output
    est = json.loads(res.output)
    traced = trace_factory(f"{models}:with_loss", precision="bf16-mixed")
    assert est["model"]["origin"] == f"trace:{models}:with_loss"
    assert est["memory"]["peak_tensor_bytes"] == traced.peak_bytes
    assert est["memory"]["device_bytes"] > traced.peak_bytes  # + context, cuBLAS, allocator reserve
    res = runner.invoke(app, ["plan", str(proj), "--format", "json", "--top", "3"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    rec = plan["recommendation"]
    assert rec["layout"]["tp"] == 1 and rec["layout"]["dp"] == rec["gpus_per_server"]
    assert rec["memory"]["peak_tensor_bytes"] == traced.peak_bytes
    assert rec["fits"] and rec["time_hours"] > 0
    # no growth view for a traced model (the planned growth is not applied to it either)
    assert plan["growth_view"] == [] and plan["headroom"] == 0.10


def test_a_traced_model_too_big_for_any_gpu_is_infeasible(models: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["plan", str(_project(tmp_path, f"{models}:huge"))])
    assert res.exit_code == 1, res.output
    assert "does not fit" in res.output and "GiB" in res.output


def test_commands_that_need_an_architecture_say_so(models: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["fit", str(_project(tmp_path, f"{models}:mlp")), "--gpu", "l4-24gb"])
    assert res.exit_code == 2 and "model.trace" in res.output


def test_a_traced_plan_renders_as_text_and_reports(models: str, tmp_path: Path) -> None:
    """A traced candidate's layout has no micro-batch: every renderer must still work."""
    proj = str(_project(tmp_path, f"{models}:with_loss"))
    runner = CliRunner()
    for args in ([], ["--format", "md"], ["--format", "html"]):
        res = runner.invoke(app, ["plan", proj, "--top", "2", *args])
        assert res.exit_code == 0, res.output
