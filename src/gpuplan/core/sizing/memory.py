"""Peak GPU memory per GPU for a training step or an inference prefill.

The model follows what a trace of the real step shows (tests/trace/ compare the two):

* static tensors from exact parameter counts: weights, gradients and optimizer states by precision,
  optimizer, LoRA/QLoRA and sharding (ZeRO-1/2/3 = FSDP, tensor and pipeline parallel, CPU offload);
* activations saved for backward, per layer and per token, from coefficients measured on the real
  Hugging Face implementation of each architecture (data/activations.toml, scripts/fit_activations.py),
  plus the LM head's logits and loss, dropout masks (1 byte each, as CUDA's fused dropout keeps them),
  and, with gradient checkpointing, the layer inputs plus one layer recomputed during backward;
* a phased peak: the largest of end-of-forward, start and end of backward, and optimizer step, with the
  breakdown taken at that moment so the parts sum to the peak;
* inference: weights by dtype (quantization metadata included), the KV cache (GQA, sliding windows, its
  own dtype) and the largest prefill temporaries.

Then the allocator's reserve and the CUDA context, cuBLAS and NCCL give the reserved and device levels.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from gpuplan.core.sizing.lora import attention_only, lora_params
from gpuplan.core.sizing.params import ParamCount, cnn_feature_elements
from gpuplan.schema.estimate import (
    ActivationCoefficients,
    ActivationTable,
    MemoryBreakdown,
    MemoryEstimate,
    Note,
    Overheads,
)
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, LoraSpec, Workload
from gpuplan.schema.result import MemoryOut

#: bytes per parameter of NF4 with double quantization: 4 bits + an 8-bit absmax per 64 weights
#: + an fp32 scale per 256 absmax blocks (QLoRA paper, Dettmers et al. 2023, section 3)
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)
#: int8 (LLM.int8 / fp8 row-wise): 1 byte + a 4-byte scale per output row (negligible per param)
#: int4 (GPTQ/AWQ, group size 128): 4 bits + fp16 scale and 4-bit zero per 128 weights
INT4_BYTES_PER_PARAM = 0.5 + (2 + 0.5) / 128
WEIGHT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": INT4_BYTES_PER_PARAM}
ALLOC_BLOCK = 512  # the CUDA caching allocator rounds every block to 512 bytes
#: the moments of a training step whose memory is compared for the peak (TrainingTerms.phase_parts)
PHASES = ("forward", "backward", "backward-layers", "backward-end", "optimizer")


class Resolved(BaseModel):
    """Workload settings with the model's defaults filled in."""

    model_config = ConfigDict(frozen=True)

    batch: int
    seq: int
    target: int
    training: bool


