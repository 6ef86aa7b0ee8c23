"""The torchtune recipe config (`gpuplan export --to torchtune`, issue #30): the YAML `tune run RECIPE --config FILE`
reads, with the layout, batch, precision, recomputation and LoRA/QLoRA settings the plan timed.

Key names are torchtune's (pytorch/torchtune @bd2a0fc, 2026-04-23): recipes/configs/llama3_1/8B_full.yaml,
70B_lora.yaml, 8B_qlora_single_device.yaml, and the keys the recipes read (recipes/full_finetune_distributed.py,
lora_finetune_distributed.py and their single-device twins: `cfg.get("tensor_parallel_dim")`,
`"fsdp_cpu_offload"`, `"enable_fp8_training"`, `"optimizer_in_bwd"`, ...). torchtune shards with FSDP2 only (ZeRO-3),
runs tensor parallelism only in full_finetune_distributed (lora_finetune_distributed asserts tensor_parallel_dim 1),
has no pipeline parallelism, and its fsdp_cpu_offload offloads parameters, gradients and optimizer states together.
"""

from __future__ import annotations

from typing import Any

from gpuplan.core.export.common import Shape, comment, layout_line, origin, server_line, slug, to_yaml
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project

#: gpuplan's optimizers as torchtune configs name them (torch, bitsandbytes)
OPTIMIZERS = {"adamw": "torch.optim.AdamW", "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
              "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit", "sgd": "torch.optim.SGD"}
#: a LoRA target's torchtune name (its attention projections; any MLP projection adapts the whole MLP)
ATTENTION = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj",
             "output_proj": "output_proj"}
MLP = {"gate_proj", "up_proj", "down_proj", "w1", "w2", "w3", "fc1", "fc2"}
#: the torchtune learning rates of the recipes gpuplan's task maps to (not planned: a starting point)
LR = {"full-finetune": 2e-5, "lora": 3e-4, "qlora": 3e-4}


def recipe(task: str, gpus: int) -> str:
    """The torchtune recipe that runs `task` on `gpus` GPUs."""
    kind = "full" if task == "full-finetune" else "lora"
    return f"{kind}_finetune_{'single_device' if gpus == 1 else 'distributed'}"


def _refuse(p: Project, s: Shape, index: int) -> None:
    task = p.workload.task
    why = None
    if task not in LR:
        why = f"task {task}: gpuplan writes torchtune's full, LoRA and QLoRA fine-tuning recipes only"
    elif s.pp > 1:
        why = f"pipeline parallelism (pp={s.pp}): torchtune's recipes have none"
    elif s.tp > 1 and task != "full-finetune":
        why = f"tensor parallelism (tp={s.tp}) for {task}: only full_finetune_distributed takes tensor_parallel_dim"
    elif s.dp > 1 and s.zero != 3:
        why = f"ZeRO-{s.zero} over {s.dp} data-parallel ranks: torchtune shards with FSDP2 (ZeRO-3) only"
    elif s.offload == "optimizer":
        why = ("optimizer offload alone: torchtune's fsdp_cpu_offload offloads parameters, gradients and optimizer "
               "states together (plan offload: params)")
    elif p.workload.precision == "fp8-mixed" and (task != "full-finetune" or s.gpus == 1):
        why = "fp8: only full_finetune_distributed has enable_fp8_training"
    if why:
        raise InputError(["--candidate"], f"candidate {index} cannot run as a torchtune recipe: {why}. To fix: "
                         "export another candidate, or plan with another workload.framework")


def _model(p: Project, model_id: str | None) -> dict[str, Any]:
    w = p.workload
    prefix = {"lora": "lora_", "qlora": "qlora_"}.get(w.task, "")
    model: dict[str, Any] = {"_component_": f"EDIT_ME.{prefix}builder"}
    if w.lora is not None or w.task in ("lora", "qlora"):
        lora = w.lora
        targets = set(lora.targets if lora else ["all-linear"])
        every = "all-linear" in targets
        attn = ["q_proj", "k_proj", "v_proj", "output_proj"] if every else \
            sorted({ATTENTION[t] for t in targets if t in ATTENTION})
        model.update(lora_attn_modules=attn, apply_lora_to_mlp=every or bool(targets & MLP),
                     apply_lora_to_output=False, lora_rank=lora.rank if lora else 16,
                     lora_alpha=lora.alpha if lora else 32.0, lora_dropout=0.0)
    return model


