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
    _coefficients,
    _compute_bytes,
    _dropout_mask_bytes_per_token,
    _fit_max_seq,
    _layers_tokens,
    _per_token,
    _residual_bytes,
    regime_of,
    resolve,
)
from gpuplan.core.sizing.head_memory import _head_bytes, _head_terms
from gpuplan.core.sizing.levels import ALLOC_BLOCK, _finish, _reserve_and_device, _round
from gpuplan.core.sizing.params import ParamCount, cnn_feature_elements
from gpuplan.core.sizing.stack import QloraImpl, fused_activation_saving, load_peak_bytes, qlora_impl, qlora_terms
from gpuplan.core.sizing.states import States, shard_states, trainable_adapters, unsharded_states
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
    full_c = _coefficients(arch, w, False, table, notes)
    for layers, seq in _layers_tokens(arch, r):
        full = (_per_token(full_c, arch, seq, rank, tp, _fit_max_seq(arch, w, False))
                + _dropout_mask_bytes_per_token(arch, seq, eager, _compute_bytes(w))
                - fused_activation_saving(arch, w, tp))
        kept = full if not ckpt else _per_token(_coefficients(arch, w, True, table, notes), arch, seq, rank, tp,
                                                _fit_max_seq(arch, w, True))
        groups.append((layers, seq, kept, full))
    return groups, notes


