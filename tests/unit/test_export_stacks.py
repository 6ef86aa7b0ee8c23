"""`gpuplan export --to torchtune | axolotl | torchtitan` (issue #30): the built-in training examples planned on each
framework, every candidate exported, read back with a YAML or TOML parser and checked against the keys the framework
documents (neither torchtune, Axolotl nor torchtitan installs here on CPU without its GPU stack, so the keys are
checked against sets written from their sources, at the commits below), and against the candidate it came from."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplan import api
from gpuplan.catalog.frameworks import with_framework
from gpuplan.catalog.loader import example_path, load_project
from gpuplan.core.export.common import read_shape
from gpuplan.core.export.targets import export
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate, PlanResult
from gpuplan.schema.project import Project, Workload

#: pytorch/torchtune @bd2a0fc (2026-04-23): the top-level keys of recipes/configs/llama3_1/8B_full.yaml,
#: 70B_lora.yaml and 8B_qlora_single_device.yaml, and the `cfg.get(...)` keys of recipes/full_finetune_distributed.py,
#: lora_finetune_distributed.py, full_finetune_single_device.py and lora_finetune_single_device.py
TORCHTUNE_KEYS = {
    "output_dir", "model", "tokenizer", "checkpointer", "resume_from_checkpoint", "save_adapter_weights_only",
    "dataset", "seed", "shuffle", "batch_size", "epochs", "max_steps_per_epoch", "gradient_accumulation_steps",
    "optimizer", "lr_scheduler", "loss", "clip_grad_norm", "compile", "optimizer_in_bwd", "device", "dtype",
    "enable_activation_checkpointing", "enable_activation_offloading", "custom_sharded_layers", "fsdp_cpu_offload",
    "fsdp_reshard_after_forward", "tensor_parallel_dim", "tensor_parallel_plan", "data_parallel_shard_dim",
    "data_parallel_replicate_dim", "context_parallel_dim", "enable_fp8_training", "fp8_recipe_name",
    "metric_logger", "log_every_n_steps", "log_peak_memory_stats", "log_level", "profiler", "run_val_every_n_steps",
    "dataset_val", "batch_size_val", "save_every_n_steps", "enable_async_checkpointing",
}
#: torchtune's LoRA model builders' arguments (torchtune/models/llama3_1/_model_builders.py lora_llama3_1_8b)
TORCHTUNE_LORA = {"_component_", "lora_attn_modules", "apply_lora_to_mlp", "apply_lora_to_output", "lora_rank",
                  "lora_alpha", "lora_dropout"}
#: axolotl-ai-cloud/axolotl @067b021 (2026-07-24): fields of src/axolotl/utils/schemas/{config,model,peft,training,
#: datasets}.py (the ones a supervised fine-tune sets)
AXOLOTL_KEYS = {
    "base_model", "model_type", "tokenizer_type", "load_in_8bit", "load_in_4bit", "datasets", "dataset_prepared_path",
    "val_set_size", "output_dir", "adapter", "lora_model_dir", "lora_r", "lora_alpha", "lora_dropout",
    "lora_target_modules", "lora_target_linear", "sequence_len", "sample_packing", "micro_batch_size",
    "gradient_accumulation_steps", "num_epochs", "max_steps", "optimizer", "lr_scheduler", "learning_rate", "bf16",
    "fp16", "tf32", "gradient_checkpointing", "activation_offloading", "attn_implementation", "flash_attention",
    "torch_compile", "deepspeed", "fsdp_version", "fsdp_config", "warmup_ratio", "weight_decay", "logging_steps",
}
#: pytorch/torchtitan torchtitan/config/job_config.py at the parent of 9810191 (2026-02-23, the last TOML job
#: config): the sections and the fields of each that a training job sets
TORCHTITAN_KEYS = {
    "job": {"dump_folder", "description", "config_file", "print_config"},
    "metrics": {"log_freq", "enable_tensorboard", "save_tb_folder", "enable_wandb"},
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters"},
    "optimizer": {"name", "lr", "eps", "weight_decay", "implementation", "early_step_in_backward"},
    "lr_scheduler": {"warmup_steps", "decay_ratio", "decay_type", "min_lr_factor"},
    "training": {"dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
                 "enable_cpu_offload", "dtype", "mixed_precision_param", "mixed_precision_reduce"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
                    "tensor_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule",
                    "pipeline_parallel_microbatch_size", "context_parallel_degree", "expert_parallel_degree"},
    "checkpoint": {"enable", "folder", "interval", "last_save_model_only", "export_dtype", "async_mode"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "compile": {"enable", "components", "backend"},
    "quantize.linear.float8": {"filter_fqns", "recipe_name", "enable_fsdp_float8_all_gather"},
}

CASES = [("torchtune", "llama3-8b-qlora"), ("torchtune", "llama3-8b-full-finetune"), ("torchtune", "llama3-70b-lora"),
         ("axolotl", "llama3-8b-qlora"), ("axolotl", "llama3-70b-lora"), ("axolotl", "llama3-8b-full-finetune"),
         ("torchtitan", "llama2-7b-pretrain"), ("torchtitan", "llama3-8b-full-finetune")]


@functools.cache
def planned(framework: str, name: str) -> tuple[Project, PlanResult]:
    proj, base = load_project(example_path(name))
    named = Workload.model_validate({**proj.workload.model_dump(exclude_unset=True), "framework": framework})
    proj = proj.model_copy(update={"workload": named})
    return proj, api.plan(proj, base_dir=base)


def as_timed(proj: Project) -> Project:
    return with_framework(proj)[0]


def body(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))


def check_torchtune(p: Project, c: Candidate, cfg: dict[str, Any]) -> None:
    s = read_shape(c)
    assert set(cfg) <= TORCHTUNE_KEYS, set(cfg) - TORCHTUNE_KEYS
    assert cfg["batch_size"] == s.micro and cfg["gradient_accumulation_steps"] == s.accum
    assert cfg["enable_activation_checkpointing"] is s.ckpt
    assert cfg["dtype"] == "bf16"
    if s.gpus > 1:
        assert cfg["data_parallel_shard_dim"] == s.dp and cfg["fsdp_cpu_offload"] is (s.offload == "params")
    if p.workload.task in ("lora", "qlora"):
        assert set(cfg["model"]) == TORCHTUNE_LORA
        assert cfg["model"]["lora_rank"] == p.workload.lora.rank  # type: ignore[union-attr]
        assert cfg["model"]["_component_"].endswith(f"{p.workload.task}_builder")
    assert (cfg["loss"]["_component_"].endswith("LinearCrossEntropyLoss")) is (p.workload.loss == "chunked")


def check_axolotl(p: Project, c: Candidate, cfg: dict[str, Any]) -> None:
    s = read_shape(c)
    assert set(cfg) <= AXOLOTL_KEYS, set(cfg) - AXOLOTL_KEYS
    assert cfg["micro_batch_size"] == s.micro and cfg["gradient_accumulation_steps"] == s.accum
    assert cfg["gradient_checkpointing"] is s.ckpt and cfg["sequence_len"] == p.workload.sequence_length
    assert cfg["load_in_4bit"] is (p.workload.task == "qlora")
    assert cfg.get("adapter") == (p.workload.task if p.workload.task in ("lora", "qlora") else None)
    assert ("deepspeed" in cfg) is (s.zero > 0 and s.dp > 1)
    if s.zero == 3 and s.offload == "none" and s.dp > 1:
        assert cfg["deepspeed"] == "deepspeed_configs/zero3_bf16.json"


def check_torchtitan(p: Project, c: Candidate, cfg: dict[str, Any]) -> None:
    s = read_shape(c)
    flat = dict(_tables(cfg))
    for table, keys in flat.items():
        assert table in TORCHTITAN_KEYS and set(keys) <= TORCHTITAN_KEYS[table], (table, set(keys))
    par, tr = flat["parallelism"], flat["training"]
    assert par["tensor_parallel_degree"] == s.tp and par["pipeline_parallel_degree"] == s.pp
    assert par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] == s.dp
    assert tr["local_batch_size"] == s.micro and tr["global_batch_size"] == s.global_batch
    assert flat["activation_checkpoint"]["mode"] == ("full" if s.ckpt else "none")


def _tables(d: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(dotted name, keys) of every TOML table that holds keys."""
    out = []
    scalars = {k: v for k, v in d.items() if not isinstance(v, dict)}
    if path and scalars:
        out.append((path, scalars))
    for k, v in d.items():
        if isinstance(v, dict):
            out += _tables(v, f"{path}.{k}" if path else k)
    return out


