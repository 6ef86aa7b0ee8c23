"""SkyPilot exports (`gpuplan export --to skypilot`): a task that runs torchrun on every node for training, a
SkyServe service running vLLM for serving."""

from __future__ import annotations

import math
import re
from typing import Any

from gpuplan.core.export.common import (
    FILENAMES,
    HEAD,
    PORT,
    Shape,
    comment,
    engine_batch_cap,
    engine_command,
    layout_line,
    origin,
    server_line,
    slug,
    to_yaml,
    vllm_engine_flags,
)
from gpuplan.core.export.torchrun import continued, script_args, script_notes, threads
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project
from gpuplan.units import GIB

#: catalog GPU id -> SkyPilot accelerator name, as `sky show-gpus -a` lists them (SkyPilot docs,
#: docs/source/compute/show-gpus-all.txt, 2025). GPUs not here get a guessed name and a comment to check it.
SKYPILOT_ACCELERATORS = {
    "v100-sxm2-16gb": "V100", "v100-sxm2-32gb": "V100-32GB", "v100-pcie-32gb": "V100-32GB", "t4-16gb": "T4",
    "a10-24gb": "A10", "a10g-24gb": "A10G", "a40-48gb": "A40", "a100-pcie-40gb": "A100", "a100-sxm-40gb": "A100",
    "a100-pcie-80gb": "A100-80GB", "a100-sxm-80gb": "A100-80GB", "rtx-a6000-48gb": "RTXA6000",
    "rtx-3090-24gb": "RTX3090", "l4-24gb": "L4", "l40-48gb": "L40", "l40s-48gb": "L40S",
    "rtx-6000-ada-48gb": "RTX6000-Ada", "rtx-4090-24gb": "RTX4090", "rtx-5090-32gb": "RTX5090",
    "h100-pcie-80gb": "H100", "h100-sxm-80gb": "H100", "h100-nvl-94gb": "H100-NVL", "h200-sxm-141gb": "H200",
    "b200-180gb": "B200", "mi300x-192gb": "MI300X",
}
#: catalog GPUs that run ROCm builds (vLLM, PyTorch) rather than CUDA ones
ROCM_GPUS = frozenset({"mi250x-128gb", "mi300x-192gb", "mi325x-256gb"})


def _accelerator(c: Candidate) -> tuple[str, list[str]]:
    """SkyPilot's accelerators value ("H100:8"), and a note when its name is a guess."""
    name = SKYPILOT_ACCELERATORS.get(c.gpu_id)
    if name:
        return f"{name}:{c.gpus_per_server}", []
    guess = re.sub(r"-\d+gb$", "", c.gpu_id).upper()  # SkyPilot's style: H100-NVL, RTX6000-Ada, MI300X
    return f"{guess}:{c.gpus_per_server}", [f"NOTE: gpuplan knows no SkyPilot name for {c.gpu_id}; {guess} is a "
                                             "guess: check it with `sky show-gpus -a`."]


def render_skypilot(p: Project, c: Candidate, s: Shape, index: int) -> str:
    """A SkyPilot task (sky launch) that runs torchrun on every node."""
    acc, warn = _accelerator(c)
    resources: dict[str, Any] = {"accelerators": acc}
    disk = []
    if c.storage_need_bytes > 256e9:  # SkyPilot's default disk is 256 GB
        resources["disk_size"] = int(math.ceil(c.storage_need_bytes / 100e9) * 100)
        disk.append(f"disk_size holds the dataset and the kept checkpoints ({c.storage_need_bytes / 1e9:,.0f} GB as "
                    "planned) on every node; with the data in a bucket (file_mounts) it can shrink.")
    if s.offload != "none":
        resources["memory"] = f"{c.server.ram_bytes // GIB}+"
    if s.servers == 1:
        launch = ["--standalone", "--nnodes=1", "--nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE"]
        head = ""
    else:
        launch = ["--nnodes=$SKYPILOT_NUM_NODES", "--nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE",
                  "--node-rank=$SKYPILOT_NODE_RANK", f"--master-addr=${HEAD}", f"--master-port={PORT}"]
        head = f'{HEAD}=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
    run = (f"export OMP_NUM_THREADS={threads(c)}\n{head}"
           + continued(["torchrun", *launch, s.script, *script_args(p, s)]) + "\n")
    task = {"name": slug(p.name), "resources": resources, "num_nodes": s.servers, "workdir": ".",
            "setup": "pip install -r requirements.txt\n", "run": run}
    header = [origin(p, c, index), layout_line(p, s), server_line(c), *warn,
              f"Edit: workdir (your code, with requirements.txt), setup, and {s.script} and its arguments in run.",
              *script_notes(p, s, index, " in the workdir"), *disk,
              f"Launch: sky launch -c {slug(p.name)} {FILENAMES['skypilot']}"]
    return comment(header) + to_yaml(task)


def render_skyserve(p: Project, c: Candidate, index: int, model_id: str | None) -> str:
    """A SkyServe service (sky serve up) running vLLM with the planned tensor parallelism and replicas."""
    w, lay = p.workload, c.layout
    if (w.engine or "vllm") != "vllm":  # the service runs vLLM; another engine's own command, where it has one
        command = engine_command(w, c, "MODEL_ID")
        raise InputError(["workload", "engine"], f"the SkyServe service runs vLLM; the plan was made for engine "
                         f"{w.engine}" + (f", which runs as: {command}" if command else ""),
                         "engine: vllm (or put that command in the service's run:)")
    tp = lay.tp
    per_server = c.gpus_per_server // tp
    acc, warn = _accelerator(c)
    args = ['"$MODEL_ID"', "--port", "8000", "--tensor-parallel-size", str(tp)]
    if per_server > 1:
        args += ["--data-parallel-size", str(per_server)]
    flags, notes = vllm_engine_flags(w, engine_batch_cap(c), "MODEL_ID")
    args += flags
    if c.gpu_id in ROCM_GPUS:
        notes.append("AMD GPUs: install vLLM's ROCm build (setup) or run from a ROCm vLLM image.")
    task = {"name": slug(p.name), "envs": {"MODEL_ID": model_id},
            "resources": {"accelerators": acc, "ports": 8000},
            "service": {"readiness_probe": "/v1/models", "replicas": c.servers},
            "setup": "pip install vllm\n", "run": "vllm serve " + " ".join(args) + "\n"}
    replicas = lay.replicas if lay.replicas is not None else c.servers * per_server
    cap = engine_batch_cap(c)
    batch = (f"up to {cap} concurrent sequences each" if cap is not None else
             f"about {lay.batch_per_replica} requests in flight each at the planned load, under vLLM's own cap")
    header = [origin(p, c, index),
              f"Serving layout: tensor parallel {tp}, {replicas} replica(s) ({per_server} per server, vLLM data "
              f"parallel), {batch}.",
              server_line(c), *warn,
              "Edit: MODEL_ID (" + ("none known: pass it with --env MODEL_ID=..." if model_id is None else
                                    "the project's model on the Hugging Face Hub; --env MODEL_ID=... overrides it") +
              "); setup (data parallel needs a recent vLLM).", *notes,
              f"Launch: sky serve up -n {slug(p.name)} {FILENAMES['skypilot']}"]
    return comment(header) + to_yaml(task)


__all__ = ["ROCM_GPUS", "SKYPILOT_ACCELERATORS", "render_skypilot", "render_skyserve"]
