"""`gpuplan export --to trl | verl` (issue #31): the GRPO and DPO examples' plans as a TRL config (parsed by TRL's own
TrlParser where trl is installed) and verl's GRPO overrides (every key one of verl's config, the figures the plan's)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplan.api import plan
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.loader import example_path, load_project
from gpuplan.core.export.targets import export
from gpuplan.errors import GpuplanError
from gpuplan.schema.plan import PlanResult
from gpuplan.schema.project import Project

CATALOG = builtin_catalog()
VERL_KEYS = {ln.strip() for ln in (Path(__file__).parents[1] / "data" / "verl_ppo_trainer_keys.txt").read_text()
             .splitlines() if ln.strip() and not ln.startswith("#")}


@functools.cache
def planned(name: str) -> tuple[Project, PlanResult]:
    return load_project(example_path(name))[0], plan(example_path(name), catalog=CATALOG)


def exported(name: str, target: str) -> tuple[str, dict[str, Any]]:
    project, result = planned(name)
    assert result.recommendation is not None
    _, text = export(project, result.recommendation, target)
    return text, yaml.safe_load(text)


def paths(d: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        out += paths(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]
    return out


def test_verl_overrides_use_verls_keys_with_the_plans_figures() -> None:
    _, cfg = exported("qwen2.5-7b-grpo", "verl")
    assert set(paths(cfg)) <= VERL_KEYS
    _, result = planned("qwen2.5-7b-grpo")
    rec = result.recommendation
    assert rec is not None
    rollout = cfg["actor_rollout_ref"]["rollout"]
    # the verl DAPO recipe's 512 prompts x 16 at 0.8 of each GPU (the example's grpo section), on the plan's GPUs
    assert cfg["data"]["train_batch_size"] == 512 and rollout["n"] == 16 and rollout["gpu_memory_utilization"] == 0.8
    assert cfg["data"]["max_response_length"] == 8192 and cfg["algorithm"]["adv_estimator"] == "grpo"
    assert cfg["trainer"]["nnodes"] * cfg["trainer"]["n_gpus_per_node"] == rec.servers * rec.gpus_per_server
    assert cfg["actor_rollout_ref"]["actor"]["use_kl_loss"] is False


def test_trl_grpo_config_carries_the_plans_batch() -> None:
    _, cfg = exported("qwen2.5-7b-grpo", "trl")
    _, result = planned("qwen2.5-7b-grpo")
    rec = result.recommendation
    assert rec is not None and rec.layout.dp is not None
    # every optimizer step's sequences: per-device x accumulation x data-parallel ranks = 512 prompts x 16
    assert cfg["per_device_train_batch_size"] * cfg["gradient_accumulation_steps"] * rec.layout.dp == 512 * 16
    assert cfg["num_generations"] == 16 and cfg["vllm_mode"] == "colocate" and cfg["beta"] == 0.0


@pytest.mark.parametrize("name, config", [("qwen2.5-7b-grpo", "GRPOConfig"), ("llama3-8b-dpo", "DPOConfig")])
def test_trls_own_parser_takes_the_config(name: str, config: str, tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    text, _ = exported(name, "trl")
    path = tmp_path / "config.yaml"
    path.write_text(text)
    parser = trl.TrlParser((trl.ScriptArguments, getattr(trl, config), trl.ModelConfig))
    # bf16 is validated against the GPU; this machine has none
    *parsed, rest = parser.parse_args_and_config(args=["--config", str(path), "--bf16", "false", "--use_cpu", "true"],
                                                 return_remaining_strings=True)
    assert rest == []  # every key is one of TRL's
    assert parsed[2].model_name_or_path == "MODEL_ID_OR_PATH"


def test_verl_refuses_dpo_and_separate_pools() -> None:
    project, result = planned("llama3-8b-dpo")
    assert result.recommendation is not None
    with pytest.raises(GpuplanError, match="--to verl writes a GRPO run"):
        export(project, result.recommendation, "verl")
    grpo, res = planned("qwen2.5-7b-grpo")
    assert res.recommendation is not None
    sep = grpo.model_copy(update={"workload": grpo.workload.model_copy(update={"grpo": grpo.workload.grpo.model_copy(
        update={"placement": "separate", "rollout_gpus": 2})})})  # type: ignore[union-attr]
    with pytest.raises(GpuplanError, match="hybrid engine"):
        export(sep, res.recommendation, "verl")
