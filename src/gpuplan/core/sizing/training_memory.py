"""Peak memory per GPU of a training step: weights, gradients and optimizer states by precision, optimizer,
LoRA/QLoRA and sharding (ZeRO-1/2/3 = FSDP, tensor and pipeline parallel, CPU offload); the activations saved for
backward (core/sizing/activations.py), the LM head's logits and loss, with gradient checkpointing the layer inputs
plus one layer recomputed; the peak is the largest of the phases of a step, with the parts taken at that moment.

The parts are computed once per layout (`layout_memory`) and kept in a `MemoryCache` for one model and workload: what
depends on neither the GPU count nor the ZeRO stage (the model states before sharding, the activations per token,
the head's terms) and what a layout's states are whatever the recomputation (`layout_states`). The arithmetic over
them is core/sizing/layout_memory.LayoutMemory's. Pure."""

from __future__ import annotations

from typing import NamedTuple

from gpuplan.core.sizing.activations import (
    Resolved,
    coefficients,
    compute_bytes,
    dropout_mask_bytes_per_token,
    fit_max_seq,
    layers_tokens,
    per_token,
    regime_of,
    residual_bytes,
    resolve,
)
from gpuplan.core.sizing.head_memory import Head, head_bytes, head_terms
from gpuplan.core.sizing.layout_memory import (
    PHASES,
    Allocator,
    AmpCasts,
    LayerGroup,
    LayoutMemory,
    PerSequence,
    TpTerms,
)
from gpuplan.core.sizing.levels import finish, reserve_and_device
from gpuplan.core.sizing.params import ParamCount, cnn_feature_elements
from gpuplan.core.sizing.stack import QloraImpl, fused_activation_saving, load_peak_bytes, qlora_impl, qlora_terms
from gpuplan.core.sizing.states import LayoutStates, States, layout_states, trainable_adapters, unsharded_states
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, LoraSpec, Workload


class ModelTerms:
    """A workload's settings resolved on the model, and the model's states before any layout divides them."""

    __slots__ = ("resolved", "states")

    def __init__(self, resolved: Resolved, states: States) -> None:
        self.resolved = resolved
        self.states = states


class StatesKey(NamedTuple):
    """What a layout's states (`layout_states`) depend on: the model-parallel product, the ZeRO stage and the
    offload; dp where ZeRO shards by it (else only whether DDP keeps buckets: 0 or 1); tp where ZeRO-3 gathers a
    block (else 0)."""

    zero: int
    mp: int
    offload: str
    dp: int
    tp: int


class MemoryCache(dict[tuple[object, ...], object]):
    """The parts of a training step's memory shared by the layouts of one model, workload and 4-bit implementation
    (workloads that differ in micro-batch, global batch or recomputation alone may share it), typed, by named keys. A
    dict only so that candidate.Context.terms_cache, typed as one, holds the search's: nothing is stored as an item."""

    __slots__ = ("amp", "model_terms", "qlora", "states", "tp")

    def __init__(self, qlora: QloraImpl | None = None) -> None:
        super().__init__()
        self.qlora = qlora
        self.model_terms: ModelTerms | None = None
        self.states: dict[StatesKey, LayoutStates] = {}
        #: by recomputation, then tensor-parallel degree
        self.tp: dict[bool, dict[int, TpTerms]] = {False: {}, True: {}}
        #: by recomputation, then what divides autocast's copies (tp x pp, and dp under ZeRO-3)
        self.amp: dict[bool, dict[int, AmpCasts]] = {False: {}, True: {}}

    def model(self, arch: ModelArch, p: ParamCount, w: Workload) -> ModelTerms:
        """The workload resolved on the model and the model's states before any layout divides them."""
        if self.model_terms is None:
            self.model_terms = ModelTerms(resolve(arch, w),
                                          unsharded_states(arch, p, w, trainable_adapters(arch, w), self.qlora))
        return self.model_terms

    def layout_states(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int) -> LayoutStates:
        """`layout_states` of `lay` with `dp` data-parallel ranks (what does not depend on recomputation)."""
        zero = lay.zero
        key = StatesKey(zero, lay.tp * lay.pp, lay.offload, dp if zero else int(dp > 1), lay.tp if zero >= 3 else 0)
        hit = self.states.get(key)
        if hit is None:
            hit = self.states[key] = layout_states(arch, p, w, lay, dp, self.model(arch, p, w).states)
        return hit

    def tp_terms(self, arch: ModelArch, p: ParamCount, w: Workload, tp: int, table: ActivationTable) -> TpTerms:
        """`tp_terms` of `w`'s recomputation choice on `tp`-way tensor parallel GPUs."""
        by_tp = self.tp[w.gradient_checkpointing]
        hit = by_tp.get(tp)
        if hit is None:
            hit = by_tp[tp] = tp_terms(arch, p, w, self.model(arch, p, w).resolved, tp, table, self.qlora)
        return hit

    def amp_casts(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int) -> AmpCasts:
        """`amp_casts` of `w`'s recomputation choice on `lay` with `dp` data-parallel ranks."""
        by_shard = self.amp[w.gradient_checkpointing]
        shard = lay.tp * lay.pp * (dp if lay.zero >= 3 else 1)
        hit = by_shard.get(shard)
        if hit is None:
            hit = by_shard[shard] = amp_casts(arch, p, w, lay, dp)
        return hit


