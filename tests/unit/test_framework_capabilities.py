"""What each framework can run (data/frameworks.toml `can`, issue #30): the search proposes only those layouts, a
plan without workload.framework takes the default for its task and model, every candidate names its stack, and
the exports are consistent with it."""

from __future__ import annotations

import datetime
import tomllib
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan import api
from gpuplan.catalog.frameworks import load_capabilities, parse_capabilities
from gpuplan.catalog.loader import _data_text, example_names, example_path
from gpuplan.core.export.common import POSTTRAIN_TARGETS, SERVING_TARGETS, allowed_targets
from gpuplan.core.export.targets import TARGETS, export
from gpuplan.core.sizing.frameworks import can_run, cannot_run, default_framework, stack_text
from gpuplan.errors import CatalogError, InfeasibleError, InputError
from gpuplan.schema.plan import Candidate, PlanResult
from gpuplan.schema.project import Framework, GrpoSpec, Layout, Project

CAPS = load_capabilities()
TRAINING = [n for n in example_names() if yaml.safe_load(example_path(n).read_text())["workload"]["task"]
            != "inference"]


def runnable(c: Candidate, task: str) -> bool:
    assert c.stack is not None, "a training candidate names its stack"
    caps = CAPS.get(c.stack.framework or "")
    lay = Layout(zero=c.layout.zero, tp=c.layout.tp, pp=c.layout.pp, offload=c.layout.offload)
    return can_run(caps, task, lay, c.servers * c.gpus_per_server)


def test_capabilities_are_sourced_and_dated() -> None:
    assert set(CAPS) <= set(Framework.__args__)  # type: ignore[attr-defined]
    for caps in CAPS.values():
        assert caps.source.strip() and datetime.date.fromisoformat(caps.as_of) <= datetime.date(2026, 12, 1)
        assert set(caps.zero) <= {0, 1, 2, 3} and set(caps.pp_zero) <= {0, 1, 2, 3}


def test_the_hf_trainer_runs_no_tensor_or_pipeline_parallel_peft() -> None:
    hf = CAPS["hf-trainer"]
    for task in ("lora", "qlora"):
        assert cannot_run(hf, task, Layout(zero=3, tp=2), 8) == "HF Trainer runs no tensor parallelism for " \
            f"{task} (only for pretrain, full-finetune)"
        assert cannot_run(hf, task, Layout(zero=1, pp=2), 8) is not None
        assert cannot_run(hf, task, Layout(zero=3), 8) is None
    assert cannot_run(hf, "full-finetune", Layout(zero=3, tp=2), 8) is None


def test_torchtitan_has_no_zero_1_and_deepspeed_pipelines_take_stage_0_or_1() -> None:
    assert "no ZeRO stage 1" in (cannot_run(CAPS["torchtitan"], "pretrain", Layout(zero=1), 8) or "")
    assert cannot_run(CAPS["torchtitan"], "pretrain", Layout(zero=1), 1) is None  # one GPU: no data parallelism
    assert "pipeline" in (cannot_run(CAPS["deepspeed"], "pretrain", Layout(zero=2, pp=2), 8) or "")
    assert cannot_run(CAPS["deepspeed"], "pretrain", Layout(zero=1, pp=2), 8) is None
    assert "QLoRA" in (cannot_run(CAPS["nemo"], "qlora", Layout(), 1) or "")


def test_defaults_by_task_and_kind() -> None:
    assert default_framework("lora", "decoder", CAPS) == "hf-trainer"
    assert default_framework("qlora", "decoder", CAPS) == "hf-trainer"
    assert default_framework("full-finetune", "decoder", CAPS) == "hf-trainer"
    assert default_framework("pretrain", "decoder", CAPS) == "nemo"
    assert default_framework("pretrain", "vit", CAPS) is None  # NeMo's GPT recipes are for decoders
    assert default_framework("inference", "decoder", CAPS) is None


