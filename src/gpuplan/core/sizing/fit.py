"""The inverse question: on this hardware, how large may the micro-batch, the sequence (or context) and the
model be? Bisection over the memory estimator, with and without gradient checkpointing. Pure."""

from __future__ import annotations

from collections.abc import Callable

from gpuplan.core.sizing.engine_memory import estimate_serving_memory, one_request
from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.preference import check_dpo, limits_in_pairs
from gpuplan.core.sizing.project import grow_arch
from gpuplan.errors import InputError
from gpuplan.schema.estimate import ActivationTable, Overheads
from gpuplan.schema.fit import FitLimit
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import EngineDefaults

MAX_BATCH = 1 << 16
MAX_TOKENS = 1 << 22  # 4M tokens


def _largest_int(fits: Callable[[int], bool], hi: int) -> int | None:
    """The largest k in [1, hi] with fits(k), assuming fits is monotone (True then False)."""
    if not fits(1):
        return None
    lo = 1
    k = 2
    while k <= hi and fits(k):
        lo, k = k, k * 2
    hi = min(k, hi + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def fit_limits(arch: ModelArch, w: Workload, lay: Layout, gpus: int, usable: int, table: ActivationTable,
               oh: Overheads, engine: EngineDefaults | None = None,
               gpu_bytes: int | None = None) -> list[FitLimit]:
    """Serving with `engine` (data/serving.toml): memory as the engine allocates it (KV blocks of prompt and output,
    the prefill workspace at its token budget, CUDA graphs); `usable` is then the engine's share of the GPU. The
    largest batch_size is then the requests its KV cache holds at once; the largest context and model are those
    the engine starts with (one request: it queues what its KV cache cannot hold)."""
    check_dpo(arch, w)
    if w.grpo is not None:  # its limits are the rollout's (group, prompts, lengths), which fit does not search yet
        raise InputError(["workload", "task"], "fit searches a training step's micro-batch, sequence and model; a "
                         "GRPO step's memory is set by its rollout (grpo.group_size, prompts_per_step, "
                         "response_length), which fit does not search yet: try them with gpuplan estimate",
                         "pretrain, full-finetune, lora, qlora, inference, dpo")
    training = w.task != "inference"
    out: list[FitLimit] = []
    mem_gpus = gpus if training else lay.tp * lay.pp

    def dev(a: ModelArch, ww: Workload) -> int:
        if engine is not None and not training:
            return estimate_serving_memory(a, count_params(a), ww, lay, mem_gpus, oh, engine, gpu_bytes).device_bytes
        return estimate_memory(a, count_params(a), ww, lay, mem_gpus, table, oh).device_bytes

    for ckpt in ((False, True) if training and arch.kind != "cnn" else (None,)):
        base = w.model_copy(update={"gradient_checkpointing": bool(ckpt)}) if training else w
        # the global batch stays a multiple of the micro-batch: drop it while searching the micro-batch
        setting = "micro_batch_size" if training else "batch_size"

        def fits_batch(k: int, base: Workload = base, setting: str = setting) -> bool:
            return dev(arch, base.model_copy(update={setting: k, "global_batch_size": None})) <= usable

        best = _largest_int(fits_batch, MAX_BATCH)
        out.append(FitLimit(setting=setting, gradient_checkpointing=ckpt, largest=best))
        if engine is not None and not training:
            base = one_request(base)
        if arch.kind not in ("vit", "cnn"):
            key = "sequence_length" if training else "context_length"

            def fits_tokens(k: int, base: Workload = base, key: str = key) -> bool:
                return dev(arch, base.model_copy(update={key: k})) <= usable

            best = _largest_int(fits_tokens, MAX_TOKENS)
            note = None
            if best and arch.max_position_embeddings and best > arch.max_position_embeddings:
                note = (f"beyond the model's {arch.max_position_embeddings:,} positions: memory allows it, the "
                        "model needs context extension (RoPE scaling) to use it")
            out.append(FitLimit(setting=key, gradient_checkpointing=ckpt, largest=best, note=note))
        # model scale: depth multiplier in steps of 1/num_layers (one layer at a time)
        layers = arch.num_layers

        def fits_layers(k: int, layers: int = layers, base: Workload = base) -> bool:
            return dev(grow_arch(arch, k / layers) if k >= layers else arch.model_copy(
                update={"num_layers": k}), base) <= usable

        best_layers = _largest_int(fits_layers, layers * 64)
        if best_layers is None:
            out.append(FitLimit(setting="model_scale", gradient_checkpointing=ckpt, largest=None,
                                note="not even one layer fits"))
        else:
            grown = grow_arch(arch, best_layers / layers) if best_layers >= layers else \
                arch.model_copy(update={"num_layers": best_layers})
            out.append(FitLimit(setting="model_scale", gradient_checkpointing=ckpt, largest=best_layers / layers,
                                parameters=count_params(grown).total, device_bytes_at_largest=dev(grown, base),
                                note=f"{best_layers} layers of the model's width (it has {layers})"))
    return limits_in_pairs(out, w)


__all__ = ["fit_limits"]
