"""Peak memory per GPU of a training step: weights, gradients and optimizer states by precision, optimizer,
LoRA/QLoRA and sharding (ZeRO-1/2/3 = FSDP, tensor and pipeline parallel, CPU offload); the activations saved for
backward (core/sizing/activations.py), the LM head's logits and loss, with gradient checkpointing the layer inputs
plus one layer recomputed; the peak is the largest of the phases of a step, with the parts taken at that moment.
Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable

from gpuplan.core.sizing.activations import (
    Resolved,
    coefficients,
    compute_bytes,
    dropout_mask_bytes_per_token,
    fit_max_seq,
    layers_tokens,
    per_token,
    residual_bytes,
    regime_of,
    resolve,
)
from gpuplan.core.sizing.head_memory import head_bytes, head_terms
from gpuplan.core.sizing.levels import ALLOC_BLOCK, finish, reserve_and_device, round_block
from gpuplan.core.sizing.params import ParamCount, cnn_feature_elements
from gpuplan.core.sizing.stack import QloraImpl, fused_activation_saving, load_peak_bytes, qlora_impl, qlora_terms
from gpuplan.core.sizing.states import States, layout_states, trainable_adapters, unsharded_states
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, LoraSpec, Workload

#: the moments of a training step whose memory is compared for the peak (TrainingTerms.phase_parts)
PHASES = ("forward", "backward", "backward-layers", "backward-end", "optimizer")


def _groups(arch: ModelArch, w: Workload, r: Resolved, tp: int,
            table: ActivationTable) -> tuple[list[tuple[float, int, float, float]], list[Note]]:
    """Each group of layers alike (layers, tokens per sequence, bytes per token saved, bytes per token of one layer
    in full), and the notes of the coefficients used."""
    notes: list[Note] = []
    rank = (w.lora or LoraSpec()).rank if w.task in ("lora", "qlora") else 0
    eager, ckpt = w.attention == "eager", w.gradient_checkpointing
    groups = []
    full_c = coefficients(arch, w, False, table, notes)
    for layers, seq in layers_tokens(arch, r):
        full = (per_token(full_c, arch, seq, rank, tp, fit_max_seq(arch, w, False))
                + dropout_mask_bytes_per_token(arch, seq, eager, compute_bytes(w))
                - fused_activation_saving(arch, w, tp))
        kept = full if not ckpt else per_token(coefficients(arch, w, True, table, notes), arch, seq, rank, tp,
                                                fit_max_seq(arch, w, True))
        groups.append((layers, seq, kept, full))
    return groups, notes


class TrainingTerms:
    """What a training step's memory on one GPU is made of, for one layout, precision and recomputation choice:
    every term that does not depend on the micro-batch, computed once. `phases(batch, microbatches)` adds the
    micro-batch's activations (the search evaluates many micro-batches per layout with plain arithmetic: the
    activations are linear in the micro-batch, so they are kept as bytes per sequence).
    Any workload with the same task, precision, optimizer, LoRA, attention, sequence and checkpointing settings
    shares these terms; `w.micro_batch_size` and `w.global_batch_size` are not read."""

    __slots__ = (
        "amp_casts",
        "amp_casts_bwd",
        "ckpt",
        "cnn",
        "cnn_layers",
        "cnn_per_sample",
        "compiled",
        "dequant",
        "dp",
        "fixed_other",
        "gpus",
        "groups",
        "head",
        "head_grad",
        "lay",
        "layer_grad",
        "notes",
        "offload",
        "parts",
        "per_seq",
        "pp",
        "retained",
        "seq",
        "static",
        "trainable",
    )

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                 table: ActivationTable, cache: dict[tuple[object, ...], object] | None = None,
                 qlora: QloraImpl | None = None) -> None:
        """`cache`: a dict shared by the terms of one model and workload (the search's; workloads that differ in
        gradient checkpointing alone may share it), which keeps the parts that depend on neither the GPU count nor
        the ZeRO stage (model states before sharding, per-token activations, the head's terms) and those of each
        layout that do not depend on recomputation (`layout_states`); `qlora`: the 4-bit implementation when not
        `w.framework`'s (stack.qlora_impl)."""
        states, per_tp, amp, dp = _parts(arch, p, w, lay, gpus, table, {} if cache is None else cache, qlora)
        self.parts = (states, per_tp, amp)  # as the cache keeps them (`layout_device_bytes` reads the same)
        self.lay, self.gpus, self.pp, self.dp = lay, gpus, lay.pp, dp
        st, self.fixed_other, self.layer_grad, self.head_grad, state_notes, _ = states  # type: ignore[misc]
        self.static = st
        self.ckpt = w.gradient_checkpointing
        (self.cnn, self.seq, self.cnn_per_sample, self.cnn_layers, self.groups, group_notes, self.head, self.offload,
         self.compiled, self.retained, self.dequant, self.per_seq) = per_tp  # type: ignore[misc]
        self.amp_casts, self.amp_casts_bwd = amp  # type: ignore[misc]
        self.trainable = st["trainable"]
        self.notes = group_notes + state_notes

    def phase_parts(self, batch: int, microbatches: int) -> tuple[tuple[float, float, float], ...]:
        """(gradients, activations, other) bytes at each moment of PHASES (weights and optimizer states are
        `static` throughout) for `batch` sequences per micro-batch and `microbatches` micro-batches per optimizer
        step (gradient accumulation)."""
        saved, one, hs, hf, hb, emb, kept = self.per_seq
        in_flight = min(self.pp, microbatches) / self.pp  # 1F1B: the first stage holds pp micro-batches
        saved_layer = batch * in_flight * saved  # bytes saved over all layers
        # the largest single layer's activations (recomputed during backward with checkpointing)
        one_layer = saved_layer / self.cnn_layers if self.cnn else batch * one
        head_saved, head_fwd, head_bwd, embed = batch * hs, batch * hf, batch * hb, batch * emb
        activations = saved_layer + head_saved + embed + batch * kept
        recompute = one_layer if self.ckpt else 0.0
        G = self.static["gradients"] if microbatches == 1 else self.static["accumulated"]
        g_acc = G if microbatches > 1 else 0.0  # gradient accumulation: gradients live through forward too
        fixed_other = self.fixed_other
        dq = self.dequant
        return (
            # forward: the loss is taken: every saved activation, autocast's weight copies, logits and their
            # fp32 copies
            (g_acc, activations, self.amp_casts + head_fwd + fixed_other + dq),
            # backward through the loss and the head: the logits' fp32 gradients, no weight gradient yet
            (g_acc, activations, self.amp_casts_bwd + head_bwd + fixed_other + dq),
            # backward-layers: the top layer's backward: the head's gradient exists, its logits are gone; with
            # checkpointing the layer is recomputed
            (max(g_acc, self.head_grad), activations - head_saved + recompute, self.amp_casts_bwd + fixed_other + dq),
            # backward-end: the first layer's backward: all gradients but its own, its activations
            (G - self.layer_grad, embed + one_layer, fixed_other + dq),
            # optimizer
            (G, 0.0, self.static["optimizer_temp"] + fixed_other),
        )

    def phases(self, batch: int, microbatches: int) -> dict[str, dict[str, float]]:
        """Bytes by part at each moment of a step (`phase_parts` with the static parts, by name)."""
        W, O = self.static["weights"], self.static["optimizer"]
        return {name: {"weights": W, "optimizer": O, "gradients": g, "activations": a, "other": o}
                for name, (g, a, o) in zip(PHASES, self.phase_parts(batch, microbatches))}

    def device_bytes(self, batch: int, microbatches: int, oh: Overheads) -> int:
        """What `estimate_training(...).device_bytes` is for this micro-batch, with no result objects built
        (`device_bytes_of` for one)."""
        return self.device_bytes_of(((batch, microbatches),), oh)[0]

    def device_bytes_of(self, batches: Iterable[tuple[int, int]], oh: Overheads) -> list[int]:
        """`device_bytes` of each (micro-batch, micro-batches per step): `_device_bytes` on this layout's parts,
        the search's arithmetic (`layout_device_bytes` is the same without a terms object)."""
        states, per_tp, amp = self.parts
        return _device_bytes(states, per_tp, amp, self.lay.tp, self.pp, self.gpus, self.ckpt, batches,  # type: ignore[arg-type]
                             alloc_terms(oh))

    def load_device_bytes(self, arch: ModelArch, p: ParamCount, w: Workload, oh: Overheads) -> int:
        """What `estimate_training(...).load_device_bytes` is (loading the checkpoint; no micro-batch in it): the
        search's `fits` needs the larger of it and `device_bytes`."""
        load = load_peak_bytes(arch, p, w, self.lay, round_block(self.static["weights"]))
        return reserve_and_device(load, 0, oh, self.gpus, self.lay, False)[1]


def _per_tp(arch: ModelArch, p: ParamCount, w: Workload, r: Resolved, tp: int, table: ActivationTable,
            qlora: QloraImpl | None) -> tuple[object, ...]:
    """What a training step's memory is made of for one tensor-parallel degree, whatever the rest of the layout,
    for `w`'s recomputation and the 4-bit implementation `qlora`: (a CNN?, tokens per sequence, a CNN's bytes per
    element and elements per sample, its layers; each group of layers alike and the notes of their coefficients;
    the head's terms; activation offloading, torch.compile's saved fraction; the bitsandbytes terms; the bytes per
    sequence of `_per_sequence`)."""
    cnn = arch.kind == "cnn"
    ckpt = w.gradient_checkpointing
    groups: list[tuple[float, int, float, float]] = []
    notes: list[Note] = []
    cnn_per_sample, cnn_layers = (0.0, 0.0), 0
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
    return cnn, r.seq, cnn_per_sample, cnn_layers, groups, notes, head, offload, compiled, retained, dequant, per_seq


def _per_sequence(arch: ModelArch, cnn: bool, cnn_per_sample: tuple[float, float],
                  groups: list[tuple[float, int, float, float]], head: object, seq: int, retained: float,
                  offload: bool, ckpt: bool, compiled: float, resid: int) -> tuple[float, ...]:
    """Bytes per sequence of the micro-batch: (saved by the layers before 1F1B's share in flight, the largest
    layer in full, the head's saved, forward and backward bytes, the embedding's output, the bytes an old
    bitsandbytes keeps)."""
    saved = one = 0.0
    if cnn:
        per_elem, elements = cnn_per_sample
        saved = per_elem * elements
    for layers, gseq, kept, full in groups:
        if offload:  # activation offloading: the layers in flight stay, the others wait in host memory
            layers = min(layers, OFFLOAD_LAYERS_ON_GPU)
        if not ckpt:  # compiled layers keep fewer intermediates; checkpointed ones keep their inputs anyway
            kept *= compiled
        saved += layers * gseq * kept
        one = max(one, gseq * full * compiled)
    head_saved, head_fwd, head_bwd = head_bytes(head, 1)  # type: ignore[arg-type]
    embed = seq * arch.hidden_size * resid
    if cnn:  # the input images
        embed = arch.num_channels * seq * seq * resid
    return saved, one, head_saved, head_fwd, head_bwd, embed, seq * retained


def _amp_casts(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int) -> tuple[float, float]:
    """Autocast's 16-bit copies of fp32 weights (forward, backward): they live from their first use in forward until
    backward frees them; with checkpointing, backward only holds the head's copy and the recomputed layer's."""
    if w.task in ("lora", "qlora") or w.precision not in ("fp16-mixed", "bf16-mixed", "fp8-mixed"):
        return 0.0, 0.0
    n_layers = max(arch.num_layers + arch.num_decoder_layers, 1)
    cast_b = 2 if w.precision != "fp8-mixed" else 1
    shard = lay.tp * lay.pp * (dp if lay.zero >= 3 else 1)
    head_w = 0 if arch.tie_word_embeddings else arch.vocab_size * arch.hidden_size
    amp_casts = (p.block_linear_weights + head_w) * cast_b / shard
    if w.gradient_checkpointing:
        return amp_casts, (head_w + p.block_linear_weights / n_layers) * cast_b / shard
    return amp_casts, amp_casts


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
                      cache: dict[tuple[object, ...], object] | None = None) -> MemoryEstimate:
    """`cache`: TrainingTerms' (the search's, for the layouts it shows)."""
    terms = TrainingTerms(arch, p, w, lay, gpus, table, cache, qlora)
    r = resolve(arch, w)
    phases = terms.phases(r.batch, _microbatches(w, r, terms.dp))
    return finish(phases, oh, gpus, lay, training=True, notes=list(terms.notes), kv=0.0, trainable=terms.trainable)


