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


def script_args(p: Project, s: Shape) -> list[str]:
    """The training script's arguments, in Hugging Face Trainer's names (TrainingArguments)."""
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
              "Edit: train.py and its arguments (extra arguments to this script are passed on).", *where,
              *script_notes(p, s, index)]
    cmd = continued(["torchrun", *launch, "train.py", *script_args(p, s), '"$@"'])
    return (f"#!/usr/bin/env bash\n{comment(header)}set -euo pipefail\n"
            f"export OMP_NUM_THREADS={threads(c)}  # {c.server.cpu_cores} CPU cores / {s.per_server} processes\n"
            f"{cmd}\n")


def continued(words: list[str], indent: str = "  ") -> str:
    """A command over several lines: the launcher's options one per line, the script and its arguments last."""
    script = words.index("train.py")
    lines = [words[0], *words[1:script], " ".join(words[script:])]
    return (" \\\n" + indent).join(lines)


__all__ = ["continued", "render_torchrun", "script_args", "script_notes", "threads"]
