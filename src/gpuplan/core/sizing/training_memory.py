"""Peak memory per GPU of a training step: weights, gradients and optimizer states by precision, optimizer,
LoRA/QLoRA and sharding (ZeRO-1/2/3 = FSDP, tensor and pipeline parallel, CPU offload); the activations saved for
backward (core/sizing/activations.py), the LM head's logits and loss, with gradient checkpointing the layer inputs
plus one layer recomputed; the peak is the largest of the phases of a step, with the parts taken at that moment.
Pure."""

from __future__ import annotations

import math

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
from gpuplan.core.sizing.levels import ALLOC_BLOCK, _finish, _reserve_and_device
from gpuplan.core.sizing.lora import lora_params
from gpuplan.core.sizing.params import ParamCount, cnn_feature_elements
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, LoraSpec, Workload

#: bytes per parameter of NF4 with double quantization: 4 bits + an 8-bit absmax per 64 weights
#: + an fp32 scale per 256 absmax blocks (QLoRA paper, Dettmers et al. 2023, section 3)
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)
#: the moments of a training step whose memory is compared for the peak (TrainingTerms.phase_parts)
PHASES = ("forward", "backward", "backward-layers", "backward-end", "optimizer")


def _head_terms(arch: ModelArch, r: Resolved, w: Workload, tp: int) -> tuple[bool, int, float, float]:
    """(has an LM head, tokens per sequence it sees, vocabulary per GPU, bytes per element of its output)."""
    tokens_per_seq = r.target if arch.kind == "encoder-decoder" else r.seq
    lm = arch.kind not in ("encoder", "vit", "cnn")  # encoders, ViTs and CNNs: a tiny classification head
    return lm, tokens_per_seq, arch.vocab_size / tp, arch.hidden_size, _compute_bytes(w)  # type: ignore[return-value]


def _head_bytes(head: tuple[bool, int, float, float, int], batch: int) -> tuple[float, float, float]:
    """(saved, forward transient, backward transient) bytes of the final norm, LM head, logits and loss."""
    lm, tokens_per_seq, v, hidden, beta = head
    if not lm:
        return 0.0, 0.0, 0.0
    tokens = batch * tokens_per_seq
    saved = tokens * (4 * v + 3 * 4 * hidden)  # fp32 log-softmax output; final norm + head input
    logits = tokens * v * beta  # the head's output, alive until the loss is taken
    upcast = 0 if beta == 4 else tokens * v * 4  # the loss upcasts 16-bit logits to fp32
    fwd = logits + upcast
    bwd = 2 * tokens * v * 4  # fp32 gradients of the log-softmax output and input (the logits are freed)
    return saved, fwd, bwd


def _trainable(arch: ModelArch, w: Workload) -> int | None:
    """The LoRA adapters' parameters (None: every parameter trains)."""
    if w.task not in ("lora", "qlora"):
        return None
    spec = w.lora or LoraSpec()
    return lora_params(arch, spec.rank, spec.targets)


