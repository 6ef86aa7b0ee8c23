"""The DeepSpeed config (`gpuplan export --to deepspeed`): batch sizes, ZeRO and offload, precision, AutoTP or
the pipeline engine (ZeRO stage 0 or 1 only), and where it came from in a `_gpuplan` key."""

from __future__ import annotations

import json
from typing import Any

from gpuplan.core.export.common import (
    FILENAMES,
    Shape,
    layout_line,
    origin,
    server_line,
)
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project


def deepspeed_config(p: Project, c: Candidate, s: Shape, index: int) -> dict[str, Any]:
    """The DeepSpeed config as a dict; its `_gpuplan` key (first, filled last) says where it came from."""
    if s.pp > 1 and s.zero >= 2:
        raise InputError(["--candidate"], f"candidate {index} combines pipeline parallelism (pp={s.pp}) with ZeRO-"
                         f"{s.zero}; DeepSpeed's pipeline engine takes ZeRO stage 0 or 1 only. To fix: --to torchrun "
                         "with a Megatron-LM or torchtitan script, or export another candidate")
    precision = p.workload.precision
    notes = ["Batch sizes and ZeRO come from the plan; gradient_clipping 1.0 is a common default, not planned."]
    zero: dict[str, Any] = {"stage": s.zero}
    if s.zero:
        zero.update(overlap_comm=True, contiguous_gradients=True)
    if s.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if s.offload == "params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if s.zero == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    cfg: dict[str, Any] = {
        "_gpuplan": {},
        "train_batch_size": s.global_batch,
        "train_micro_batch_size_per_gpu": s.micro,
        "gradient_accumulation_steps": s.accum,
        "gradient_clipping": 1.0,
        "steps_per_print": 100,
        "zero_optimization": zero,
    }
    if precision == "fp16-mixed":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    elif precision in ("bf16-mixed", "fp8-mixed"):
        cfg["bf16"] = {"enabled": True}
    elif precision == "bf16":
        cfg["bf16"] = {"enabled": True}
        if s.zero:
            cfg["bf16"].update(bf16_master_weights_and_grads=True, bf16_optimizer_states=True)
        else:
            notes.append("Pure bf16 at ZeRO-0: DeepSpeed keeps fp32 master weights (bf16 master weights need ZeRO "
                         "1-3), more memory than planned.")
    if precision == "fp8-mixed":
        notes.append("fp8: the fp8 matmuls come from Transformer Engine or torchao layers in the model; DeepSpeed "
                     "runs bf16 around them.")
    if s.ckpt:
        cfg["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False,
                                           "contiguous_memory_optimization": False,
                                           "synchronize_checkpoint_boundary": False}
        notes.append("Gradient checkpointing: Hugging Face models turn it on with "
                     "model.gradient_checkpointing_enable(); activation_checkpointing configures "
                     "deepspeed.checkpointing for models that call it.")
    if s.tp > 1 and s.pp == 1:
        cfg["tensor_parallel"] = {"autotp_size": s.tp}
        notes.append(f"Tensor parallel {s.tp} through DeepSpeed AutoTP training (a recent DeepSpeed; ZeRO-3 with "
                     "AutoTP needs the newest).")
    if s.tp > 1 or s.pp > 1:
        notes.append(f"train_batch_size counts the {s.dp} data-parallel ranks, as DeepSpeed does with model "
                     f"parallelism; the Hugging Face Trainer counts all {s.gpus} processes and reports a mismatch: "
                     "delete train_batch_size (DeepSpeed derives it) when you launch through the Trainer.")
    if s.pp > 1:
        cfg["pipeline"] = {"stages": s.pp, "partition": "parameters",
                           "activation_checkpoint_interval": 1 if s.ckpt else 0}
        notes.append(f"Pipeline parallel {s.pp}: build the model as deepspeed.pipe.PipelineModule(layers, "
                     f"num_stages={s.pp}); the pipeline section only seeds it.")
        if s.tp > 1:
            notes.append(f"Tensor parallel {s.tp} inside pipeline stages: DeepSpeed runs 3-D parallelism through "
                         "Megatron-DeepSpeed (its mpu and PipeModelDataParallelTopology); AutoTP is not set here.")
    cfg["wall_clock_breakdown"] = False
    cfg["_gpuplan"] = {
        "generated_by": origin(p, c, index), "layout": layout_line(p, s), "server": server_line(c),
        "edit": f"pass this file to deepspeed.initialize(config=...) or to the Hugging Face Trainer "
                f"(--deepspeed {FILENAMES['deepspeed']}); launch with deepspeed or torchrun "
                f"({s.servers} x {s.per_server} processes); optimizer {p.workload.optimizer} and learning rate "
                "come from your script",
        "notes": notes,
    }
    return cfg


def render_deepspeed(p: Project, c: Candidate, s: Shape, index: int) -> str:
    return json.dumps(deepspeed_config(p, c, s, index), indent=2) + "\n"


__all__ = ["deepspeed_config", "render_deepspeed"]
