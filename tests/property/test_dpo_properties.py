"""Invariants of DPO's memory (issue #31) over random decoders, workloads and layouts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.preference import policy_workload
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import DpoSpec, Layout, LoraSpec, Workload

from .test_memory_properties import OH, TABLE, archs


@st.composite
def dpo_workloads(draw) -> Workload:
    method = draw(st.sampled_from(["full", "lora"]))
    return Workload(
        task="dpo", dpo=DpoSpec(method=method, reference=draw(st.sampled_from(["model", "precomputed"]))),
        lora=LoraSpec(rank=draw(st.sampled_from([8, 64]))) if method == "lora" else None,
        precision=draw(st.sampled_from(["fp32", "bf16-mixed", "bf16"])),
        optimizer=draw(st.sampled_from(["adamw", "adamw-8bit", "sgd"])),
        micro_batch_size=draw(st.integers(1, 8)), sequence_length=draw(st.sampled_from([128, 512, 2048, 8192])),
        gradient_checkpointing=draw(st.booleans()), attention=draw(st.sampled_from(["sdpa", "eager"])),
        loss=draw(st.sampled_from([None, "chunked"])),
    )


layouts = st.sampled_from([(Layout(), 1), (Layout(zero=3), 8), (Layout(zero=2), 4), (Layout(zero=1, tp=2), 4),
                           (Layout(zero=3, offload="params"), 8)])


def peak(arch: ModelArch, w: Workload, lay: Layout, gpus: int) -> int:
    return estimate_memory(arch, count_params(arch), policy_workload(w), lay, gpus, TABLE, OH).peak_tensor_bytes


@settings(max_examples=120, deadline=None)
@given(archs(), dpo_workloads(), layouts, st.sampled_from([2, 4]))
def test_a_longer_sequence_never_needs_less_memory(arch: ModelArch, w: Workload, layout: tuple[Layout, int],
                                                   factor: int) -> None:
    lay, gpus = layout
    longer = w.model_copy(update={"sequence_length": (w.sequence_length or 512) * factor})
    assert peak(arch, longer, lay, gpus) >= peak(arch, w, lay, gpus)


@settings(max_examples=120, deadline=None)
@given(archs(), dpo_workloads(), layouts)
def test_dpo_never_needs_less_than_the_same_sft(arch: ModelArch, w: Workload, layout: tuple[Layout, int]) -> None:
    """The SFT of the same sequences (both of each pair, same method, precision and layout) is a lower bound: DPO
    adds the reference's weights and the loss over log-probabilities, and removes nothing. Except in pure bf16, where
    TRL's loss takes 16-bit log-softmax rows while the SFT's cross-entropy upcasts the logits to fp32 (both traced:
    benchmarks/dpo_trace_cases.py, tests/trace/): there a precomputed-reference DPO may need less."""
    lay, gpus = layout
    assert w.dpo is not None
    if w.precision == "bf16":
        w = w.model_copy(update={"precision": "bf16-mixed"})
    sft = Workload.model_validate({**w.model_dump(exclude={"dpo"}), "task": "full-finetune" if w.dpo.method == "full"
                                   else "lora", "micro_batch_size": 2 * w.micro_batch_size})
    assert peak(arch, w, lay, gpus) >= peak(arch, sft, lay, gpus)


@settings(max_examples=80, deadline=None)
@given(archs(), dpo_workloads(), layouts)
def test_the_reference_is_its_own_part_and_only_where_it_is_held(arch: ModelArch, w: Workload,
                                                                  layout: tuple[Layout, int]) -> None:
    lay, gpus = layout
    m = estimate_memory(arch, count_params(arch), policy_workload(w), lay, gpus, TABLE, OH)
    assert w.dpo is not None
    held = w.dpo.method == "full" and w.dpo.reference == "model" and lay.offload != "params"
    assert (m.breakdown.reference_bytes > 0) == held
    assert m.breakdown.total == m.peak_tensor_bytes