CHECK = {"torchtune": check_torchtune, "axolotl": check_axolotl, "torchtitan": check_torchtitan}


@pytest.mark.parametrize(("framework", "name"), CASES)
def test_every_candidate_exports_and_reads_back(framework: str, name: str) -> None:
    proj, plan = planned(framework, name)
    assert plan.candidates
    timed = as_timed(proj)
    for i, c in enumerate(plan.candidates[:6]):
        assert c.stack is not None and c.stack.framework == framework
        filename, text = export(timed, c, framework, index=i, model_id="meta-llama/Llama-3.1-8B")
        cfg = tomllib.loads(text) if filename.endswith(".toml") else yaml.safe_load(body(text))
        assert "Stack: " + c.stack.text.split(" (")[0] in " ".join(ln.lstrip("# ") for ln in text.splitlines())
        CHECK[framework](timed, c, cfg)


@pytest.mark.parametrize("framework", ["torchtune", "axolotl", "torchtitan"])
def test_a_candidate_timed_on_another_stack_is_refused(framework: str) -> None:
    proj, base = load_project(example_path("llama3-8b-qlora"))  # the HF Trainer + PEFT by default
    c = api.plan(proj, base_dir=base).candidates[0]
    assert c.stack is not None and c.stack.framework == "hf-trainer"
    with pytest.raises(InputError, match=f"--to {framework} writes a {framework} config, which the plan did not"):
        export(proj, c, framework)


