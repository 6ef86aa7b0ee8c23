"""The torchtitan job config (`gpuplan export --to torchtitan`, issue #30): the TOML file
`torchrun ... -m torchtitan.train --job.config_file FILE` reads, with the layout (FSDP2 or DDP, tensor, pipeline),
micro/global batch, sequence, precision, recomputation and fp8 the plan timed.

Key names are torchtitan's TOML job config (pytorch/torchtitan torchtitan/config/job_config.py and
models/llama3/train_configs/llama3_8b.toml at the parent of commit 9810191, 2026-02-23: the last before the "Config
System Refactor: TOML to Python Dataclass Registry", after which torchtitan takes `--module/--config` registry entries
and the same section.field names as command-line overrides, e.g. --parallelism.tensor_parallel_degree 2). torchtitan
runs DDP (data_parallel_replicate_degree) and FSDP2 (data_parallel_shard_degree), not ZeRO-1/2; full training only
(no LoRA); pipeline micro-batches are pipeline_parallel_microbatch_size.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gpuplan.core.export.common import Shape, comment, layout_line, origin, server_line, slug
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string is a JSON string for the characters written here


def to_toml(d: dict[str, dict[str, Any]]) -> str:
    """Tables of scalars and lists of scalars (a dotted table name for nested sections)."""
    out = []
    for table, keys in d.items():
        out.append(f"[{table}]\n" + "".join(f"{k} = {_value(v)}\n" for k, v in keys.items()))
    return "\n".join(out)


def torchtitan_config(p: Project, c: Candidate, s: Shape, index: int,
                      model_id: str | None) -> dict[str, dict[str, Any]]:
    """The job config as tables of keys."""
    w = p.workload
    why = None
    if w.task not in ("pretrain", "full-finetune"):
        why = f"task {w.task}: torchtitan trains whole models (no LoRA, QLoRA or preference tuning)"
    elif s.dp > 1 and s.zero in (1, 2):
        why = f"ZeRO-{s.zero}: torchtitan runs DDP or FSDP2 (ZeRO-3), not ZeRO-1/2"
    elif s.offload == "optimizer":
        why = "optimizer offload alone: torchtitan's training.enable_cpu_offload offloads FSDP2's parameters too"
    if why:
        raise InputError(["--candidate"], f"candidate {index} cannot run as a torchtitan job: {why}. To fix: export "
                         "another candidate, or plan with another workload.framework")
    name = (model_id or "MODEL").split("/")[-1]
    training: dict[str, Any] = {"local_batch_size": s.micro, "global_batch_size": s.global_batch,
                                "seq_len": w.sequence_length or 2048}
    step_tokens = s.global_batch * (w.sequence_length or 2048)
    if w.tokens:
        training["steps"] = max(1, math.ceil(w.tokens / step_tokens))
    training["max_norm"] = 1.0
    training["dataset"] = "c4"
    if w.precision in ("bf16", "fp32"):
        training["dtype"] = "bfloat16" if w.precision == "bf16" else "float32"
    training["mixed_precision_param"] = "float32" if w.precision in ("fp32", "fp16-mixed") else "bfloat16"
    training["enable_cpu_offload"] = s.offload == "params"
    fsdp = s.dp > 1 and s.zero == 3
    par: dict[str, Any] = {"data_parallel_replicate_degree": 1 if fsdp else s.dp,
                           "data_parallel_shard_degree": s.dp if fsdp else 1,
                           "tensor_parallel_degree": s.tp, "pipeline_parallel_degree": s.pp,
                           "context_parallel_degree": 1}
    if s.pp > 1:
        par["pipeline_parallel_microbatch_size"] = s.micro
        par["pipeline_parallel_schedule"] = "1F1B"
    cfg: dict[str, dict[str, Any]] = {
        "job": {"dump_folder": "./outputs", "description": f"gpuplan: {p.name}"},
        "metrics": {"log_freq": 10, "enable_tensorboard": False},
        "model": {"name": "EDIT_ME", "flavor": "EDIT_ME", "hf_assets_path": f"./assets/hf/{name}"},
        "optimizer": {"name": "AdamW", "lr": 3e-4, "eps": 1e-8,
                      "implementation": {"fused": "fused", "foreach": "foreach"}.get(w.optimizer_implementation,
                                                                                      "for-loop")},
        "training": training,
        "parallelism": par,
        "checkpoint": {"enable": False, "folder": "checkpoint", "interval": 500},
        "activation_checkpoint": {"mode": "full" if s.ckpt else "none"},
        "compile": {"enable": bool(w.compile), "components": ["model", "loss"]},
    }
    if w.precision == "fp8-mixed":
        cfg["model"]["converters"] = ["float8"]
        cfg["quantize.linear.float8"] = {"filter_fqns": ["output"]}
    return cfg


def render_torchtitan(p: Project, c: Candidate, s: Shape, index: int, model_id: str | None) -> str:
    """The TOML file, its header saying how to run it and what to edit."""
    cfg = torchtitan_config(p, c, s, index, model_id)
    rdzv = (f"--nnodes={s.servers} --rdzv-backend=c10d --rdzv-endpoint=HEAD_NODE_IP:29500 --rdzv-id={slug(p.name)}"
            if s.servers > 1 else "--standalone --nnodes=1")
    notes = [f"Run: torchrun {rdzv} --nproc-per-node={s.per_server} -m torchtitan.train "
             "--job.config_file torchtitan.toml" + (f" (on each of the {s.servers} servers)" if s.servers > 1 else ""),
             f"Edit: model.name and model.flavor (torchtitan's name for {model_id or 'the model'}, e.g. llama3 / 8B), "
             "the dataset; lr 3e-4 is torchtitan's llama3_8b.toml value, not planned.",
             "torchtitan after 2026-02-23 reads Python config registry entries instead of TOML: pass the same "
             "section.field values as overrides (--training.local_batch_size ...)."]
    header = [origin(p, c, index), layout_line(p, s), server_line(c), *notes]
    return comment(header) + to_toml(cfg)


__all__ = ["render_torchtitan", "to_toml", "torchtitan_config"]
