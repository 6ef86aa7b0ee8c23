"""The torchrun launch script (`gpuplan export --to torchrun`), and the training script's arguments and notes that
the SkyPilot task's torchrun line shares."""

from __future__ import annotations

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
    slug,
)
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project


def megatron_args(p: Project, s: Shape) -> list[str]:
    """Megatron-LM pretrain_gpt.py's arguments for the layout (megatron/training/arguments.py): parallel sizes
    (sequence parallelism with tensor parallelism, as the speed model's tuned stack overlaps it), the distributed
    optimizer for ZeRO-1, the batch, the sequence, full recomputation and the precision."""
    w = p.workload
    args = ["--tensor-model-parallel-size", str(s.tp), "--pipeline-model-parallel-size", str(s.pp),
            "--micro-batch-size", str(s.micro), "--global-batch-size", str(s.global_batch)]
    if w.sequence_length:
        args += ["--seq-length", str(w.sequence_length)]
    if s.tp > 1:
        args.append("--sequence-parallel")
    if s.zero == 1:
        args.append("--use-distributed-optimizer")
    if s.ckpt:
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if w.precision in ("bf16-mixed", "bf16", "fp8-mixed"):
        args.append("--bf16")
    elif w.precision == "fp16-mixed":
        args.append("--fp16")
    if w.precision == "fp8-mixed":
        args += ["--fp8-format", "hybrid"]
    return args


def script_args(p: Project, s: Shape) -> list[str]:
    """The training script's arguments, in Hugging Face Trainer's names (TrainingArguments), or Megatron-LM's
    when the plan timed the candidate on NeMo / Megatron-Core."""
    if s.framework == "nemo":
        return megatron_args(p, s)
    args = ["--per_device_train_batch_size", str(s.micro), "--gradient_accumulation_steps", str(s.accum)]
    prec = p.workload.precision
    if prec in ("bf16-mixed", "bf16", "fp8-mixed"):
        args.append("--bf16")
    elif prec == "fp16-mixed":
        args.append("--fp16")
    if s.ckpt:
        args.append("--gradient_checkpointing")
    if s.zero or s.tp > 1 or s.pp > 1:
        args += ["--deepspeed", FILENAMES["deepspeed"]]
    return args


def script_notes(p: Project, s: Shape, index: int, where: str = "") -> list[str]:
    """What the script must do that its arguments do not say; `where`: where ds_config.json lies."""
    if s.framework == "nemo":
        return ["The plan timed NeMo / Megatron-Core: pretrain_gpt.py and its arguments are Megatron-LM's "
                "(megatron/training/arguments.py); add the model (--num-layers, --hidden-size, ...), data, "
                "tokenizer and optimizer arguments, or run the same layout from a NeMo recipe."]
    notes = ["The arguments after train.py are Hugging Face Trainer's (TrainingArguments): rename them for "
             "your own script."]
    parts = [f"ZeRO-{s.zero}"] * bool(s.zero) + [f"tensor parallel {s.tp}"] * (s.tp > 1) + \
        [f"pipeline parallel {s.pp}"] * (s.pp > 1)
    if parts:
        joined = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        notes.append(f"{joined} come{'s' * (len(parts) == 1)} from {FILENAMES['deepspeed']}{where}: write it "
                     f"with `{export_hint('deepspeed', index)}`.")
    if s.pp > 1:
        notes.append("The Trainer has no pipeline parallelism: the script must build the stages (DeepSpeed "
                     "PipelineModule, Megatron-LM, torchtitan).")
    if p.workload.precision == "bf16":
        notes.append("Pure bf16 as planned: load the model with torch_dtype=torch.bfloat16.")
    return notes


def threads(c: Candidate) -> int:
    """OMP_NUM_THREADS: the server's CPU cores shared by its processes."""
    return max(1, c.server.cpu_cores // c.gpus_per_server)


def render_torchrun(p: Project, c: Candidate, s: Shape, index: int) -> str:
    """A bash script that runs torchrun on one server, or on each server with a c10d rendezvous."""
    if s.servers == 1:
        launch = ["--standalone", "--nnodes=1", f"--nproc-per-node={s.per_server}"]
        where = ["Run it on the server."]
    else:
        launch = [f"--nnodes={s.servers}", f"--nproc-per-node={s.per_server}", "--rdzv-backend=c10d",
                  f'--rdzv-endpoint="${{{HEAD}:?set to the address of server 0}}:{PORT}"',
                  f"--rdzv-id={slug(p.name)}"]
        where = [f"Run this same script on each of the {s.servers} servers, with {HEAD} set to the address of "
                 "one of them (server 0)."]
    header = [origin(p, c, index), layout_line(p, s), server_line(c),
              f"Edit: {s.script} and its arguments (extra arguments to this script are passed on).", *where,
              *script_notes(p, s, index)]
    cmd = continued(["torchrun", *launch, s.script, *script_args(p, s), '"$@"'])
    return (f"#!/usr/bin/env bash\n{comment(header)}set -euo pipefail\n"
            f"export OMP_NUM_THREADS={threads(c)}  # {c.server.cpu_cores} CPU cores / {s.per_server} processes\n"
            f"{cmd}\n")


def continued(words: list[str], indent: str = "  ") -> str:
    """A command over several lines: the launcher's options one per line, the script and its arguments last."""
    script = next(i for i, w in enumerate(words) if w.endswith(".py"))
    lines = [words[0], *words[1:script], " ".join(words[script:])]
    return (" \\\n" + indent).join(lines)


__all__ = ["continued", "megatron_args", "render_torchrun", "script_args", "script_notes", "threads"]