def test_stack_text() -> None:
    hf = CAPS["hf-trainer"]
    assert stack_text(hf, "lora", Layout(zero=3), 8, "eager") == "HF Trainer + PEFT + DeepSpeed ZeRO-3 (eager kernels)"
    assert stack_text(hf, "qlora", Layout(), 1, "eager") == "HF Trainer + PEFT (eager kernels)"
    assert stack_text(hf, "full-finetune", Layout(zero=0, tp=2), 2, "eager") == "HF Trainer + TP 2 (eager kernels)"
    assert stack_text(CAPS["nemo"], "pretrain", Layout(zero=1, pp=4), 64, "tuned") == \
        "NeMo / Megatron-Core + distributed optimizer + PP 4 (tuned kernels)"
    assert stack_text(None, "pretrain", Layout(), 8, "tuned") == "your training script (tuned kernels)"


def norm(text: str) -> str:
    """Text with its comment marks and wrapping taken out."""
    return " ".join(text.replace("#", " ").split())


def _doc() -> dict[str, Any]:
    return tomllib.loads(_data_text("frameworks.toml"))


@pytest.mark.parametrize("field,value,message", [
    ("zero", {"4": "x"}, "zero stages must be 0-3"),
    ("tp", ["training"], "can.tp"),
    ("offload", ["disk"], "can.offload"),
    ("source", " ", "source must be a non-empty string"),
    ("unknown", 1, "can.unknown"),
])
def test_bad_capabilities_name_row_and_field(field: str, value: Any, message: str) -> None:
    doc = _doc()
    doc["framework"][0]["can"][field] = value
    with pytest.raises(CatalogError, match=message) as err:
        parse_capabilities(doc)
    assert "hf-trainer" in str(err.value)


@pytest.mark.parametrize("kinds", [[], ["decoder"], ["decoder", "vit"]])
def test_two_defaults_for_one_task_are_refused(kinds: list[str]) -> None:
    doc = _doc()
    row = next(r for r in doc["framework"] if r["id"] == "torchtitan")
    row["can"]["default_for"], row["can"]["default_kinds"] = ["pretrain"], kinds
    with pytest.raises(CatalogError, match="default for pretrain already"):
        parse_capabilities(doc)
    row["can"]["default_kinds"] = ["vit"]  # another kind: no clash
    assert parse_capabilities(doc)["torchtitan"].default_kinds == ("vit",)


def test_qlora_on_a_framework_without_it_is_refused() -> None:
    d = yaml.safe_load(example_path("llama3-8b-qlora").read_text())
    d["workload"]["framework"] = "nemo"
    with pytest.raises(InputError, match="has no QLoRA") as err:
        api.plan(d)
    assert "hf-trainer" in str(err.value)


# ------------------------------------------------------------------------------------------ the built-in examples

def planned(name: str) -> tuple[Project, PlanResult]:
    from gpuplan.catalog.loader import load_project

    proj, base = load_project(example_path(name))
    return proj, api.plan(proj, base_dir=base)


@pytest.mark.parametrize("name", TRAINING)
def test_every_example_is_planned_on_a_layout_its_framework_runs(name: str) -> None:
    proj, plan = planned(name)
    task = proj.workload.task
    if task == "dpo":  # a DPO policy trains as its method's task (core/sizing/preference.py), on that framework
        from gpuplan.core.sizing.preference import POLICY_TASK
        assert proj.workload.dpo is not None
        task = POLICY_TASK[proj.workload.dpo.method]
    if task == "grpo":  # so does a GRPO policy (core/sizing/grpo_policy.py)
        from gpuplan.core.sizing.grpo_policy import POLICY_TASK as GRPO_POLICY_TASK
        task = GRPO_POLICY_TASK[(proj.workload.grpo or GrpoSpec()).method]
    for c in plan.candidates:
        assert runnable(c, task), (c.gpu_id, c.layout, c.stack)
        assert f"stack: {c.stack.text}" in c.reasons  # type: ignore[union-attr]
    rec = plan.recommendation.stack
    assert rec is not None
    if proj.workload.framework is None and task in ("lora", "qlora", "full-finetune"):
        assert rec.framework == "hf-trainer" and rec.stack == "eager"
        assert any(n.code == "framework-default" and "the plan's default" in n.message for n in plan.notes)


def test_the_70b_lora_is_no_longer_tensor_parallel() -> None:
    """Issue #30: a 70B LoRA was planned as ZeRO-3 + tp 2, which the HF Trainer + PEFT cannot launch."""
    _, plan = planned("llama3-70b-lora")
    assert all(c.layout.tp == 1 and c.layout.pp == 1 for c in plan.candidates)


