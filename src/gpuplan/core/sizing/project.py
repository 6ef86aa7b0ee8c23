"""What a project asks of the hardware, before any GPU is chosen: the tokens a training run processes, the
global batch every candidate keeps, and the model and workload as the project's planned growth makes them. Pure."""

from __future__ import annotations

import math

from gpuplan.core.sizing.memory import resolve
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Project, Workload


def grow_arch(arch: ModelArch, scale: float) -> ModelArch:
    """The model grown `scale` times by depth (parameters and activations scale with the layers)."""
    if scale <= 1.0:
        return arch

    def up(n: int) -> int:
        return max(math.ceil(n * scale - 1e-9), n)

    upd: dict[str, int] = {"num_layers": up(arch.num_layers)}
    if arch.num_decoder_layers:
        upd["num_decoder_layers"] = up(arch.num_decoder_layers)
    if arch.moe is not None:
        upd_moe = arch.moe.model_copy(update={"moe_layers": up(arch.moe.moe_layers)})
        return arch.model_copy(update={**upd, "moe": upd_moe})
    return arch.model_copy(update=upd)


def grown_workload(w: Workload, p: Project, arch: ModelArch) -> Workload:
    """`w` with the planned growth of the context (training sequence) and of the concurrent users applied."""
    g = p.growth
    upd: dict[str, object] = {}
    if g.context_scale > 1:
        if w.task == "inference":
            base = w.context_length or w.sequence_length or resolve(arch, w).seq
            upd["context_length"] = math.ceil(base * g.context_scale)
        elif arch.kind not in ("vit", "cnn"):
            upd["sequence_length"] = math.ceil(resolve(arch, w).seq * g.context_scale)
    if g.users_scale > 1 and w.task == "inference":
        upd["batch_size"] = math.ceil(w.batch_size * g.users_scale)
    return w.model_copy(update=upd) if upd else w


def grows(p: Project) -> bool:
    """Whether the planned growth changes the memory of any layout (model, context or users grow)."""
    g = p.growth
    return g.model_scale > 1 or g.context_scale > 1 or (g.users_scale > 1 and p.workload.task == "inference")


def global_batch(p: Project) -> tuple[int, str]:
    """Sequences per optimizer step, the training recipe every candidate keeps."""
    w = p.workload
    if w.global_batch_size:
        return w.global_batch_size, "workload.global_batch_size"
    if p.hardware and p.hardware.gpus > 1:
        return w.micro_batch_size * p.hardware.gpus, "workload.micro_batch_size x hardware.gpus"
    return w.micro_batch_size * 8, "workload.micro_batch_size x 8 (no global_batch_size given: an 8-GPU node's batch)"


def training_tokens(project: Project, tok_sample: int) -> tuple[float | None, str | None]:
    """Tokens (images for CNNs) a training run processes, and how they were derived: workload.tokens, or
    workload.epochs x data.samples x tokens per sample (each sample padded or packed to the sequence)."""
    w, d = project.workload, project.data
    if w.tokens:
        return w.tokens, "workload.tokens"
    if w.epochs and d and d.samples:
        return w.epochs * d.samples * tok_sample, (f"workload.epochs ({w.epochs:g}) x data.samples ({d.samples:,}) "
                                                   f"x {tok_sample} tokens per sample")
    return None, None


__all__ = ["global_batch", "grow_arch", "grown_workload", "grows", "training_tokens"]