def resolve(arch: ModelArch, w: Workload) -> Resolved:
    training = w.task != "inference"
    if arch.kind in ("vit", "cnn"):
        img = w.image_size or arch.image_size or 224
        seq = (img // arch.patch_size) ** 2 + 1 if arch.kind == "vit" else img
    elif training:
        seq = w.sequence_length or min(arch.max_position_embeddings or 2048, 2048)
    else:
        seq = w.context_length or w.sequence_length or min(arch.max_position_embeddings or 4096, 4096)
    batch = w.micro_batch_size if training else w.batch_size
    return Resolved(batch=batch, seq=seq, target=w.target_length or seq, training=training)


def regime_of(w: Workload) -> str:
    """Which activation regime of data/activations.toml a workload runs in."""
    if w.task in ("lora", "qlora"):
        if w.precision == "fp32":
            return "lora-fp32"
        return "lora-bf16" if w.precision == "bf16" else "lora-amp"
    if w.precision == "fp32":
        return "fp32"
    return "bf16" if w.precision == "bf16" else "amp"


#: the longest sequences scripts/fit_activations.py measures, eager and SDPA: a fit whose per-token bytes fall
#: with the sequence is not extrapolated beyond them (saved tensors per token never shrink as sequences grow)
FIT_MAX_SEQ = {"eager": 512, "sdpa": 64}


def _per_token(c: ActivationCoefficients, arch: ModelArch, seq: int, rank: int, tp: int,
               fit_max_seq: int = FIT_MAX_SEQ["sdpa"]) -> float:
    """Bytes per token of one layer's saved activations (model-parallel widths divided by tp). Never less
    than the layer's 16-bit input, whatever a fit's negative coefficients say far from where it was measured."""
    moe = arch.moe
    if c.Hs * arch.num_heads + c.s < 0:
        seq = min(seq, fit_max_seq)
    split = (c.q * arch.q_dim + c.kv * arch.kv_dim + c.i * arch.intermediate_size + c.H * arch.num_heads
             + c.Hs * arch.num_heads * seq + c.s * seq
             + c.qg * (arch.q_dim if arch.num_kv_heads < arch.num_heads else 0))
    if moe is not None:
        split += (c.iek * moe.expert_intermediate_size * moe.experts_per_token + c.E * moe.num_experts
                  + c.is_ * moe.shared_intermediate_size + c.Er * moe.num_experts * rank
                  + c.Eie * moe.num_experts * moe.expert_intermediate_size)
    return max(c.h * arch.hidden_size + split / tp + c.r * rank + c.const, 2.0 * arch.hidden_size)


def _compute_bytes(w: Workload) -> int:
    """Bytes per element of activations in the matmuls: 4 in fp32, 2 under autocast or in bf16."""
    return 4 if regime_of(w) in ("fp32", "lora-fp32") else 2


def _residual_bytes(w: Workload) -> int:
    """Bytes per element of the residual stream: the weights' dtype (fp32 under autocast, bf16 for a bf16 or
    LoRA-frozen base)."""
    return 2 if regime_of(w) in ("bf16", "lora-bf16", "lora-amp") else 4


def activation_key(arch: ModelArch, w: Workload, ckpt: bool) -> str:
    attn = "eager" if (w.attention == "eager" and not ckpt) else "sdpa"  # ckpt keeps layer inputs only
    regime = regime_of(w)
    if regime.startswith("lora") and not ckpt and attention_only(arch, w.lora.targets if w.lora else None):
        regime += "-attn"  # frozen MLPs keep fewer inputs when only q/v are adapted
    return f"{arch.model_type}/{regime}/{'ckpt' if ckpt else 'full'}/{attn}"


def _layers_tokens(arch: ModelArch, r: Resolved) -> list[tuple[float, int]]:
    """(layers, tokens per sequence) groups. Encoder-decoder coefficients are measured per encoder+decoder
    layer pair, so each stack counts as half a pair per layer (exact when input and target lengths match)."""
    if arch.kind == "encoder-decoder":
        return [(arch.num_layers / 2, r.seq), (arch.num_decoder_layers / 2, r.target)]
    return [(arch.num_layers, r.seq)]


def _fit_max_seq(arch: ModelArch, w: Workload, ckpt: bool) -> int:
    return FIT_MAX_SEQ["eager" if "/eager" in activation_key(arch, w, ckpt) else "sdpa"]


def _dropout_mask_bytes_per_token(arch: ModelArch, seq: int, eager: bool, beta: int) -> float:
    """Dropout's cost per token and layer: the 1-byte masks CUDA's fused dropout keeps (two residual sites),
    and with eager attention the probabilities' mask plus the dropped-out copy the next matmul saves."""
    per = 0.0
    if arch.hidden_dropout > 0:
        per += 2 * arch.hidden_size
    if arch.attention_dropout > 0 and eager:
        per += arch.num_heads * seq * (1 + beta)
    return per


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


def saved_bytes_per_sample(arch: ModelArch, w: Workload, table: ActivationTable, tp: int = 1) -> float:
    """Bytes autograd saves for backward for one sample, over all layers, without checkpointing: the speed
    model's measure of the elementwise (memory-bound) traffic of a training step."""
    r = resolve(arch, w)
    if arch.kind == "cnn":
        per_elem = table.cnn[regime_of(w) if regime_of(w) in table.cnn else "amp"]
        return per_elem * cnn_feature_elements(arch, r.seq)
    rank = (w.lora or LoraSpec()).rank if w.task in ("lora", "qlora") else 0
    c = _coefficients(arch, w, False, table, [])
    total = 0.0
    for layers, seq in _layers_tokens(arch, r):
        total += layers * seq * (_per_token(c, arch, seq, rank, tp, _fit_max_seq(arch, w, False))
                                 + _dropout_mask_bytes_per_token(arch, seq, w.attention == "eager", _compute_bytes(w)))
    return total


def _microbatches(w: Workload, r: Resolved, dp: int) -> int:
    if w.global_batch_size:
        return max(w.global_batch_size // (r.batch * dp), 1)
    return 1


def _coefficients(arch: ModelArch, w: Workload, ckpt: bool, table: ActivationTable,
                  notes: list[Note]) -> ActivationCoefficients:
    key = activation_key(arch, w, ckpt)
    row = table.rows.get(key)
    if row is not None and row.max_rel_error > 0.1:
        notes.append(Note(code="activation-approximate", severity="warning",
                          message=f"activations of {key} are not linear in the layer's widths (fit residual up "
                                  f"to {100 * row.max_rel_error:.0f}%); treat them as approximate"))
    if row is None:  # e.g. a combination not measured: fall back to the sdpa / llama row, and say so
        for alt in (key.replace("-attn", ""), key.replace("/eager", "/sdpa"), f"llama/{key.split('/', 1)[1]}"):
            if alt in table.rows:
                notes.append(Note(code="activation-fallback", severity="warning",
                                  message=f"no measured activation coefficients for {key}; used {alt}"))
                return table.rows[alt]
        raise KeyError(key)
    return row


def estimate_inference(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                       oh: Overheads) -> MemoryEstimate:
    r = resolve(arch, w)
    notes: list[Note] = []
    dtype = w.weights_dtype or "bf16"
    wb = WEIGHT_BYTES[dtype]
    mp = lay.tp * lay.pp
    if wb < 2:  # quantized: embeddings, head and norms stay in 16 bits
        quantized = p.block_linear_weights
        weights = quantized * wb + (p.total - quantized) * 2
    else:
        weights = p.total * wb
    weights /= mp
    kv_b = {"bf16": 2, "fp16": 2, "fp8": 1}[w.kv_cache_dtype or ("fp16" if dtype == "fp16" else "bf16")]
    # tensor parallel splits the KV heads; with fewer KV heads than GPUs each GPU keeps a replica of one
    kv = kv_cache_bytes(arch, r.batch, r.seq, kv_b) / min(lay.tp, arch.num_kv_heads) / lay.pp
    beta = 4 if dtype == "fp32" else 2
    tokens = min(w.prefill_tokens or r.batch * r.seq, r.batch * r.seq)
    # prefill temporaries of one layer: the MLP's intermediate tensors and the attention's q/k/v/out
    mlp_width = max(arch.intermediate_size, (arch.moe.expert_intermediate_size * arch.moe.experts_per_token
                                             if arch.moe else 0))
    layer_tmp = tokens * beta * (3 * mlp_width + 2 * arch.q_dim + arch.hidden_size * 2) / lay.tp
    if w.attention == "eager":
        layer_tmp += r.batch * arch.num_heads * r.seq * r.seq * (beta + 4) / lay.tp
    logits = r.batch * arch.vocab_size * 4 / lay.tp  # last position only, as generate() asks for
    phases = {"prefill": dict(weights=weights, optimizer=0.0, gradients=0.0, activations=layer_tmp,
                              other=logits)}
    return _finish(phases, oh, gpus, lay, training=False, notes=notes, kv=kv, trainable=0)


def kv_cache_bytes(arch: ModelArch, batch: int, context: int, dtype_bytes: int) -> float:
    """K and V for every layer: sliding-window layers keep at most the window."""
    if arch.kind not in ("decoder", "encoder-decoder"):
        return 0.0
    per_token_layer = 2 * arch.kv_dim * dtype_bytes * batch
    global_layers = arch.num_layers - arch.sliding_window_layers
    total = global_layers * context
    if arch.sliding_window:
        total += arch.sliding_window_layers * min(context, arch.sliding_window)
    return per_token_layer * total


def _round(n: float) -> int:
    return int(math.ceil(n / ALLOC_BLOCK) * ALLOC_BLOCK)


def _levels(phases: dict[str, dict[str, float]], kv: float, oh: Overheads, gpus: int, lay: Layout,
            training: bool) -> tuple[dict[str, dict[str, int]], dict[str, int], str, int, int, int]:
    """(parts rounded to the allocator's blocks, each phase's total, the peak phase, the tensor peak, the
    reserve, the device total): plain arithmetic, shared by the estimate and the search."""
    rounded = {name: {k: _round(v) for k, v in parts.items()} for name, parts in phases.items()}
    kv_r = _round(kv)
    totals = {name: sum(parts.values()) + kv_r for name, parts in rounded.items()}
    peak_phase = max(totals, key=lambda k: totals[k])
    parts = rounded[peak_phase]
    peak = (parts["weights"] + parts["gradients"] + parts["optimizer"] + parts["activations"] + kv_r
            + parts["other"])
    # the caching allocator's reserve grows with what is allocated and freed in many sizes within a step
    # (activations, temporaries); weights, optimizer states, a preallocated KV cache and gradients (the same
    # sizes every step, so their blocks are reused) are not what fragments it
    reserved, device = _reserve_and_device(peak, parts["activations"] + parts["other"], oh, gpus, lay, training)
    return rounded, totals, peak_phase, peak, reserved, device


def _reserve_and_device(peak: int, churn: int, oh: Overheads, gpus: int, lay: Layout,
                        training: bool) -> tuple[int, int]:
    """The allocator's reserve above a tensor peak of which `churn` bytes are allocated and freed in many sizes
    within a step, and the device total with the CUDA context and NCCL's communicators."""
    frac = oh.allocator_fraction_training if training else oh.allocator_fraction_inference
    rnd = oh.allocator_rounding_bytes
    # cuBLAS's workspace comes from the caching allocator too (measured on an H200: benchmarks/device/)
    reserved = int(math.ceil((peak + frac * churn + oh.cublas_workspace_bytes) / rnd) * rnd)
    communicators = (1 if gpus > 1 else 0) + (1 if lay.tp > 1 else 0) + (1 if lay.pp > 1 else 0)
    return reserved, reserved + oh.cuda_context_bytes + communicators * oh.nccl_bytes_per_communicator


def _finish(phases: dict[str, dict[str, float]], oh: Overheads, gpus: int, lay: Layout, *, training: bool,
            notes: list[Note], kv: float, trainable: int) -> MemoryEstimate:
    rounded, totals, peak_phase, peak, reserved, device = _levels(phases, kv, oh, gpus, lay, training)
    parts = rounded[peak_phase]
    bd = MemoryBreakdown(
        weights_bytes=parts["weights"], gradients_bytes=parts["gradients"], optimizer_bytes=parts["optimizer"],
        activations_bytes=parts["activations"], kv_cache_bytes=_round(kv), other_bytes=parts["other"],
    )
    names = {"weights_bytes": "weights", "gradients_bytes": "gradients", "optimizer_bytes": "optimizer states",
             "activations_bytes": "activations", "kv_cache_bytes": "KV cache", "other_bytes": "temporaries"}
    dump = bd.model_dump()
    dominant = names[max(dump, key=lambda k: dump[k])]
    phase_name = "backward" if peak_phase.startswith("backward") else peak_phase
    return MemoryEstimate(
        breakdown=bd, peak_phase=phase_name, phase_peaks_bytes=totals,
        trainable_parameters=trainable, peak_tensor_bytes=peak, reserved_bytes=reserved, device_bytes=device,
        dominant=dominant, gpus=gpus,
        layout={"zero": lay.zero, "tp": lay.tp, "pp": lay.pp, "dp": max(gpus // (lay.tp * lay.pp), 1),
                "offload": lay.offload},
        notes=notes,
    )


def estimate_memory(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                    table: ActivationTable, oh: Overheads) -> MemoryEstimate:
    """Peak memory per GPU of `w` on `gpus` GPUs laid out as `lay`."""
    if w.task == "inference":
        return estimate_inference(arch, p, w, lay, gpus, oh)
    return estimate_training(arch, p, w, lay, gpus, table, oh)


def memory_out(m: MemoryEstimate, cap: int | None) -> MemoryOut:
    """An estimate in the JSON's terms, checked against `cap` bytes of GPU memory (None: no GPU given)."""
    return MemoryOut(**m.breakdown.model_dump(), peak_tensor_bytes=m.peak_tensor_bytes, reserved_bytes=m.reserved_bytes,
                     device_bytes=m.device_bytes, peak_phase=m.peak_phase, phase_peaks_bytes=m.phase_peaks_bytes,
                     dominant=m.dominant, fits=None if cap is None else m.device_bytes <= cap,
                     headroom_bytes=None if cap is None else cap - m.device_bytes)