def _microbatches(w: Workload, r: Resolved, dp: int) -> int:
    if w.global_batch_size:
        return max(w.global_batch_size // (r.batch * dp), 1)
    return 1


def _model(arch: ModelArch, p: ParamCount, w: Workload, c: dict[object, object],
           qlora: QloraImpl | None) -> tuple[Resolved, States]:
    """The model's states before any layout divides them, and the resolved workload (from the cache `c`)."""
    mkey = ("model", qlora)
    model = c.get(mkey)
    if model is None:
        model = c[mkey] = (resolve(arch, w), unsharded_states(arch, p, w, trainable_adapters(arch, w), qlora))
    return model  # type: ignore[return-value]


def _parts(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, table: ActivationTable,
           c: dict[object, object], qlora: QloraImpl | None) -> tuple[tuple[object, ...], tuple[object, ...],
                                                                     tuple[float, float], int]:
    """A layout's terms as TrainingTerms' cache `c` keeps them: (`layout_states`, `_per_tp`, `_amp_casts`, dp)."""
    tp, pp, zero = lay.tp, lay.pp, lay.zero
    dp = max(gpus // (tp * pp), 1)
    # the layout's states depend on the model-parallel product, the ZeRO stage and the offload, on dp where ZeRO
    # shards by it (else only on whether DDP keeps buckets) and on tp where ZeRO-3 gathers a block
    lkey = ("layout", qlora, zero, tp * pp, lay.offload, dp if zero else dp > 1, tp if zero >= 3 else 0)
    states = c.get(lkey)
    if states is None:  # what does not depend on recomputation, shared by the layout's two choices
        states = c[lkey] = layout_states(arch, p, w, lay, dp, _model(arch, p, w, c, qlora)[1])
    ckpt = w.gradient_checkpointing
    tkey = ("per_tp", tp, ckpt, qlora)  # what depends on the tensor-parallel degree and recomputation alone
    per_tp = c.get(tkey)
    if per_tp is None:
        per_tp = c[tkey] = _per_tp(arch, p, w, _model(arch, p, w, c, qlora)[0], tp, table, qlora)
    akey = ("amp", ckpt, tp * pp * (dp if zero >= 3 else 1))  # what _amp_casts divides by
    amp = c.get(akey)
    if amp is None:
        amp = c[akey] = _amp_casts(arch, p, w, lay, dp)
    return states, per_tp, amp, dp  # type: ignore[return-value]


def alloc_terms(oh: Overheads) -> tuple[float, int, int, int, int]:
    """What a step's device bytes take of the overheads (a search reads them once): the allocator's reserve fraction
    and rounding, cuBLAS's workspace, the CUDA context, one NCCL communicator."""
    return (oh.allocator_fraction_training, oh.allocator_rounding_bytes, oh.cublas_workspace_bytes,
            oh.cuda_context_bytes, oh.nccl_bytes_per_communicator)


def layout_device_bytes(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int, table: ActivationTable,
                        cache: dict[tuple[object, ...], object], batches: Iterable[tuple[int, int]],
                        alloc: tuple[float, int, int, int, int], qlora: QloraImpl | None = None) -> list[int]:
    """`TrainingTerms(arch, p, w, lay, gpus, table, cache, qlora).device_bytes_of(batches, oh)` with no terms
    object made, from the same cached parts: the search's memory of each layout it makes (`alloc`: `alloc_terms(oh)`,
    read once for the search)."""
    states, per_tp, amp, _ = _parts(arch, p, w, lay, gpus, table, cache, qlora)  # type: ignore[arg-type]
    return _device_bytes(states, per_tp, amp, lay.tp, lay.pp, gpus, w.gradient_checkpointing, batches, alloc)


def _device_bytes(states: tuple[object, ...], per_tp: tuple[object, ...], amp: tuple[float, float], tp: int, pp: int,
                  gpus: int, ckpt: bool, batches: Iterable[tuple[int, int]],
                  alloc: tuple[float, int, int, int, int]) -> list[int]:
    """`device_bytes` of each (micro-batch, micro-batches per step) on a layout's parts (`_parts`): the arithmetic
    of `phase_parts` and `_levels`, with the parts that do not grow with the micro-batch rounded once and the terms
    read once for all. The search's hot path: keep it equal to `phase_parts` term by term."""
    st, fo, _, _, _, (with_one, with_acc) = states  # type: ignore[misc]
    cnn, cnn_layers, dq = per_tp[0], per_tp[3], per_tp[10]
    saved, one, hs, hf, hb, emb, kept = per_tp[11]  # type: ignore[misc]
    amp_fwd, amp_bwd = amp
    b, ceil = ALLOC_BLOCK, math.ceil
    # what does not grow with the micro-batch: the phases' temporaries, each rounded as `round_block` rounds it
    o3, o4 = ceil((amp_bwd + fo + dq) / b) * b, ceil((fo + dq) / b) * b  # type: ignore[operator]
    o5 = ceil((st["optimizer_temp"] + fo) / b) * b  # type: ignore[index]
    # reserve_and_device, written out: the allocator's reserve and the CUDA context with the communicators
    frac, rnd, cublas, context, nccl = alloc
    base = context + ((1 if gpus > 1 else 0) + (1 if tp > 1 else 0) + (1 if pp > 1 else 0)) * nccl
    out = []
    for batch, microbatches in batches:
        f0, f1, f2, f3, f4 = with_one if microbatches == 1 else with_acc
        # 1F1B: the first stage holds pp micro-batches (a factor of 1.0 without stages: the same product)
        saved_layer = batch * saved if pp == 1 else batch * (min(pp, microbatches) / pp) * saved
        one_layer = saved_layer / cnn_layers if cnn else batch * one
        head_saved, embed = batch * hs, batch * emb
        activations = saved_layer + head_saved + embed + batch * kept
        a12 = ceil(activations / b) * b
        a3 = ceil((activations - head_saved + (one_layer if ckpt else 0.0)) / b) * b
        a4 = ceil((embed + one_layer) / b) * b
        o1 = ceil((amp_fwd + batch * hf + fo + dq) / b) * b
        o2 = ceil((amp_bwd + batch * hb + fo + dq) / b) * b
        # the first phase with the largest total, as max() picks it (PHASES' order, written out)
        top, churn = f0 + a12 + o1, a12 + o1
        total = f1 + a12 + o2
        if total > top:
            top, churn = total, a12 + o2
        total = f2 + a3 + o3
        if total > top:
            top, churn = total, a3 + o3
        total = f3 + a4 + o4
        if total > top:
            top, churn = total, a4 + o4
        total = f4 + o5
        if total > top:
            top, churn = total, o5
        out.append(ceil((top + frac * churn + cublas) / rnd) * rnd + base)  # ceil and the rounding are ints
    return out

