"""Preference tuning (task dpo) as the sizing sees it: the policy trains as a fine-tune (full or LoRA) on the chosen
and rejected sequences of each pair run together, and a frozen reference scores the same sequences without grad.

TRL's DPOTrainer (huggingface/trl@f2cd577, 2026-07-24, trl/trainer/dpo_trainer.py: its collator concatenates the
chosen and rejected completions, `_compute_loss`) runs them in one forward of twice the micro-batch; the reference's
log-probabilities come from a frozen copy of the model (`ref_model`, prepared with the policy's DeepSpeed or FSDP
config: sharded by ZeRO-3/FSDP), from the policy with its adapters disabled when it is a PEFT model and no
reference is given (`use_adapter`), or from a pass over the data before training (`precompute_ref_log_probs`;
then no reference model is kept). So:

* `policy_workload`: the workload as the policy trains it, an SFT task (`full-finetune` or `lora`) on 2 x the
  micro-batch and the global batch, with the `dpo` section kept so the states add the reference
  (core/sizing/states.py) and the FLOPs its forward (core/sizing/flops.py);
* `reference_weight_bytes`: the reference's 16-bit weights, before any layout divides them (0 with LoRA or a
  precomputed reference);
* `reference_forward`: whether each step runs the reference's forward (2 x params FLOPs per token; with LoRA too:
  the base without adapters is run).

Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpuplan.core.sizing.grpo_policy import grpo_notes
from gpuplan.core.sizing.grpo_policy import policy_project as grpo_policy
from gpuplan.core.sizing.grpo_policy import reference_bytes as grpo_reference_bytes
from gpuplan.core.sizing.params import ParamCount
from gpuplan.errors import InputError
from gpuplan.schema.estimate import Note
from gpuplan.schema.fit import FitLimit
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import Candidate, PlanResult
from gpuplan.schema.project import DpoSpec, Project, Workload

T = TypeVar("T")

#: the SFT task a DPO policy trains as, by method
POLICY_TASK = {"full": "full-finetune", "lora": "lora"}
#: the reference's weights: bf16, as TRL loads it (the policy's dtype, no master copy)
REFERENCE_BYTES_PER_PARAM = 2
#: sequences per preference pair: the chosen and the rejected response, each with its prompt
SEQUENCES_PER_PAIR = 2


def dpo_spec(w: Workload) -> DpoSpec | None:
    """The workload's DPO settings (defaults when the section is left out), None when it is no DPO."""
    if w.dpo is not None:
        return w.dpo
    return DpoSpec() if w.task == "dpo" else None


def policy_workload(w: Workload) -> Workload:
    """`w` as the policy trains it (an SFT task on both sequences of each pair); other tasks unchanged."""
    if w.task != "dpo":
        return w
    spec = dpo_spec(w)
    assert spec is not None
    gbs = w.global_batch_size * SEQUENCES_PER_PAIR if w.global_batch_size else None
    return w.model_copy(update={"task": POLICY_TASK[spec.method], "dpo": spec,
                                "micro_batch_size": w.micro_batch_size * SEQUENCES_PER_PAIR,
                                "global_batch_size": gbs})


def policy_project(project: Project) -> Project:
    """`project` as the sizing and the search run it: the policy's workload, and the pairs of `data.samples`
    counted as sequences (both run through the policy); a GRPO project's (core/sizing/grpo.py)."""
    w = project.workload
    if w.task == "grpo":
        return grpo_policy(project)
    if w.task != "dpo":
        return project
    data = project.data
    if data.samples is not None:
        data = data.model_copy(update={"samples": data.samples * SEQUENCES_PER_PAIR})
    return project.model_copy(update={"workload": policy_workload(w), "data": data})


def dpo_notes(w: Workload) -> list[Note]:
    """What an estimate or a plan of a DPO workload says of how it was sized (none for other tasks)."""
    spec = dpo_spec(w)
    if spec is None:
        return []
    ref = {"model": "frozen 16-bit copy, sharded" if spec.method == "full"
           else "the base, adapters off", "precomputed": "precomputed"}[spec.reference]
    run = ", forward each step (+2 x params FLOPs/token)" if spec.reference == "model" else ""
    return [Note(code="dpo", message=f"DPO: policy trained as {POLICY_TASK[spec.method]} on both sequences of each "
                 f"pair (samples, tokens count sequences); reference: {ref}{run}")]


