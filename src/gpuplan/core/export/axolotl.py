"""The Axolotl config (`gpuplan export --to axolotl`, issue #30): the YAML `axolotl train FILE` reads, with the
model, adapter (LoRA/QLoRA), micro/global batch, precision, recomputation and ZeRO stage the plan timed.

Key names are Axolotl's (axolotl-ai-cloud/axolotl @067b021, 2026-07-24): the fields of
src/axolotl/utils/schemas/{config,model,peft,training}.py and examples/llama-3/qlora.yml, lora-8b.yml. ZeRO runs
through DeepSpeed: the config names one of Axolotl's own deepspeed_configs/*.json where one is exactly the planned
stage and offload (zero1.json; zero2.json, which offloads the optimizer; zero3_bf16.json;
zero3_bf16_cpuoffload_all.json), else the DeepSpeed config `gpuplan export --to deepspeed` writes. gpuplan declares
no tensor or pipeline parallelism for Axolotl (data/frameworks.toml): those candidates are refused.
"""

from __future__ import annotations

from typing import Any

from gpuplan.core.export.common import (
    FILENAMES,
    Shape,
    comment,
    export_hint,
    layout_line,
    origin,
    server_line,
    slug,
    to_yaml,
)
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project

#: gpuplan's optimizers as Axolotl names them (transformers' OptimizerNames)
OPTIMIZERS = {"adamw": "adamw_torch_fused", "adamw-8bit": "adamw_bnb_8bit", "paged-adamw-8bit": "paged_adamw_8bit",
              "adafactor": "adafactor", "sgd": "sgd"}
#: (ZeRO stage, offload, 16-bit type) -> the Axolotl DeepSpeed config that is exactly that
SHIPPED = {(1, "none", "any"): "deepspeed_configs/zero1.json", (2, "optimizer", "any"): "deepspeed_configs/zero2.json",
           (3, "none", "bf16"): "deepspeed_configs/zero3_bf16.json",
           (3, "params", "bf16"): "deepspeed_configs/zero3_bf16_cpuoffload_all.json"}


def deepspeed_file(s: Shape, precision: str) -> str | None:
    """The DeepSpeed config the Axolotl file names for the candidate's ZeRO stage and offload (None: plain DDP)."""
    if s.zero == 0 or s.dp <= 1:
        return None
    half = "bf16" if precision in ("bf16", "bf16-mixed") else "other"
    return SHIPPED.get((s.zero, s.offload, "any")) or SHIPPED.get((s.zero, s.offload, half)) or FILENAMES["deepspeed"]


def axolotl_config(p: Project, c: Candidate, s: Shape, index: int, model_id: str | None) -> dict[str, Any]:
    """The Axolotl config as a dict, in the order Axolotl's examples list their keys."""
    w = p.workload
    why = None
    if w.task not in ("full-finetune", "lora", "qlora"):
        why = f"task {w.task}: gpuplan writes Axolotl's supervised fine-tuning (full, LoRA, QLoRA) only"
    elif s.tp > 1 or s.pp > 1:
        why = f"tensor/pipeline parallelism (tp={s.tp}, pp={s.pp}) is not declared for Axolotl"
    elif w.precision == "fp8-mixed":
        why = "fp8 is not declared for Axolotl"
    if why:
        raise InputError(["--candidate"], f"candidate {index} cannot run as an Axolotl config: {why}. To fix: export "
                         "another candidate, or plan with another workload.framework")
    cfg: dict[str, Any] = {"base_model": model_id or "EDIT_ME", "load_in_8bit": False,
                           "load_in_4bit": w.task == "qlora"}
    cfg["datasets"] = [{"path": "EDIT_ME", "type": "alpaca"}]
    cfg["output_dir"] = f"./outputs/{slug(p.name)}"
    if w.task in ("lora", "qlora"):
        lora = w.lora
        cfg["adapter"] = w.task
        cfg["lora_r"] = lora.rank if lora else 16
        cfg["lora_alpha"] = lora.alpha if lora else 32.0
        cfg["lora_dropout"] = 0.0
        targets = lora.targets if lora else ["all-linear"]
        if "all-linear" in targets:
            cfg["lora_target_linear"] = True
        else:
            cfg["lora_target_modules"] = list(targets)
    cfg["sequence_len"] = w.sequence_length
    cfg["sample_packing"] = bool(w.packing)
    cfg["micro_batch_size"] = s.micro
    cfg["gradient_accumulation_steps"] = s.accum
    cfg["num_epochs"] = w.epochs or 1
    cfg["optimizer"] = OPTIMIZERS.get(w.optimizer, "adamw_torch_fused")
    if w.optimizer == "adamw" and w.optimizer_implementation != "fused":
        cfg["optimizer"] = "adamw_torch"
    cfg["learning_rate"] = 0.0002
    cfg["bf16"] = w.precision in ("bf16", "bf16-mixed")
    cfg["fp16"] = w.precision == "fp16-mixed"
    cfg["tf32"] = bool(w.tf32)
    cfg["gradient_checkpointing"] = s.ckpt
    cfg["activation_offloading"] = bool(w.activation_offload)
    cfg["attn_implementation"] = {"flash": "flash_attention_2", "eager": "eager"}.get(w.attention, "sdpa")
    cfg["torch_compile"] = bool(w.compile)
    ds = deepspeed_file(s, w.precision)
    if ds is not None:
        cfg["deepspeed"] = ds
    return cfg


def render_axolotl(p: Project, c: Candidate, s: Shape, index: int, model_id: str | None) -> str:
    """The YAML file, its header saying how to run it and what to edit."""
    cfg = axolotl_config(p, c, s, index, model_id)
    launch = (f"accelerate launch --num_machines {s.servers} --machine_rank RANK --main_process_ip HEAD_NODE_IP "
              f"--num_processes {s.gpus} -m axolotl.cli.train axolotl.yaml" if s.servers > 1
              else "axolotl train axolotl.yaml")
    notes = [f"Run: {launch}", "Edit: datasets (path and type); learning_rate 0.0002 is Axolotl's examples' value, "
             "not planned; num_epochs from workload.epochs."]
    if cfg.get("deepspeed") == FILENAMES["deepspeed"]:
        notes.append(f"ZeRO-{s.zero} with offload {s.offload} is none of Axolotl's shipped DeepSpeed configs: write "
                     f"{FILENAMES['deepspeed']} with `{export_hint('deepspeed', index)}` beside this file.")
    elif "deepspeed" in cfg:
        notes.append(f"{cfg['deepspeed']} ships with Axolotl (its repository root).")
    if p.workload.precision == "bf16":
        notes.append("Pure bf16 as planned: Axolotl's bf16: true runs mixed precision over the loaded dtype; load the "
                     "model in bf16 (torch_dtype) for the planned memory.")
    header = [origin(p, c, index), layout_line(p, s), server_line(c), *notes]
    return comment(header) + to_yaml(cfg)


__all__ = ["OPTIMIZERS", "axolotl_config", "deepspeed_file", "render_axolotl"]