DDP_BUCKETS_NOTE = Note(code="ddp-buckets", message="DDP (gradient_as_bucket_view=False) keeps its gradient "
                        "buckets beside the gradients: one more gradient-sized buffer")


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
        "per_seq",
        "pp",
        "retained",
        "rounded",
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
        layout that do not depend on recomputation (`_layout_states`); `qlora`: the 4-bit implementation when not
        `w.framework`'s (stack.qlora_impl)."""
        c: dict[object, object] = {} if cache is None else cache  # type: ignore[assignment]
        mkey = ("model", qlora)  # the model's states before any layout divides them
        model = c.get(mkey)
        if model is None:
            model = c[mkey] = (resolve(arch, w), unsharded_states(arch, p, w, trainable_adapters(arch, w), qlora))
        r, base = model  # type: ignore[misc]
        self.lay, self.gpus = lay, gpus
        tp, pp = lay.tp, lay.pp
        self.pp = pp
        dp = self.dp = max(gpus // (tp * pp), 1)
        # the layout's states depend on the model-parallel product, the ZeRO stage and the offload, on dp where
        # ZeRO shards by it (else only on whether DDP keeps buckets) and on tp where ZeRO-3 gathers a block
        zero = lay.zero
        lkey = ("layout", qlora, zero, tp * pp, lay.offload, dp if zero else dp > 1, tp if zero >= 3 else 0)
        states = c.get(lkey)
        if states is None:  # what does not depend on recomputation, shared by the layout's two choices
            states = c[lkey] = _layout_states(arch, p, w, lay, dp, base)
        st, self.fixed_other, self.layer_grad, self.head_grad, state_notes, rounded = states  # type: ignore[misc]
        self.static = st
        ckpt = self.ckpt = w.gradient_checkpointing
        tkey = ("per_tp", tp, ckpt, qlora)  # what depends on the tensor-parallel degree and recomputation alone
        per_tp = c.get(tkey)
        if per_tp is None:
            per_tp = c[tkey] = _per_tp(arch, p, w, r, tp, table, qlora)
        (self.cnn, self.seq, self.cnn_per_sample, self.cnn_layers, self.groups, group_notes, self.head, self.offload,
         self.compiled, self.retained, self.dequant, self.per_seq) = per_tp  # type: ignore[misc]
        akey = ("amp", ckpt, tp * pp * (dp if lay.zero >= 3 else 1))  # what _amp_casts divides by
        amp = c.get(akey)
        if amp is None:
            amp = c[akey] = _amp_casts(arch, p, w, lay, dp)
        self.amp_casts, self.amp_casts_bwd = amp  # type: ignore[misc]
        self.trainable = st["trainable"]
        self.notes = group_notes + state_notes
        # what `device_bytes` rounds once (each as `_round`, written out): each phase's weights, optimizer states
        # and gradients (one micro-batch per step, or several), then the phases' temporaries that do not grow with
        # the micro-batch
        b, ceil, fo, dq = ALLOC_BLOCK, math.ceil, self.fixed_other, self.dequant
        self.rounded = (*rounded, (ceil((self.amp_casts_bwd + fo + dq) / b) * b, ceil((fo + dq) / b) * b,
                                   ceil((st["optimizer_temp"] + fo) / b) * b))

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
        """`device_bytes` of each (micro-batch, micro-batches per step): the arithmetic of `phase_parts` and
        `_levels`, with the parts that do not grow with the micro-batch rounded once (`rounded`) and the terms read
        once for all. The search's hot path: keep it equal to `phase_parts` term by term."""
        saved, one, hs, hf, hb, emb, kept = self.per_seq
        with_one, with_acc, (o3, o4, o5) = self.rounded
        b, ceil = ALLOC_BLOCK, math.ceil
        pp, cnn, cnn_layers, ckpt = self.pp, self.cnn, self.cnn_layers, self.ckpt
        amp, amp_bwd, fo, dq = self.amp_casts, self.amp_casts_bwd, self.fixed_other, self.dequant
        # _reserve_and_device, written out: the allocator's reserve and the CUDA context with the communicators
        frac, rnd = oh.allocator_fraction_training, oh.allocator_rounding_bytes
        cublas, lay = oh.cublas_workspace_bytes, self.lay
        base = oh.cuda_context_bytes + ((1 if self.gpus > 1 else 0) + (1 if lay.tp > 1 else 0)
                                        + (1 if lay.pp > 1 else 0)) * oh.nccl_bytes_per_communicator
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
            o1 = ceil((amp + batch * hf + fo + dq) / b) * b
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
            out.append(int(ceil((top + frac * churn + cublas) / rnd) * rnd) + base)
        return out

    def load_device_bytes(self, arch: ModelArch, p: ParamCount, w: Workload, oh: Overheads) -> int:
        """What `estimate_training(...).load_device_bytes` is (loading the checkpoint; no micro-batch in it): the
        search's `fits` needs the larger of it and `device_bytes`."""
        load = load_peak_bytes(arch, p, w, self.lay, _round(self.static["weights"]))
        return _reserve_and_device(load, 0, oh, self.gpus, self.lay, False)[1]


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
    head = _head_terms(arch, r, w, tp)
    offload = bool(w.activation_offload)
    compiled = COMPILE_SAVED_FRACTION if w.compile else 1.0
    retained, dequant = qlora_terms(arch, p, w, tp, qlora or qlora_impl(w))
    per_seq = _per_sequence(arch, cnn, cnn_per_sample, groups, head, r.seq, retained, offload, ckpt, compiled,
                            _residual_bytes(w))
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
    head_saved, head_fwd, head_bwd = _head_bytes(head, 1)  # type: ignore[arg-type]
    embed = seq * arch.hidden_size * resid
    if cnn:  # the input images
        embed = arch.num_channels * seq * seq * resid
    return saved, one, head_saved, head_fwd, head_bwd, embed, seq * retained


def _layout_states(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int, base: States,
                   ) -> tuple[States, float, float, float, list[Note], tuple[tuple[int, ...], tuple[int, ...]]]:
    """What a layout's memory is made of whatever the recomputation: (the model states per GPU, the fixed
    temporaries (FSDP's gathered blocks, DDP's buckets), one layer's and the head's weight gradients, their notes,
    and, rounded as `_round` rounds them, the weights and optimizer states plus each phase's gradients, with one
    micro-batch per step and with several)."""
    notes: list[Note] = []
    st = shard_states(base, w, lay, dp)
    n_layers = max(arch.num_layers + arch.num_decoder_layers, 1)
    zero3_work = 0.0
    if lay.zero >= 3 and dp > 1:  # FSDP all-gathers one block (and prefetches the next)
        zero3_work = 2 * p.blocks / n_layers * 2 / lay.tp
    ddp_buckets = st["gradients"] if (lay.zero == 0 and dp > 1) else 0.0
    if ddp_buckets:
        notes.append(DDP_BUCKETS_NOTE)
    if st["paged"]:
        notes.append(Note(code="paged-optimizer", message=f"paged 8-bit AdamW keeps its states "
                          f"({st['paged'] / 2**30:.1f} GiB per GPU) in CUDA unified memory, outside the peak: on the "
                          "GPU while there is room, paged to host memory (and slower) when there is not"))
    layer_grad = st["gradients"] / n_layers
    head_grad = 0.0  # the LM head's weight gradient, the first one backward produces
    if w.task not in ("lora", "qlora") and arch.kind == "decoder" and st["trainable"]:
        head_grad = st["gradients"] * arch.vocab_size * arch.hidden_size / st["trainable"]
    if w.optimizer_in_backward:  # gradients are stepped and freed one parameter at a time
        layer_grad, head_grad = 0.0, min(head_grad, st["gradients"])
    b, ceil = ALLOC_BLOCK, math.ceil
    fixed = ceil(st["weights"] / b) * b + ceil(st["optimizer"] / b) * b
    G, A, lg, hg = st["gradients"], st["accumulated"], layer_grad, head_grad
    # phase_parts' gradients with one micro-batch per step, and with gradient accumulation, each with the weights
    # and optimizer states (integers: exact in any order)
    g_less, g_all = fixed + ceil((G - lg) / b) * b, fixed + ceil(G / b) * b
    one = (fixed, fixed, fixed + ceil(max(0.0, hg) / b) * b, g_less, g_all)
    if A == G:  # what accumulation keeps is the gradients (the optimizer does not step in backward)
        acc = (g_all, g_all, fixed + ceil(max(A, hg) / b) * b, g_less, g_all)
    else:
        a = fixed + ceil(A / b) * b
        acc = (a, a, fixed + ceil(max(A, hg) / b) * b, fixed + ceil((A - lg) / b) * b, a)
    return st, zero3_work + ddp_buckets, layer_grad, head_grad, notes, (one, acc)


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
    return _finish(phases, oh, gpus, lay, training=True, notes=list(terms.notes), kv=0.0, trainable=terms.trainable)


def _microbatches(w: Workload, r: Resolved, dp: int) -> int:
    if w.global_batch_size:
        return max(w.global_batch_size // (r.batch * dp), 1)
    return 1


