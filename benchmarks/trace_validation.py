"""Estimate vs exact trace: the same step described once, estimated analytically and traced under
FakeTensorMode (the `trace` extra). Used by tests/trace/test_estimate_vs_trace.py and
benchmarks/trace_accuracy.py, which put benchmarks/ on the import path."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_activation_table, load_overheads
from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.params import count_params
from gpuplan.schema.project import Layout, LoraSpec, Workload


class Case(BaseModel):
    """One traced configuration: a config.json and the workload settings the tracer understands."""

    model_config = ConfigDict(frozen=True)

    name: str
    config: dict[str, Any]
    task: str = "full-finetune"
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    micro_batch_size: int = 1
    sequence_length: int = 512
    gradient_checkpointing: bool = False
    attention: str = "sdpa"
    lora_rank: int = 8
    lora_targets: list[str] | None = None
    batch_size: int = 1
    context_length: int = 512
    weights_dtype: str = "bf16"
    image_size: int | None = None
    #: standard | chunked (the tracer's torchtune-style chunked cross-entropy)
    loss: str = "standard"
    #: inference: the engine the estimate follows (None: estimate_memory's prefill as the tracer runs it;
    #: "transformers": the serving estimate of `workload.engine: transformers`, what `gpuplan estimate` reports for
    #: Hugging Face generate(), with one output token: the prefill the tracer runs)
    engine: str | None = None


class Comparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    estimate_bytes: int
    trace_bytes: int
    estimate_phase: str
    trace_phases: dict[str, int]
    estimate_phases: dict[str, int]
    seconds: float

    @property
    def error(self) -> float:
        return (self.estimate_bytes - self.trace_bytes) / self.trace_bytes


def workload_of(case: Case) -> Workload:
    """The project workload the tracer's regime corresponds to (torch.optim foreach, as the tracer runs)."""
    lora = None
    if case.task == "lora":
        lora = LoraSpec(rank=case.lora_rank, alpha=2 * case.lora_rank, targets=case.lora_targets or ["all-linear"])
    return Workload(
        task=case.task, precision=case.precision, optimizer=case.optimizer, optimizer_implementation="foreach",
        micro_batch_size=case.micro_batch_size, sequence_length=case.sequence_length,
        gradient_checkpointing=case.gradient_checkpointing, attention=case.attention, lora=lora,
        batch_size=case.batch_size, context_length=case.context_length, weights_dtype=case.weights_dtype,
        image_size=case.image_size, loss=None if case.loss == "standard" else case.loss,
    )


def estimate_case(case: Case):
    arch = arch_from_hf_config(case.config)
    if case.engine is not None:
        from gpuplan.catalog.serving import load_serving
        from gpuplan.core.sizing.engine_memory import estimate_serving_memory
        from gpuplan.core.sizing.engines import serving_for

        w = workload_of(case).model_copy(update={"engine": case.engine, "output_tokens": 1})
        return estimate_serving_memory(arch, count_params(arch), w, Layout(), 1, load_overheads(),
                                       serving_for(load_serving(), w).engine)
    return estimate_memory(arch, count_params(arch), workload_of(case), Layout(), 1, load_activation_table(),
                           load_overheads())


def trace_case(case: Case):
    from gpuplan.trace import TraceSpec, trace_memory

    return trace_memory(TraceSpec(
        config=case.config, task=case.task, precision=case.precision, optimizer=case.optimizer,
        micro_batch_size=case.micro_batch_size, sequence_length=case.sequence_length,
        gradient_checkpointing=case.gradient_checkpointing, attention=case.attention, lora_rank=case.lora_rank,
        lora_alpha=2.0 * case.lora_rank, lora_targets=case.lora_targets or all_linear_names(case.config),
        batch_size=case.batch_size, context_length=case.context_length, weights_dtype=case.weights_dtype,
        image_size=case.image_size, loss=case.loss,
    ))


def all_linear_names(config: dict[str, Any]) -> list[str]:
    """The module names "all-linear" covers in the blocks, as PEFT target_modules (heads excluded)."""
    from gpuplan.core.sizing.lora import block_linears

    arch = arch_from_hf_config(config)
    return sorted({name for name, *_ in block_linears(arch) if name not in ("classifier", "out_proj", "gate")})


def compare(case: Case) -> Comparison:
    est = estimate_case(case)
    tr = trace_case(case)
    return Comparison(name=case.name, estimate_bytes=est.peak_tensor_bytes, trace_bytes=tr.peak_bytes,
                      estimate_phase=est.peak_phase, trace_phases=tr.phase_peaks,
                      estimate_phases=est.phase_peaks_bytes, seconds=tr.seconds)