def torchtune_config(p: Project, c: Candidate, s: Shape, index: int, model_id: str | None) -> dict[str, Any]:
    """The recipe config as a dict, in the order torchtune's own configs list their keys."""
    _refuse(p, s, index)
    w = p.workload
    name = model_id or "MODEL"
    local = f"/tmp/{name.split('/')[-1]}"
    out = f"/tmp/torchtune/{slug(p.name)}"
    optimizer: dict[str, Any] = {"_component_": OPTIMIZERS.get(w.optimizer, "torch.optim.AdamW"), "lr": LR[w.task]}
    if optimizer["_component_"] == "torch.optim.AdamW" and w.optimizer_implementation == "fused":
        optimizer["fused"] = True
    cfg: dict[str, Any] = {
        "output_dir": out,
        "model": _model(p, model_id),
        "tokenizer": {"_component_": "EDIT_ME.tokenizer", "path": f"{local}/original/tokenizer.model",
                      "max_seq_len": w.sequence_length},
        "checkpointer": {"_component_": "torchtune.training.FullModelHFCheckpointer", "checkpoint_dir": local,
                         "checkpoint_files": ["EDIT_ME.safetensors"], "recipe_checkpoint": None,
                         "output_dir": out, "model_type": "EDIT_ME"},
        "resume_from_checkpoint": False,
        "dataset": {"_component_": "torchtune.datasets.alpaca_cleaned_dataset", "packed": bool(w.packing)},
        "seed": None,
        "shuffle": True,
        "batch_size": s.micro,
        "epochs": max(1, round(w.epochs)) if w.epochs else 1,
        "max_steps_per_epoch": None,
        "gradient_accumulation_steps": s.accum,
        "optimizer": optimizer,
        "loss": {"_component_": "torchtune.modules.loss.LinearCrossEntropyLoss" if w.loss == "chunked"
                 else "torch.nn.CrossEntropyLoss"},
        "clip_grad_norm": None,
        "compile": bool(w.compile),
    }
    if w.task == "full-finetune":
        cfg["optimizer_in_bwd"] = bool(w.optimizer_in_backward)
    cfg.update(device="cuda", dtype="fp32" if w.precision == "fp32" else "bf16",
               enable_activation_checkpointing=s.ckpt, enable_activation_offloading=bool(w.activation_offload))
    if s.gpus > 1:
        cfg["fsdp_cpu_offload"] = s.offload == "params"
        cfg["data_parallel_shard_dim"] = s.dp
        if w.task == "full-finetune":
            cfg["tensor_parallel_dim"] = s.tp
            cfg["enable_fp8_training"] = w.precision == "fp8-mixed"
    cfg.update(metric_logger={"_component_": "torchtune.training.metric_logging.DiskLogger",
                              "log_dir": f"{out}/logs"},
               log_every_n_steps=1, log_peak_memory_stats=True)
    return cfg


def render_torchtune(p: Project, c: Candidate, s: Shape, index: int, model_id: str | None) -> str:
    """The YAML file, its header saying how to run it and what to edit."""
    cfg = torchtune_config(p, c, s, index, model_id)
    rec = recipe(p.workload.task, s.gpus)
    nodes = (f"--nnodes {s.servers} --rdzv_backend c10d --rdzv_endpoint HEAD_NODE_IP:29500 " if s.servers > 1
             else "")
    notes = [f"Run: tune run {nodes}--nproc_per_node {s.per_server} {rec} --config torchtune_config.yaml"
             + (f" (on each of the {s.servers} servers)" if s.servers > 1 else ""),
             f"Edit the EDIT_ME values: torchtune's model builder for {model_id or 'the model'} (e.g. "
             "torchtune.models.llama3_1." + ("qlora_" if p.workload.task == "qlora" else "lora_" if
                                             p.workload.task == "lora" else "") + "llama3_1_8b), its tokenizer, "
             "checkpoint files and model_type; the dataset and learning rate are torchtune's recipe defaults, not "
             "planned."]
    if p.workload.precision in ("bf16-mixed", "fp16-mixed", "fp8-mixed"):
        notes.append(f"torchtune has no mixed precision: dtype bf16 keeps parameters, gradients and optimizer "
                     f"states in bf16 (the plan timed {p.workload.precision}; plan precision bf16 for torchtune's "
                     "memory).")
    header = [origin(p, c, index), layout_line(p, s), server_line(c), *notes]
    return comment(header) + to_yaml(cfg)


__all__ = ["OPTIMIZERS", "recipe", "render_torchtune", "torchtune_config"]