def layout_memory(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, table: ActivationTable,
                  alloc: Allocator, cache: MemoryCache | None = None, qlora: QloraImpl | None = None) -> LayoutMemory:
    """The memory kernel of `w` on `gpus` GPUs laid out as `lay` (`w.micro_batch_size` and `w.global_batch_size` are
    not read: `LayoutMemory` takes the micro-batch), from the parts `cache` keeps (a cache of another 4-bit
    implementation is not read). `qlora`: the 4-bit implementation when not `w.framework`'s (stack.qlora_impl)."""
    c = cache if cache is not None and cache.qlora == qlora else MemoryCache(qlora)
    dp = max(gpus // (lay.tp * lay.pp), 1)
    return LayoutMemory(c.layout_states(arch, p, w, lay, dp), c.tp_terms(arch, p, w, lay.tp, table),
                        c.amp_casts(arch, p, w, lay, dp), lay, gpus, w.gradient_checkpointing, alloc)


def _groups(arch: ModelArch, w: Workload, r: Resolved, tp: int,
            table: ActivationTable) -> tuple[list[LayerGroup], list[Note]]:
    """Each group of layers alike (layers, tokens per sequence, bytes per token saved, bytes per token of one layer
    in full), and the notes of the coefficients used."""
    notes: list[Note] = []
    rank = (w.lora or LoraSpec()).rank if w.task in ("lora", "qlora") else 0
    eager, ckpt = w.attention == "eager", w.gradient_checkpointing
    groups: list[LayerGroup] = []
    full_c = coefficients(arch, w, False, table, notes)
    for layers, seq in layers_tokens(arch, r):
        full = (per_token(full_c, arch, seq, rank, tp, fit_max_seq(arch, w, False))
                + dropout_mask_bytes_per_token(arch, seq, eager, compute_bytes(w))
                - fused_activation_saving(arch, w, tp))
        kept = full if not ckpt else per_token(coefficients(arch, w, True, table, notes), arch, seq, rank, tp,
                                                fit_max_seq(arch, w, True))
        groups.append(LayerGroup(layers, seq, kept, full))
    return groups, notes


def tp_terms(arch: ModelArch, p: ParamCount, w: Workload, r: Resolved, tp: int, table: ActivationTable,
             qlora: QloraImpl | None) -> TpTerms:
    """What a training step's memory is made of for one tensor-parallel degree, whatever the rest of the layout,
    for `w`'s recomputation and the 4-bit implementation `qlora`."""
    cnn = arch.kind == "cnn"
    ckpt = w.gradient_checkpointing
    groups: list[LayerGroup] = []
    notes: list[Note] = []
    cnn_per_sample: tuple[float, float] = (0.0, 0.0)
    cnn_layers = 0
    if cnn:  # feature maps, measured per element (data/cnn_activations.toml)
        per_elem = table.cnn[regime_of(w) if regime_of(w) in table.cnn else "amp"]
        cnn_per_sample = (per_elem, cnn_feature_elements(arch, r.seq))
        cnn_layers = arch.num_layers
    else:
        groups, notes = _groups(arch, w, r, tp, table)
    head = head_terms(arch, r, w, tp)
    offload = bool(w.activation_offload)
    compiled = COMPILE_SAVED_FRACTION if w.compile else 1.0
    retained, dequant = qlora_terms(arch, p, w, tp, qlora or qlora_impl(w))
    per_seq = _per_sequence(arch, cnn, cnn_per_sample, groups, head, r.seq, retained, offload, ckpt, compiled,
                            residual_bytes(w))
    return TpTerms(cnn=cnn, seq=r.seq, cnn_per_sample=cnn_per_sample, cnn_layers=cnn_layers, groups=groups, notes=notes,
                   head=head, offload=offload, compiled=compiled, retained=retained, dequant=dequant, per_seq=per_seq)


def _per_sequence(arch: ModelArch, cnn: bool, cnn_per_sample: tuple[float, float], groups: list[LayerGroup],
                  head: Head, seq: int, retained: float, offload: bool, ckpt: bool, compiled: float,
                  resid: int) -> PerSequence:
    """Bytes per sequence of the micro-batch."""
    saved = one = 0.0
    layers: float
    if cnn:
        per_elem, elements = cnn_per_sample
        saved = per_elem * elements
    for g in groups:
        layers, gseq, kept, full = g.layers, g.seq, g.kept, g.full
        if offload:  # activation offloading: the layers in flight stay, the others wait in host memory
            layers = min(layers, OFFLOAD_LAYERS_ON_GPU)
        if not ckpt:  # compiled layers keep fewer intermediates; checkpointed ones keep their inputs anyway
            kept *= compiled
        saved += layers * gseq * kept
        one = max(one, gseq * full * compiled)
    head_saved, head_fwd, head_bwd = head_bytes(head, 1)
    embed = seq * arch.hidden_size * resid
    if cnn:  # the input images
        embed = arch.num_channels * seq * seq * resid
    return PerSequence(saved, one, head_saved, head_fwd, head_bwd, embed, seq * retained)


def amp_casts(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int) -> AmpCasts:
    """Autocast's 16-bit copies of fp32 weights (forward, backward): they live from their first use in forward until
    backward frees them; with checkpointing, backward only holds the head's copy and the recomputed layer's."""
    if w.task in ("lora", "qlora") or w.precision not in ("fp16-mixed", "bf16-mixed", "fp8-mixed"):
        return AmpCasts(0.0, 0.0)
    n_layers = max(arch.num_layers + arch.num_decoder_layers, 1)
    cast_b = 2 if w.precision != "fp8-mixed" else 1
    shard = lay.tp * lay.pp * (dp if lay.zero >= 3 else 1)
    head_w = 0 if arch.tie_word_embeddings else arch.vocab_size * arch.hidden_size
    casts = (p.block_linear_weights + head_w) * cast_b / shard
    if w.gradient_checkpointing:
        return AmpCasts(casts, (head_w + p.block_linear_weights / n_layers) * cast_b / shard)
    return AmpCasts(casts, casts)


#: torch.compile (inductor's min-cut partitioner) saves this fraction of what an eager layer saves for backward:
#: torchtune's 'Optimization flags' table (README, 2024-11-18; Llama 3.2 3B full fine-tune, batch 2 x 4096 packed,
#: A100) goes from 60.0 to 51.0 GiB with compile, 9.0 of the 28.3 GiB its layers save eagerly (gpuplan's estimate of
#: them, benchmarks/memory_cases.yaml); one source, so an assumption: benchmarks/accuracy.py --cases checks it on
#: the compiled runs of the other rows
COMPILE_SAVED_FRACTION = 0.68
#: activation offloading keeps the layer being computed and the one being copied on the GPU (torchtune
#: OffloadActivations with use_streams: a tensor is freed once its copy to host is done)
OFFLOAD_LAYERS_ON_GPU = 2


def estimate_training(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                      table: ActivationTable, oh: Overheads, qlora: QloraImpl | None = None,
                      cache: MemoryCache | None = None) -> MemoryEstimate:
    """The estimate of a training step's memory, and of loading its checkpoint. `cache`: the parts of the layouts
    estimated so far (the search's, for the layouts it shows)."""
    mem = layout_memory(arch, p, w, lay, gpus, table, Allocator.of(oh), cache, qlora)
    r = resolve(arch, w)
    dp = max(gpus // (lay.tp * lay.pp), 1)
    microbatches = max(w.global_batch_size // (r.batch * dp), 1) if w.global_batch_size else 1
    load = load_peak_bytes(arch, p, w, lay, mem.states.weights)  # the weights as every phase holds them
    return finish(mem.phases(r.batch, microbatches), oh, gpus, lay, training=True, notes=list(mem.notes), kv=0.0,
                  trainable=mem.trainable, load=(load, reserve_and_device(load, 0, oh, gpus, lay, False)[1]))


__all__ = ["COMPILE_SAVED_FRACTION", "OFFLOAD_LAYERS_ON_GPU", "PHASES", "MemoryCache", "ModelTerms", "StatesKey",
           "amp_casts", "estimate_training", "layout_memory", "tp_terms"]
