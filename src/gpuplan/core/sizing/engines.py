"""The inference engine a project runs (workload.engine): vLLM's defaults (data/serving.toml [[param]]) with what
the chosen engine sets differently ([[engine]] rows), or a clear refusal. Every serving path (estimate, fit, plan)
takes its engine facts from `serving_for`, so the engine's memory and scheduling semantics follow the project.
Pure."""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.schema.project import Workload
from gpuplan.schema.serving import EngineDefaults, ServingData

#: the engines workload.engine names, vLLM first (the default)
ENGINES = ("vllm", "sglang", "tensorrt-llm", "transformers")
#: generate() has no cap on the requests it runs at once: the batch it is given (the memory bounds it)
GENERATE_MAX_SEQS = 10**6


def engine_defaults(serving: ServingData, name: str | None) -> EngineDefaults:
    """The defaults of engine `name` (None: vLLM's): vLLM's with the engine's [[engine]] row applied. InputError
    when the engine is unknown or refused (its facts sourced, its memory semantics not yet modelled)."""
    if name is None or name == "vllm":
        return serving.engine
    row = serving.engines.get(name)
    if row is None:
        raise InputError(["workload", "engine"], f"no engine {name!r} in data/serving.toml", ", ".join(ENGINES))
    if row.refused:
        raise InputError(["workload", "engine"], f"engine {name} is not modelled yet: {row.refused} "
                         f"(source: {row.source})", "vllm, sglang, tensorrt-llm, transformers")
    changes = {k: getattr(row, k) for k in type(row).model_fields
               if k not in ("id", "refused", "source", "as_of") and getattr(row, k) is not None}
    return serving.engine.model_copy(update={**changes, "id": name})


def serving_for(serving: ServingData, w: Workload) -> ServingData:
    """`serving` with the project's engine in place of vLLM's (the same object for vLLM); InputError when the
    engine is refused or the workload asks it what it does not do."""
    if w.engine is None or w.engine == "vllm":
        return serving
    engine = engine_defaults(serving, w.engine)
    if not engine.paged:
        check_generate(w)
    return serving.model_copy(update={"engine": engine})


def check_generate(w: Workload) -> None:
    """Hugging Face generate() runs the batch it is given: the whole batch prefilled in one forward pass, then
    decoded together. It has no token budget and no stream of arriving requests."""
    if w.prefill_tokens is not None:
        raise InputError(["workload", "prefill_tokens"], "engine transformers (Hugging Face generate()) prefills the "
                         "whole batch in one forward pass; it has no token budget per step",
                         "drop prefill_tokens, or engine: vllm")
    for key in ("arrival_rate", "users"):
        if getattr(w, key) is not None:
            raise InputError(["workload", key], "engine transformers (Hugging Face generate()) runs a fixed batch, "
                             "not requests as they arrive", "batch_size (the batch generate() runs), or engine: vllm")


__all__ = ["ENGINES", "GENERATE_MAX_SEQS", "check_generate", "engine_defaults", "serving_for"]