def test_layouts_a_framework_cannot_run_are_refused_with_the_reason() -> None:
    proj, plan = planned("torchtune", "llama3-70b-lora")
    c = plan.candidates[0]
    tp = c.model_copy(update={"layout": c.layout.model_copy(update={"tp": 2, "dp": 1})})
    with pytest.raises(InputError, match="only full_finetune_distributed takes tensor_parallel_dim"):
        export(proj, tp, "torchtune")
    zero1 = c.model_copy(update={"layout": c.layout.model_copy(update={"zero": 1})})
    if read_shape(zero1).dp > 1:
        with pytest.raises(InputError, match="FSDP2 \\(ZeRO-3\\) only"):
            export(proj, zero1, "torchtune")
    proj_t, plan_t = planned("torchtitan", "llama2-7b-pretrain")
    ct = plan_t.candidates[0]
    z2 = ct.model_copy(update={"layout": ct.layout.model_copy(update={"zero": 2, "dp": 8, "tp": 1, "pp": 1})})
    z2 = z2.model_copy(update={"servers": 1, "gpus_per_server": 8})
    with pytest.raises(InputError, match="not ZeRO-1/2"):
        export(proj_t, z2, "torchtitan")


def test_axolotl_names_its_own_deepspeed_configs_or_ours() -> None:
    from gpuplan.core.export.axolotl import deepspeed_file
    from gpuplan.core.export.common import Shape

    def shape(zero: int, offload: str) -> Shape:
        return Shape(servers=1, per_server=8, zero=zero, tp=1, pp=1, dp=8, offload=offload, ckpt=False, micro=1,
                     global_batch=8, accum=1, framework="axolotl")

    assert deepspeed_file(shape(1, "none"), "bf16-mixed") == "deepspeed_configs/zero1.json"
    assert deepspeed_file(shape(2, "optimizer"), "bf16-mixed") == "deepspeed_configs/zero2.json"  # it offloads
    assert deepspeed_file(shape(2, "none"), "bf16-mixed") == "ds_config.json"
    assert deepspeed_file(shape(3, "params"), "bf16-mixed") == "deepspeed_configs/zero3_bf16_cpuoffload_all.json"
    assert deepspeed_file(shape(3, "none"), "fp16-mixed") == "ds_config.json"
    assert deepspeed_file(shape(0, "none"), "bf16-mixed") is None


@pytest.mark.parametrize(("framework", "name"), [("torchtune", "llama3-8b-qlora"), ("axolotl", "llama3-8b-qlora"),
                                                 ("torchtitan", "llama3-8b-full-finetune")])
def test_cli_writes_the_framework_config_with_its_defaults(framework: str, name: str, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from gpuplan.cli import export as export_command
    from gpuplan.core.export.targets import FILENAMES

    data = yaml.safe_load(example_path(name).read_text())
    data["workload"]["framework"] = framework
    data["workload"].pop("precision", None)  # the framework's own default applies (torchtune: bf16)
    project = tmp_path / "p.yaml"
    project.write_text(yaml.safe_dump(data))
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        pass

    export_command.register(app)
    r = CliRunner().invoke(app, ["export", str(project), "--to", framework, "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / FILENAMES[framework]).read_text()
    if framework == "torchtune":  # the recipe's defaults the plan timed: chunked loss, bf16
        cfg = yaml.safe_load(body(text))
        assert cfg["loss"]["_component_"] == "torchtune.modules.loss.LinearCrossEntropyLoss"
        assert "no mixed precision" not in text
    elif framework == "axolotl":  # Axolotl's examples pack samples
        assert yaml.safe_load(body(text))["sample_packing"] is True
    else:
        assert tomllib.loads(text)["training"]["mixed_precision_param"] == "bfloat16"