def check_dpo(arch: ModelArch, w: Workload) -> None:
    """InputError when DPO is asked of a model without a language-model head (it scores responses' tokens)."""
    if (w.task == "dpo" or w.dpo is not None) and arch.kind not in ("decoder",):
        raise InputError(["workload", "task"], f"dpo tunes a language model on the log-probabilities of its "
                         f"responses; {arch.model_type} is not a decoder ({arch.kind})",
                         "pretrain, full-finetune, lora, qlora, inference")


def policy_noted(project: Project, base_dir: T, notes: list[Note]) -> tuple[Project, T, list[Note]]:
    """The API's project as every step reads it (`policy_project`), with the DPO or GRPO note after `notes`."""
    w = project.workload
    return policy_project(project), base_dir, [*notes, *dpo_notes(w), *grpo_notes(w)]


def as_training(policy: Project, apply: Callable[[Project], tuple[Project, list[Note]]]) -> tuple[Project, list[Note]]:
    """`apply` (a framework's defaults: catalog/frameworks.with_framework) run on a DPO policy's view as on the
    plain training it is, the `dpo` section set aside meanwhile and put back (it marks the view as DPO's)."""
    spec, grpo = policy.workload.dpo, policy.workload.grpo
    if spec is None and grpo is None:
        return apply(policy)
    bare = policy.model_copy(update={"workload": policy.workload.model_copy(update={"dpo": None, "grpo": None})})
    done, notes = apply(bare)
    return done.model_copy(update={"workload": done.workload.model_copy(update={"dpo": spec, "grpo": grpo})}), notes


def in_pairs(result: PlanResult, w: Workload) -> PlanResult:
    """A plan of a DPO policy's view (`w`) with its candidates' batches counted in pairs again, as the project counts
    them (the search ran sequences: 2 per pair); any other plan as it is."""
    if w.dpo is None:
        return result

    def layout(c: Candidate) -> Candidate:
        lay = c.layout
        mb = lay.micro_batch_size // SEQUENCES_PER_PAIR if lay.micro_batch_size else lay.micro_batch_size
        gbs = lay.global_batch_size // SEQUENCES_PER_PAIR if lay.global_batch_size else lay.global_batch_size
        return c.model_copy(update={"layout": lay.model_copy(update={"micro_batch_size": mb,
                                                                     "global_batch_size": gbs})})

    rec = result.recommendation
    return result.model_copy(update={"recommendation": layout(rec) if rec is not None else None,
                                     "candidates": [layout(c) for c in result.candidates]})


def limits_in_pairs(limits: list[FitLimit], w: Workload) -> list[FitLimit]:
    """`fit`'s limits of a DPO policy's view (`w`) with the largest micro-batch in pairs, as the project counts it;
    any other workload's as they are."""
    if w.dpo is None:
        return limits
    return [lim.model_copy(update={"largest": int(lim.largest) // SEQUENCES_PER_PAIR})
            if lim.setting == "micro_batch_size" and lim.largest is not None else lim for lim in limits]


def reference_weight_bytes(p: ParamCount, w: Workload) -> float:
    """The frozen reference's weights, whole (0: none held: LoRA, a precomputed reference, GRPO with kl off, neither
    DPO nor GRPO). GRPO's is held through both phases (core/sizing/grpo.py)."""
    if w.grpo is not None:
        return grpo_reference_bytes(p, w.grpo)
    spec = w.dpo if w.task != "dpo" else dpo_spec(w)
    if spec is None or spec.method != "full" or spec.reference != "model":
        return 0.0
    return float(p.total * REFERENCE_BYTES_PER_PARAM)


def reference_forward(w: Workload) -> bool:
    """Whether each step runs the reference's forward pass (the frozen copy, or the base with adapters off)."""
    spec = w.dpo if w.task != "dpo" else dpo_spec(w)
    return spec is not None and spec.reference == "model"


__all__ = ["POLICY_TASK", "REFERENCE_BYTES_PER_PARAM", "SEQUENCES_PER_PAIR", "check_dpo", "dpo_notes", "dpo_spec",
           "in_pairs", "limits_in_pairs", "policy_noted", "policy_project", "policy_workload", "reference_forward",
           "reference_weight_bytes"]
