"""The Accelerate config (`gpuplan export --to accelerate`): FSDP2, DeepSpeed or plain DDP as the candidate's layout
asks; tensor parallelism only through FSDP2 (or alone), no pipeline parallelism."""

from __future__ import annotations

from typing import Any

from gpuplan.core.export.common import (
    FILENAMES,
    HEAD,
    PORT,
    Shape,
    comment,
    export_hint,
    layout_line,
    origin,
    server_line,
    to_yaml,
)
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project

#: Accelerate's mixed_precision for each workload.precision (pure bf16: the model itself is bf16)
ACCELERATE_PRECISION = {"fp32": "no", "fp16-mixed": "fp16", "bf16-mixed": "bf16", "bf16": "no", "fp8-mixed": "fp8"}


def render_accelerate(p: Project, c: Candidate, s: Shape, index: int) -> str:
    """An Accelerate config file (accelerate launch --config_file), its header saying how to run it."""
    if s.pp > 1:
        raise InputError(["--candidate"], f"candidate {index} uses pipeline parallelism (pp={s.pp}), which Accelerate "
                         "cannot express (it has no pipeline engine). To fix: --to deepspeed or --to torchrun with a "
                         "pipeline-capable script (DeepSpeed PipelineModule, Megatron-LM, torchtitan), or export a "
                         "candidate without pipeline parallelism")
    precision = p.workload.precision
    cfg: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    notes: list[str] = []
    _distributed(cfg, notes, s, precision, index)
    cfg["downcast_bf16"] = "no"
    cfg["gpu_ids"] = "all"
    cfg["machine_rank"] = 0
    if s.servers > 1:
        cfg["main_process_ip"] = HEAD
        cfg["main_process_port"] = PORT
    cfg["main_training_function"] = "main"
    mixed = ("bf16" if precision == "bf16" and cfg["distributed_type"] == "DEEPSPEED"
             else ACCELERATE_PRECISION[precision])
    cfg["mixed_precision"] = mixed
    if mixed == "fp8":
        cfg["fp8_config"] = {"backend": "TE", "fp8_format": "HYBRID"}
        notes.append("fp8 needs Transformer Engine installed (fp8_config.backend TE; torchao: AO).")
    cfg["num_machines"] = s.servers
    cfg["num_processes"] = s.gpus
    cfg["rdzv_backend"] = "static"
    cfg["same_network"] = True
    cfg["use_cpu"] = False
    if precision == "bf16" and mixed == "no":
        notes.append("Pure bf16 as planned: load the model with torch_dtype=torch.bfloat16 (mixed_precision: no).")
    if s.ckpt and "fsdp_config" not in cfg:
        notes.append("Gradient checkpointing: call model.gradient_checkpointing_enable() in the script.")
    if p.workload.task == "qlora" and ("fsdp_config" in cfg or s.zero == 3):
        notes.append("QLoRA with sharding: load the 4-bit model with bnb_4bit_quant_storage=torch.bfloat16.")
    batch = f"DataLoader batch_size={s.micro} per process"
    if cfg["distributed_type"] != "DEEPSPEED":
        batch += f", Accelerator(gradient_accumulation_steps={s.accum})"
    edit = [f"Run: accelerate launch --config_file {FILENAMES['accelerate']} train.py (your script; {batch})."]
    if s.servers > 1:
        edit.append(f"Copy this file to each of the {s.servers} servers; set machine_rank to 0..{s.servers - 1} "
                    f"(0 on the server whose address replaces {HEAD}).")
    header = [origin(p, c, index), layout_line(p, s), server_line(c), *edit, *notes]
    return comment(header) + to_yaml(cfg)


def _distributed(cfg: dict[str, Any], notes: list[str], s: Shape, precision: str, index: int) -> None:
    """Set how Accelerate spreads the job (distributed_type and its FSDP2, parallelism or DeepSpeed section) in
    `cfg`, with the notes it needs: tensor parallelism through FSDP2, ZeRO-3 as FSDP2, other stages as DeepSpeed."""
    fsdp = {"fsdp_version": 2, "fsdp_reshard_after_forward": s.zero == 3, "fsdp_offload_params": s.offload != "none",
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": s.ckpt}
    if s.tp > 1:
        cfg["distributed_type"] = "FSDP" if s.dp > 1 else "MULTI_GPU"
        if s.dp > 1:
            cfg["fsdp_config"] = fsdp
        cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": 1,
                                     "parallelism_config_dp_shard_size": s.dp, "parallelism_config_tp_size": s.tp,
                                     "parallelism_config_cp_size": 1}
        notes.append(f"Tensor parallel {s.tp}: load the model with from_pretrained(..., tp_plan=\"auto\"); "
                     "Accelerate checks that its tensor-parallel size matches.")
        if s.dp > 1 and s.zero < 3:
            notes.append(f"Accelerate composes tensor parallelism with FSDP2 only: the plan's ZeRO-{s.zero} over "
                         f"{s.dp} data-parallel ranks runs as FSDP2 sharding that keeps parameters gathered between "
                         "forward and backward (reshard_after_forward: false); it uses no more memory than planned.")
    elif s.gpus == 1:
        cfg["distributed_type"] = "NO"
    elif s.zero == 3 and s.offload == "none":
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = fsdp
        notes.append("ZeRO-3 runs as FSDP2 FULL_SHARD (reshard_after_forward: true).")
    elif s.zero >= 1:
        cfg["distributed_type"] = "DEEPSPEED"
        ds: dict[str, Any] = {"zero_stage": s.zero, "gradient_accumulation_steps": s.accum, "gradient_clipping": 1.0,
                              "offload_optimizer_device": "cpu" if s.offload != "none" else "none",
                              "offload_param_device": "cpu" if s.offload == "params" else "none",
                              "zero3_init_flag": s.zero == 3}
        if s.zero == 3:
            ds["zero3_save_16bit_model"] = True
        if s.servers > 1:
            ds["deepspeed_multinode_launcher"] = "standard"  # torchrun on every server, no pdsh/hostfile
        cfg["deepspeed_config"] = ds
        if precision == "bf16":
            notes.append("Pure bf16: Accelerate's DeepSpeed keeps fp32 master weights, more optimizer memory than "
                         "planned; for bf16 master weights and optimizer states replace deepspeed_config's keys with "
                         "deepspeed_config_file: ds_config.json (" + export_hint("deepspeed", index) + ").")
    else:
        cfg["distributed_type"] = "MULTI_GPU"


__all__ = ["ACCELERATE_PRECISION", "render_accelerate"]
