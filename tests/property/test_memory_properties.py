"""Invariants of the memory estimator over random (realistic) architectures and workloads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog.loader import load_activation_table, load_overheads
from gpuplan.core.sizing.layout_memory import Allocator
from gpuplan.core.sizing.levels import _levels
from gpuplan.core.sizing.memory import MemoryCache, estimate_memory, layout_memory, resolve
from gpuplan.core.sizing.params import count_params
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload

TABLE, OH = load_activation_table(), load_overheads()
ALLOC = Allocator.of(OH)
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "gpt_neox", "stablelm"]


@st.composite
def archs(draw) -> ModelArch:
    heads = draw(st.sampled_from([8, 16, 32, 64]))
    kv = draw(st.sampled_from([k for k in (1, 2, 4, 8, heads) if heads % k == 0]))
    head_dim = draw(st.sampled_from([64, 128]))
    return ModelArch(
        model_type=draw(st.sampled_from(FAMILIES)), kind="decoder", hidden_size=heads * head_dim,
        num_layers=draw(st.integers(2, 96)), num_heads=heads, num_kv_heads=kv, head_dim=head_dim,
        intermediate_size=draw(st.integers(1, 8)) * heads * head_dim, vocab_size=draw(st.integers(1000, 260000)),
        tie_word_embeddings=draw(st.booleans()),
    )


@st.composite
def workloads(draw) -> Workload:
    task = draw(st.sampled_from(["pretrain", "full-finetune", "lora", "qlora", "inference"]))
    precision = draw(st.sampled_from(["fp32", "bf16-mixed", "bf16"]))
    training = task != "inference"
    features = {} if not training else {  # the stack features of issue 15 (training only)
        "loss": draw(st.sampled_from([None, "standard", "chunked"])), "compile": draw(st.sampled_from([None, True])),
        "activation_offload": draw(st.sampled_from([None, True])), "framework": draw(st.sampled_from([None, "litgpt"])),
        "optimizer_in_backward": draw(st.sampled_from([None, True]))}
    return Workload(
        **features,
        task=task, precision=precision,
        optimizer=draw(st.sampled_from(["adamw", "adamw-8bit", "paged-adamw-8bit", "sgd", "adafactor"])),
        micro_batch_size=draw(st.integers(1, 16)), sequence_length=draw(st.sampled_from([128, 512, 2048, 8192])),
        gradient_checkpointing=draw(st.booleans()), attention=draw(st.sampled_from(["sdpa", "eager"])),
        optimizer_implementation=draw(st.sampled_from(["fused", "foreach", "for-loop"])),
        batch_size=draw(st.integers(1, 64)), context_length=draw(st.sampled_from([512, 4096, 32768])),
        weights_dtype=draw(st.sampled_from(["bf16", "fp8", "int4"])),
    )


def peak(arch: ModelArch, w: Workload, lay: Layout = Layout(), gpus: int = 1) -> int:
    return estimate_memory(arch, count_params(arch), w, lay, gpus, TABLE, OH).peak_tensor_bytes


@settings(max_examples=150, deadline=None)
@given(archs(), workloads())
def test_parts_sum_to_the_peak_and_levels_are_ordered(arch: ModelArch, w: Workload) -> None:
    m = estimate_memory(arch, count_params(arch), w, Layout(), 1, TABLE, OH)
    assert m.breakdown.total == m.peak_tensor_bytes
    assert all(v >= 0 for v in m.breakdown.model_dump().values())
    assert m.peak_tensor_bytes <= m.reserved_bytes < m.device_bytes
    assert max(m.phase_peaks_bytes.values()) == m.peak_tensor_bytes
    assert m.breakdown.weights_bytes <= m.load_peak_bytes < m.load_device_bytes
    if w.task != "inference":  # the search's fast path gives the same device total, byte for byte
        r = resolve(arch, w)
        mem = layout_memory(arch, count_params(arch), w, Layout(), 1, TABLE, ALLOC)
        assert mem.device_bytes(r.batch, 1) == m.device_bytes


@settings(max_examples=200, deadline=None)
@given(archs(), workloads(), st.sampled_from([(0, 1, 1), (1, 2, 1), (2, 1, 2), (3, 4, 1), (3, 2, 4), (0, 8, 2)]),
       st.sampled_from([1, 2, 8, 16, 64]), st.integers(1, 32), st.integers(1, 16))
def test_the_search_fast_path_equals_the_phases_byte_for_byte(arch: ModelArch, w: Workload,
                                                              layout: tuple[int, int, int], gpus: int, batch: int,
                                                              microbatches: int) -> None:
    """LayoutMemory.device_bytes (the search's arithmetic, written out) gives what the estimate's phases give
    through _levels, on any layout, micro-batch and gradient accumulation, and kernels built from a shared cache (as
    the search shares it between layouts) equal kernels built alone."""
    if w.task == "inference":
        return
    zero, tp, pp = layout
    if gpus % (tp * pp):
        gpus = tp * pp
    lay = Layout(zero=zero, tp=tp, pp=pp)
    p = count_params(arch)
    shared = MemoryCache()
    # fill the cache from other layouts first: among them the same stage with tp and pp swapped and on twice the
    # GPUs, which the cache may answer from the same entry (a layout's states depend on tp x pp, and on dp only
    # where ZeRO shards by it)
    for other, n in ((Layout(), max(gpus, tp)), (Layout(zero=3, tp=tp), max(gpus, tp)),
                     (Layout(zero=zero, tp=pp, pp=tp), gpus), (lay, 2 * gpus)):
        layout_memory(arch, p, w, other, n, TABLE, ALLOC, shared)
    alone = layout_memory(arch, p, w, lay, gpus, TABLE, ALLOC)
    cached = layout_memory(arch, p, w, lay, gpus, TABLE, ALLOC, shared)
    want = _levels(alone.phases(batch, microbatches), 0.0, OH, gpus, lay, True)[5]
    assert alone.device_bytes(batch, microbatches) == want
    assert cached.device_bytes(batch, microbatches) == want
    assert cached.phases(batch, microbatches) == alone.phases(batch, microbatches)
    assert cached.notes == alone.notes
    assert cached.device_bytes_of([(batch, microbatches), (1, 1)]) == [want, alone.device_bytes(1, 1)]


@settings(max_examples=100, deadline=None)
@given(archs(), workloads())
def test_memory_saving_features_never_cost_memory(arch: ModelArch, w: Workload) -> None:
    if w.task == "inference":
        return
    for key, on, off in (("loss", "chunked", "standard"), ("activation_offload", True, False),
                         ("optimizer_in_backward", True, False), ("compile", True, False)):
        assert peak(arch, w.model_copy(update={key: on})) <= peak(arch, w.model_copy(update={key: off})), key
    if w.optimizer == "adamw-8bit":
        assert peak(arch, w.model_copy(update={"optimizer": "paged-adamw-8bit"})) <= peak(arch, w)


@settings(max_examples=150, deadline=None)
@given(archs(), workloads(), st.integers(1, 4))
def test_more_parameters_never_need_less_memory(arch: ModelArch, w: Workload, extra_layers: int) -> None:
    bigger = arch.model_copy(update={"num_layers": arch.num_layers + extra_layers})
    wider = arch.model_copy(update={"intermediate_size": arch.intermediate_size + 256})
    assert peak(bigger, w) >= peak(arch, w)
    assert peak(wider, w) >= peak(arch, w)


@settings(max_examples=150, deadline=None)
@given(archs(), workloads())
def test_longer_sequences_and_bigger_batches_never_need_less(arch: ModelArch, w: Workload) -> None:
    longer = w.model_copy(update={"sequence_length": (w.sequence_length or 512) * 2,
                                  "context_length": (w.context_length or 512) * 2})
    bigger = w.model_copy(update={"micro_batch_size": w.micro_batch_size + 1, "batch_size": w.batch_size + 1})
    assert peak(arch, longer) >= peak(arch, w)
    assert peak(arch, bigger) >= peak(arch, w)


@settings(max_examples=150, deadline=None)
@given(archs(), workloads(), st.sampled_from([1, 2, 3]), st.sampled_from([2, 4, 8, 16]))
def test_zero_on_more_gpus_never_needs_more_per_gpu(arch: ModelArch, w: Workload, zero: int, gpus: int) -> None:
    if w.task == "inference":
        return
    lay = Layout(zero=zero)
    assert peak(arch, w, lay, gpus * 2) <= peak(arch, w, lay, gpus)
    if zero < 3:  # ZeRO-3 gathers whole layers, which can outweigh its saving on a model of few layers
        assert peak(arch, w, lay, gpus) <= peak(arch, w, Layout(zero=zero - 1), gpus)


@settings(max_examples=100, deadline=None)
@given(archs(), workloads(), st.sampled_from([2, 4, 8]))
def test_tensor_parallel_splits_the_model(arch: ModelArch, w: Workload, tp: int) -> None:
    assert peak(arch, w, Layout(tp=tp), tp) < peak(arch, w, Layout(), 1)


@settings(max_examples=100, deadline=None)
@given(archs(), workloads())
def test_checkpointing_and_offload_never_cost_memory(arch: ModelArch, w: Workload) -> None:
    if w.task == "inference":
        return
    on = w.model_copy(update={"gradient_checkpointing": True})
    off = w.model_copy(update={"gradient_checkpointing": False})
    assert peak(arch, on) <= peak(arch, off)
    assert peak(arch, w, Layout(zero=3, offload="params"), 8) <= peak(arch, w, Layout(zero=3), 8)
    assert peak(arch, w, Layout(zero=1, offload="optimizer"), 8) <= peak(arch, w, Layout(zero=1), 8)
