"""Launch configurations that realise one candidate of a plan: an Accelerate config, a DeepSpeed config, a
torchrun command line or a SkyPilot task; for the frameworks that take their own config file (issue #30), a
torchtune recipe config, an Axolotl config or a torchtitan job config, written only for candidates timed on them.
Pure: text in, text out; the CLI writes the file.

Every output starts with where it came from (project, candidate, hardware, layout) and what to edit. What a
launcher cannot express is refused with an InputError that says which target can, rather than emitted wrong:
- Accelerate has no pipeline parallelism; it runs tensor parallelism only through FSDP2 (or alone);
- DeepSpeed's pipeline engine takes ZeRO stage 0 or 1 only;
- accelerate, deepspeed and torchrun are training launchers; an inference candidate exports to SkyPilot as a
  SkyServe service running vLLM with the planned tensor parallelism and replicas.

The launchers live in core/export/accelerate.py, deepspeed.py, torchrun.py and skypilot.py, what they share in
core/export/common.py; this module dispatches to them.
"""

from __future__ import annotations

from gpuplan.core.export.accelerate import ACCELERATE_PRECISION, render_accelerate
from gpuplan.core.export.axolotl import render_axolotl
from gpuplan.core.export.common import (
    FILENAMES,
    HEAD,
    PORT,
    POSTTRAIN_TARGETS,
    SERVING_TARGETS,
    STACK_TARGETS,
    TARGETS,
    Target,
    allowed_targets,
    read_shape,
)
from gpuplan.core.export.deepspeed import render_deepspeed
from gpuplan.core.export.helm import render_vllm_helm
from gpuplan.core.export.kubernetes import render_kserve, render_lws
from gpuplan.core.export.posttrain import render_trl, render_verl
from gpuplan.core.export.skypilot import (
    ROCM_GPUS,
    SKYPILOT_ACCELERATORS,
    render_skypilot,
    render_skyserve,
)
from gpuplan.core.export.torchrun import render_torchrun
from gpuplan.core.export.torchtitan import render_torchtitan
from gpuplan.core.export.torchtune import render_torchtune
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project


def export(project: Project, candidate: Candidate, target: str, *, index: int = 0,
           model_id: str | None = None) -> tuple[str, str]:
    """(suggested file name, text) of the `target` launcher for `candidate` (number `index` in the plan).
    `model_id` (a Hugging Face id) names the model a served candidate loads."""
    if target not in TARGETS:
        raise InputError(["--to"], f"unknown target {target!r}", ", ".join(TARGETS))
    grpo = project.workload.task == "grpo" or project.workload.grpo is not None
    if grpo and target not in POSTTRAIN_TARGETS:
        raise InputError(["--to"], f"project {project.name!r} is a GRPO run (workload.task: grpo): its launcher is a "
                         "verl or TRL job with the rollout engine beside the trainer", "trl, verl")
    if target in SERVING_TARGETS:
        render_k8s = {"kserve": render_kserve, "lws": render_lws, "vllm-helm": render_vllm_helm}[target]
        return FILENAMES[target], render_k8s(project, candidate, index, model_id)
    if project.workload.task == "inference":
        if target != "skypilot":
            raise InputError(["--to"], f"project {project.name!r} serves a model (workload.task: inference) and "
                             f"--to {target} writes a training launcher", "skypilot (a SkyServe service running "
                             "vLLM with the planned tensor parallelism and replicas), kserve, lws, vllm-helm")
        return FILENAMES[target], render_skyserve(project, candidate, index, model_id)
    s = read_shape(candidate)
    if target in POSTTRAIN_TARGETS:  # a TRL GRPO/DPO config, verl's GRPO overrides (core/export/posttrain.py)
        return FILENAMES[target], {"trl": render_trl, "verl": render_verl}[target](project, candidate, s, index)
    allowed = allowed_targets(s.framework)
    if target not in allowed:
        stack = candidate.stack.text if candidate.stack is not None else "your own training script"
        launches = (f"writes a {target} config" if target in STACK_TARGETS else
                    "launches the Hugging Face Trainer, Accelerate or DeepSpeed")
        raise InputError(["--to"], f"candidate {index} is planned on {stack}; --to {target} {launches}, which the "
                         "plan did not time", ", ".join(allowed) if allowed else f"none yet for {s.framework}: set "
                         "workload.framework (hf-trainer, deepspeed, torchtune, axolotl, torchtitan) to plan for a "
                         "stack gpuplan exports")
    if target in STACK_TARGETS:
        render_stack = {"torchtune": render_torchtune, "axolotl": render_axolotl, "torchtitan": render_torchtitan}
        return FILENAMES[target], render_stack[target](project, candidate, s, index, model_id)
    render = {"accelerate": render_accelerate, "deepspeed": render_deepspeed, "torchrun": render_torchrun,
              "skypilot": render_skypilot}
    return FILENAMES[target], render[target](project, candidate, s, index)


__all__ = ["ACCELERATE_PRECISION", "FILENAMES", "HEAD", "PORT", "ROCM_GPUS", "SERVING_TARGETS", "SKYPILOT_ACCELERATORS",
           "TARGETS", "Target", "export"]
