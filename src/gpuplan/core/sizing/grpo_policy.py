"""GRPO's policy as the sizing and the search see it (task grpo; core/sizing/grpo.py sizes and times its rollout):
the workload as the policy trains it, the project's prompts counted as sequences, the note an estimate or a plan
carries, and the check that the model generates text. Only the schema is imported, so that the training sizing
(core/sizing/preference.py, states.py) can read it without importing the serving model. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.params import ParamCount
from gpuplan.errors import InputError
from gpuplan.schema.estimate import Note
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import GrpoSpec, Project, Workload

#: the reference's weights: bf16 (the policy's dtype, as verl and TRL load them)
WEIGHT_BYTES_16BIT = 2

#: the SFT task a GRPO policy trains as, by method
POLICY_TASK = {"full": "full-finetune", "lora": "lora"}


def grpo_spec(w: Workload) -> GrpoSpec | None:
    """The workload's GRPO settings (defaults when the section is left out), None when it is no GRPO."""
    if w.grpo is not None:
        return w.grpo
    return GrpoSpec() if w.task == "grpo" else None


def sequences_per_step(spec: GrpoSpec) -> int:
    """Sequences each step generates and trains on: every prompt's group of responses."""
    return spec.prompts_per_step * spec.group_size


def policy_workload(w: Workload) -> Workload:
    """`w` as the policy trains it: an SFT task over prompts_per_step x group_size sequences of prompt + response
    tokens in one optimizer step, the `grpo` section kept (it marks the view as GRPO's); other tasks unchanged."""
    if w.task != "grpo":
        return w
    spec = grpo_spec(w)
    assert spec is not None
    n = sequences_per_step(spec)
    return w.model_copy(update={"task": POLICY_TASK[spec.method], "grpo": spec,
                                "sequence_length": spec.prompt_length + spec.response_length,
                                "micro_batch_size": min(w.micro_batch_size, n), "global_batch_size": n})


def policy_project(project: Project) -> Project:
    """`project` as the sizing and the search run it: the policy's workload, and data.samples (prompts) counted as
    the sequences generated from them (group_size each)."""
    w = project.workload
    if w.task != "grpo":
        return project
    spec = grpo_spec(w)
    assert spec is not None
    data = project.data
    if data.samples is not None:
        data = data.model_copy(update={"samples": data.samples * spec.group_size})
    return project.model_copy(update={"workload": policy_workload(w), "data": data})


def grpo_notes(w: Workload) -> list[Note]:
    """What an estimate or a plan of a GRPO workload says of how it was sized (none for other tasks)."""
    spec = grpo_spec(w)
    if spec is None:
        return []
    ref = ("frozen 16-bit copy, sharded as the policy" if spec.method == "full" else "the base, adapters off") \
        if spec.kl else "none (kl off)"
    if spec.placement == "separate":
        return [Note(code="grpo", message=f"GRPO (separate pools): {spec.prompts_per_step:,} prompts x "
                     f"{spec.group_size} responses per step, {spec.prompt_length:,} + {spec.response_length:,} tokens; "
                     f"policy trained as {POLICY_TASK[spec.method]} on every sequence (samples, tokens count "
                     f"sequences); reference: {ref}; the vLLM engine on GPUs of its own, the policy's 16-bit weights "
                     "broadcast to it each step")]
    return [Note(code="grpo", message=f"GRPO (colocated): {spec.prompts_per_step:,} prompts x {spec.group_size} "
                 f"responses per step, {spec.prompt_length:,} + {spec.response_length:,} tokens; policy trained as "
                 f"{POLICY_TASK[spec.method]} on every sequence; reference: {ref}; the vLLM engine's weights and KV "
                 "cache held for the rollout, released for the training pass (sleep level 1, as verl)")]


def check_grpo(arch: ModelArch, w: Workload) -> None:
    """InputError when GRPO is asked of a model that generates no text (it samples responses), or with a mean
    response over the longest."""
    if (w.task == "grpo" or w.grpo is not None) and arch.kind != "decoder":
        raise InputError(["workload", "task"], f"grpo samples responses from a language model; {arch.model_type} "
                         f"is not a decoder ({arch.kind})", "pretrain, full-finetune, lora, qlora, inference")
    g = w.grpo
    if g is not None and g.mean_response_length is not None and g.mean_response_length > g.response_length:
        raise InputError(["workload", "grpo", "mean_response_length"], f"the mean response ({g.mean_response_length} "
                         f"tokens) is over grpo.response_length ({g.response_length}), the longest a response runs to",
                         f"1 to {g.response_length}")


def reference_bytes(p: ParamCount, spec: GrpoSpec) -> float:
    """The frozen reference's weights, whole (0: kl off, or LoRA, whose reference is the base with adapters off)."""
    return float(p.total * WEIGHT_BYTES_16BIT) if spec.kl and spec.method == "full" else 0.0


__all__ = ["POLICY_TASK", "WEIGHT_BYTES_16BIT", "check_grpo", "grpo_notes", "grpo_spec", "policy_project",
           "policy_workload", "reference_bytes", "sequences_per_step"]