def _static(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int,
            adapters: int | None = None) -> dict[str, float]:
    """Weights, gradients, optimizer states and optimizer-step temporaries, per GPU. `adapters`: the LoRA
    parameters when already counted (_trainable)."""
    mp = lay.tp * lay.pp
    total = p.total
    lora = w.task in ("lora", "qlora")
    if lora:
        trainable = adapters if adapters is not None else _trainable(arch, w)
        assert trainable is not None
    else:
        trainable = total
    if w.task == "qlora":
        quantized = p.block_linear_weights
        weights = quantized * NF4_BYTES_PER_PARAM + (total - quantized) * 2 + trainable * 4
    elif lora:
        weights = total * (4 if w.precision == "fp32" else 2) + trainable * 4
    else:
        weights = total * (2 if w.precision == "bf16" else 4)
    # gradients and optimizer states take the trainable parameters' dtype: fp32 (also LoRA adapters), or bf16
    state_b = 4 if (lora or w.precision != "bf16") else 2
    grad_b = state_b
    # bitsandbytes 8-bit AdamW: two 1-byte states plus an fp32 absmax per 2048-element block for each
    per_param_states = {"adamw": 2 * state_b, "adamw-8bit": 2 + 8 / 2048, "adafactor": 0.0, "sgd": state_b}
    optimizer = trainable * per_param_states[w.optimizer]
    if w.optimizer == "adafactor":  # factored second moment: a row and a column vector per matrix
        optimizer = adafactor_state_elements(arch, p, trainable if lora else None) * state_b
    largest = max(p.largest_linear_weight, arch.vocab_size * arch.hidden_size) if not lora else 0
    if w.optimizer == "adafactor":  # HF Adafactor works one parameter at a time in fp32: the gradient,
        # its square (the update), and for 16-bit parameters fp32 copies of the parameter and gradient
        temp = largest * 4 * (4 if state_b == 2 else 2)
    elif w.optimizer in ("sgd", "adamw-8bit"):  # in place: momentum SGD; bitsandbytes' 8-bit kernels
        temp = 0.0
    elif w.optimizer_implementation == "foreach":  # torch._foreach_sqrt(exp_avg_sq): one state-sized list
        temp = trainable * state_b
    elif w.optimizer_implementation == "for-loop":  # one parameter at a time: the largest parameter's size
        temp = largest * state_b
    else:  # fused kernels update in place
        temp = 0.0
    gradients = trainable * grad_b
    weights /= mp
    gradients /= mp
    optimizer /= mp
    temp /= mp
    if lay.zero >= 3:
        weights /= dp
    if lay.zero >= 2:
        gradients /= dp
    if lay.zero >= 1:
        optimizer /= dp
        temp /= dp
    if lay.offload in ("optimizer", "params"):
        optimizer = 0.0
        temp = 0.0
    if lay.offload == "params":
        weights = 0.0
    return dict(weights=weights, gradients=gradients, optimizer=optimizer, optimizer_temp=temp, trainable=trainable)


def adafactor_state_elements(arch: ModelArch, p: ParamCount, trainable: int | None) -> float:
    """Elements of Adafactor's factored state: rows + columns per matrix, everything for vectors."""
    if trainable is not None:
        return trainable * 0.05  # LoRA adapters are thin matrices: rows + cols ~ (r + n)/(r n) of them
    h, q, kv, i = arch.hidden_size, arch.q_dim, arch.kv_dim, arch.intermediate_size
    per_layer = (h + q) * 2 + (h + kv) * 2 + (2 if arch.mlp_gated else 1) * (h + i) + (i + h)
    layers = arch.num_layers + arch.num_decoder_layers
    vectors = p.total - p.block_linear_weights - arch.vocab_size * arch.hidden_size
    return layers * per_layer + (arch.vocab_size + arch.hidden_size) * 2 + max(vectors, 0)


DDP_BUCKETS_NOTE = Note(code="ddp-buckets", message="DDP (gradient_as_bucket_view=False) keeps its gradient "
                        "buckets beside the gradients: one more gradient-sized buffer")