def test_a_mixtral_lora_is_planned_without_tensor_parallelism() -> None:
    """Issue #30: a Mixtral-8x7B LoRA was planned as ZeRO-1 + tp 4 (tensor-parallel LoRA of a MoE under the HF
    Trainer; before this change 28 of this plan's 43 candidates were tensor parallel, 2 to 8 ways). Now: sharded data
    parallelism only, on the HF Trainer + PEFT, eager."""
    plan = api.plan({"name": "mixtral-lora", "model": {"preset": "mixtral-8x7b"},
                     "workload": {"task": "lora", "micro_batch_size": 1, "global_batch_size": 16,
                                  "sequence_length": 4096, "gradient_checkpointing": True, "epochs": 2},
                     "data": {"samples": 100000}})
    assert plan.candidates
    for c in plan.candidates:
        assert (c.layout.tp, c.layout.pp) == (1, 1)
        assert c.stack is not None and (c.stack.framework, c.stack.stack) == ("hf-trainer", "eager")


def test_the_explicit_framework_and_stack_win() -> None:
    d = yaml.safe_load(example_path("llama3-70b-lora").read_text())
    d["workload"]["framework"] = "nemo"
    plan = api.plan(d)
    assert plan.recommendation.stack is not None and plan.recommendation.stack.framework == "nemo"
    d["workload"].pop("framework")
    d["workload"]["stack"] = "tuned"
    rec = api.plan(d).recommendation
    assert rec.stack is not None and (rec.stack.framework, rec.stack.stack) == ("hf-trainer", "tuned")


@pytest.mark.parametrize("name", TRAINING)
def test_every_export_of_every_example_is_consistent_with_its_stack(name: str) -> None:
    proj, plan = planned(name)
    for i, c in enumerate(plan.candidates[:6]):
        assert c.stack is not None
        allowed = allowed_targets(c.stack.framework)
        # the training launchers (the post-training configs, trl and verl: tests/unit/test_posttrain_export.py)
        for target in (t for t in TARGETS if t not in SERVING_TARGETS and t not in POSTTRAIN_TARGETS):
            if target not in allowed:  # (a GRPO run has no launcher yet at all)
                with pytest.raises(InputError, match="which the plan did not time|is a GRPO run"):
                    export(proj, c, target, index=i)
                continue
            try:
                text = export(proj, c, target, index=i)[1]
            except InputError as exc:  # a launcher limit (Accelerate has no pipelines), never the stack
                assert "did not time" not in str(exc)
                continue
            assert norm(f"Stack: {c.stack.text}, as the plan timed it.") in norm(text)
            if c.stack.framework == "nemo" and target in ("torchrun", "skypilot"):
                assert "pretrain_gpt.py" in text and "--per_device_train_batch_size" not in text


# ------------------------------------------------------------------------------------------ random projects

PRESETS = ["qwen2.5-0.5b", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b"]
GPUS = ["rtx-4090-24gb", "l40s-48gb", "a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb"]


@st.composite
def training_projects(draw: st.DrawFn) -> dict[str, Any]:
    task = draw(st.sampled_from(["qlora", "lora", "full-finetune", "pretrain"]))
    mbs = draw(st.sampled_from([1, 2, 4]))
    workload: dict[str, Any] = {"task": task, "micro_batch_size": mbs,
                                "global_batch_size": mbs * draw(st.sampled_from([8, 16, 64])),
                                "sequence_length": draw(st.sampled_from([1024, 4096])),
                                "tokens": draw(st.sampled_from([1e8, 1e9]))}
    framework = draw(st.sampled_from([None, *sorted(CAPS)]))
    if framework is not None:
        workload["framework"] = framework
    gpus = draw(st.permutations(GPUS))[: draw(st.integers(1, 3))]
    return {"name": "prop", "model": {"preset": draw(st.sampled_from(PRESETS))}, "workload": workload,
            "constraints": {"gpus": gpus}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_projects())
def test_random_projects_get_only_layouts_their_framework_runs(project: dict[str, Any]) -> None:
    try:
        plan = api.plan(project)
    except (InfeasibleError, InputError):
        return
    for c in plan.candidates:
        assert runnable(c, project["workload"]["task"]), (c.layout, c.stack)