class TrainingTerms:
    """What a training step's memory on one GPU is made of, for one layout, precision and recomputation choice:
    every term that does not depend on the micro-batch, computed once. `phases(batch, microbatches)` adds the
    micro-batch's activations (the search evaluates many micro-batches per layout with plain arithmetic).
    Any workload with the same task, precision, optimizer, LoRA, attention, sequence and checkpointing settings
    shares these terms; `w.micro_batch_size` and `w.global_batch_size` are not read."""

    __slots__ = ("cnn", "pp", "groups", "cnn_per_sample", "cnn_layers", "head", "embed_per_token", "beta",
                 "resid", "hidden", "num_channels", "seq", "ckpt", "static", "amp_casts", "amp_casts_bwd",
                 "fixed_other", "layer_grad", "head_grad", "trainable", "dp", "notes", "lay", "gpus")

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                 table: ActivationTable, cache: dict[tuple[object, ...], object] | None = None) -> None:
        """`cache`: a dict shared by the terms of one model and workload (the search's), which keeps the parts that
        depend on neither the GPU count nor the ZeRO stage (trainable parameters, per-token activations)."""
        notes: list[Note] = []
        if cache is None:
            r = resolve(arch, w)
        else:
            r = cache.get("resolved") or cache.setdefault("resolved", resolve(arch, w))  # type: ignore[assignment]
        self.lay, self.gpus = lay, gpus
        dp = self.dp = max(gpus // (lay.tp * lay.pp), 1)
        if cache is not None and "trainable" not in cache:
            cache["trainable"] = _trainable(arch, w)
        st = self.static = _static(arch, p, w, lay, dp, None if cache is None else cache["trainable"])  # type: ignore[arg-type]
        rank = (w.lora or LoraSpec()).rank if w.task in ("lora", "qlora") else 0
        eager = w.attention == "eager"
        ckpt = self.ckpt = w.gradient_checkpointing
        n_layers = max(arch.num_layers + arch.num_decoder_layers, 1)
        self.pp = lay.pp
        self.cnn = arch.kind == "cnn"
        self.seq = r.seq
        #: (layers, tokens per sequence, bytes per token saved, bytes per token of one layer in full)
        self.groups: list[tuple[float, int, float, float]] = []
        self.cnn_per_sample, self.cnn_layers = (0.0, 0.0), 0
        if self.cnn:  # feature maps, measured per element (data/cnn_activations.toml)
            per_elem = table.cnn[regime_of(w) if regime_of(w) in table.cnn else "amp"]
            self.cnn_per_sample = (per_elem, cnn_feature_elements(arch, r.seq))
            self.cnn_layers = arch.num_layers
        elif cache is not None and ("groups", lay.tp, ckpt) in cache:
            self.groups, cached_notes = cache[("groups", lay.tp, ckpt)]  # type: ignore[misc]
            notes += cached_notes
        else:
            full_c = _coefficients(arch, w, False, table, notes)
            for layers, seq in _layers_tokens(arch, r):
                full = (_per_token(full_c, arch, seq, rank, lay.tp, _fit_max_seq(arch, w, False))
                        + _dropout_mask_bytes_per_token(arch, seq, eager, _compute_bytes(w)))
                kept = full if not ckpt else _per_token(_coefficients(arch, w, True, table, notes), arch, seq, rank,
                                                        lay.tp, _fit_max_seq(arch, w, True))
                self.groups.append((layers, seq, kept, full))
            if cache is not None:
                cache[("groups", lay.tp, ckpt)] = (self.groups, list(notes))
        self.head = _head_terms(arch, r, w, lay.tp)  # type: ignore[arg-type]
        self.beta = _compute_bytes(w)
        self.hidden, self.num_channels, self.resid = arch.hidden_size, arch.num_channels, _residual_bytes(w)

        # autocast's 16-bit copies of fp32 weights live from their first use in forward until backward frees
        # them; with checkpointing, backward only holds the head's copy and the recomputed layer's
        amp_casts = amp_casts_bwd = 0.0
        if w.task not in ("lora", "qlora") and w.precision in ("fp16-mixed", "bf16-mixed", "fp8-mixed"):
            cast_b = 2 if w.precision != "fp8-mixed" else 1
            shard = lay.tp * lay.pp * (dp if lay.zero >= 3 else 1)
            head_w = 0 if arch.tie_word_embeddings else arch.vocab_size * arch.hidden_size
            amp_casts = (p.block_linear_weights + head_w) * cast_b / shard
            amp_casts_bwd = (head_w + p.block_linear_weights / n_layers) * cast_b / shard if ckpt else amp_casts
        self.amp_casts, self.amp_casts_bwd = amp_casts, amp_casts_bwd
        zero3_work = 0.0
        if lay.zero >= 3 and dp > 1:  # FSDP all-gathers one block (and prefetches the next)
            zero3_work = 2 * p.blocks / n_layers * 2 / lay.tp
        ddp_buckets = st["gradients"] if (lay.zero == 0 and dp > 1) else 0.0
        if ddp_buckets:
            notes.append(DDP_BUCKETS_NOTE)
        self.fixed_other = zero3_work + ddp_buckets
        self.layer_grad = st["gradients"] / n_layers
        head_grad = 0.0  # the LM head's weight gradient, the first one backward produces
        if w.task not in ("lora", "qlora") and arch.kind == "decoder" and st["trainable"]:
            head_grad = st["gradients"] * arch.vocab_size * arch.hidden_size / st["trainable"]
        self.head_grad = head_grad
        self.trainable = st["trainable"]
        self.notes = notes

    def phase_parts(self, batch: int, microbatches: int) -> tuple[tuple[float, float, float], ...]:
        """(gradients, activations, other) bytes at each moment of PHASES (weights and optimizer states are
        `static` throughout) for `batch` sequences per micro-batch and `microbatches` micro-batches per optimizer
        step (gradient accumulation)."""
        in_flight = min(self.pp, microbatches) / self.pp  # 1F1B: the first stage holds pp micro-batches
        saved_layer = 0.0  # bytes saved over all layers
        one_layer = 0.0  # the largest single layer's activations (recomputed during backward with checkpointing)
        if self.cnn:
            per_elem, elements = self.cnn_per_sample
            saved_layer = batch * per_elem * elements * in_flight
            one_layer = saved_layer / self.cnn_layers
        for layers, seq, kept, full in self.groups:
            tokens = batch * seq
            saved_layer += layers * in_flight * tokens * kept
            one_layer = max(one_layer, tokens * full)
        head_saved, head_fwd, head_bwd = _head_bytes(self.head, batch)
        embed = batch * self.seq * self.hidden * self.resid
        if self.cnn:  # the input images
            embed = batch * self.num_channels * self.seq * self.seq * self.resid
        activations = saved_layer + head_saved + embed
        recompute = one_layer if self.ckpt else 0.0
        G = self.static["gradients"]
        g_acc = G if microbatches > 1 else 0.0  # gradient accumulation: gradients live through forward too
        fixed_other = self.fixed_other
        return (
            # forward: the loss is taken: every saved activation, autocast's weight copies, logits and their
            # fp32 copies
            (g_acc, activations, self.amp_casts + head_fwd + fixed_other),
            # backward through the loss and the head: the logits' fp32 gradients, no weight gradient yet
            (g_acc, activations, self.amp_casts_bwd + head_bwd + fixed_other),
            # backward-layers: the top layer's backward: the head's gradient exists, its logits are gone; with
            # checkpointing the layer is recomputed
            (max(g_acc, self.head_grad), activations - head_saved + recompute, self.amp_casts_bwd + fixed_other),
            # backward-end: the first layer's backward: all gradients but its own, its activations
            (G - self.layer_grad, embed + one_layer, fixed_other),
            # optimizer
            (G, 0.0, self.static["optimizer_temp"] + fixed_other),
        )

    def phases(self, batch: int, microbatches: int) -> dict[str, dict[str, float]]:
        """Bytes by part at each moment of a step (`phase_parts` with the static parts, by name)."""
        W, O = self.static["weights"], self.static["optimizer"]
        return {name: dict(weights=W, optimizer=O, gradients=g, activations=a, other=o)
                for name, (g, a, o) in zip(PHASES, self.phase_parts(batch, microbatches))}

    def device_bytes(self, batch: int, microbatches: int, oh: Overheads) -> int:
        """What `estimate_training(...).device_bytes` is for this micro-batch, with no result objects built: the
        arithmetic of `_levels` on the phases, rounding the weights and optimizer states (the same in every
        phase) once."""
        b, ceil = ALLOC_BLOCK, math.ceil
        fixed = int(ceil(self.static["weights"] / b) * b) + int(ceil(self.static["optimizer"] / b) * b)
        top = churn = -1
        for g, a, o in self.phase_parts(batch, microbatches):
            act, other = int(ceil(a / b) * b), int(ceil(o / b) * b)  # _round, inline: the search's hot path
            total = fixed + int(ceil(g / b) * b) + act + other
            if total > top:  # the first phase with the largest total, as max() picks it
                top, churn = total, act + other
        return _reserve_and_device(top, churn, oh, self.gpus, self.lay, True)[1]


def estimate_training(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                      table: ActivationTable, oh: Overheads) -> MemoryEstimate:
    terms = TrainingTerms(arch, p, w, lay, gpus, table)
    r = resolve(arch, w)
    phases = terms.phases(r.batch, _microbatches(w, r, terms.dp))
    return _finish(phases, oh, gpus, lay, training=True, notes=list(terms.notes), kv=0.0, trainable=terms.trainable)


def _microbatches(w: Workload, r: Resolved, dp: int) -> int:
    if w.global_batch_size:
        return max(w.global_batch_size // (r.batch * dp), 1)
    return 1


