"""Peak memory per GPU of a training step: weights, gradients and optimizer states by precision, optimizer,
LoRA/QLoRA and sharding (ZeRO-1/2/3 = FSDP, tensor and pipeline parallel, CPU offload); the activations saved for
backward (core/sizing/activations.py), the LM head's logits and loss, with gradient checkpointing the layer inputs
plus one layer recomputed; the peak is the largest of the phases of a step, with the parts taken at that moment.
Pure."""

from __future__ import annotations

import math

from gpuplan.core.sizing.activations import (Resolved, _coefficients, _compute_bytes, _dropout_mask_bytes_per_token,
                                             _fit_max_seq, _layers_tokens, _per_token, _residual_bytes, regime_of,
                                             resolve)
from gpuplan.core.sizing.head_memory import _head_bytes, _head_terms
from gpuplan.core.sizing.levels import ALLOC_BLOCK, _finish, _reserve_and_device, _round
from gpuplan.core.sizing.lora import lora_params
from gpuplan.core.sizing.params import ParamCount, cnn_feature_elements
from gpuplan.core.sizing.stack import (QloraImpl, fused_activation_saving, head_of, load_peak_bytes, qlora_impl,
                                       qlora_terms)
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, LoraSpec, Workload

#: the moments of a training step whose memory is compared for the peak (TrainingTerms.phase_parts)
PHASES = ("forward", "backward", "backward-layers", "backward-end", "optimizer")


def _trainable(arch: ModelArch, w: Workload) -> int | None:
    """The LoRA adapters' parameters (None: every parameter trains)."""
    if w.task not in ("lora", "qlora"):
        return None
    spec = w.lora or LoraSpec()
    return lora_params(arch, spec.rank, spec.targets)


def _static(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int,
            adapters: int | None = None, qlora: QloraImpl | None = None) -> dict[str, float]:
    """Weights, gradients, optimizer states and optimizer-step temporaries, per GPU. `adapters`: the LoRA
    parameters when already counted (_trainable); `qlora`: how the 4-bit base is held (stack.qlora_impl)."""
    mp = lay.tp * lay.pp
    total = p.total
    lora = w.task in ("lora", "qlora")
    if lora:
        trainable = adapters if adapters is not None else _trainable(arch, w)
        assert trainable is not None
    else:
        trainable = total
    impl = qlora or qlora_impl(w)
    head_w = arch.vocab_size * arch.hidden_size
    # LitGPT's model keeps an LM head of its own beside a tied embedding (frozen, so only LoRA/QLoRA change)
    extra_head = head_w if (lora and impl.separate_head and arch.tie_word_embeddings
                            and head_of(arch, w) == "causal-lm") else 0
    if w.task == "qlora":
        quantized = p.block_linear_weights
        weights = quantized * impl.bytes_per_param + (total - quantized) * 2 + trainable * 4
        if impl.quantize_head and head_of(arch, w) == "causal-lm":
            untied = 0 if arch.tie_word_embeddings else head_w
            weights += (extra_head + untied) * impl.bytes_per_param - untied * 2
    elif lora:
        weights = (total + extra_head) * (4 if w.precision == "fp32" else 2) + trainable * 4
    else:
        weights = total * (2 if w.precision == "bf16" else 4)
    # gradients and optimizer states take the trainable parameters' dtype: fp32 (also LoRA adapters), or bf16
    state_b = 4 if (lora or w.precision != "bf16") else 2
    grad_b = state_b
    # bitsandbytes 8-bit AdamW (paged or not): two 1-byte states plus an fp32 absmax per 2048-element block for
    # each; the paged one allocates them with cudaMallocManaged (bitsandbytes functional.get_paged), outside torch's
    # allocator: torch's peak does not count them and they page to host memory when the GPU runs short
    eight_bit = 2 + 8 / 2048
    per_param_states = {"adamw": 2 * state_b, "adamw-8bit": eight_bit, "paged-adamw-8bit": eight_bit,
                        "adafactor": 0.0, "sgd": state_b}
    optimizer = trainable * per_param_states[w.optimizer]
    if w.optimizer == "adafactor":  # factored second moment: a row and a column vector per matrix
        optimizer = adafactor_state_elements(arch, p, trainable if lora else None) * state_b
    largest = max(p.largest_linear_weight, head_w) if not lora else 0
    temp = _optimizer_temp(w, trainable, largest, state_b)
    gradients = accumulated = trainable * grad_b
    if w.optimizer_in_backward:  # each parameter steps as its gradient is ready, and the gradient is freed: the
        # largest one at a time (LoRA: about one layer's adapters)
        one = largest or trainable / max(arch.num_layers + arch.num_decoder_layers, 1)
        gradients = min(trainable, one) * grad_b
        temp = 0.0
    weights /= mp
    gradients /= mp
    accumulated /= mp
    optimizer /= mp
    temp /= mp
    if lay.zero >= 3:
        weights /= dp
    if lay.zero >= 2:
        gradients /= dp
        accumulated /= dp
    if lay.zero >= 1:
        optimizer /= dp
        temp /= dp
    if lay.offload in ("optimizer", "params"):
        optimizer = 0.0
        temp = 0.0
    if lay.offload == "params":
        weights = 0.0
    paged = 0.0
    if w.optimizer == "paged-adamw-8bit":
        paged, optimizer = optimizer, 0.0
    # `accumulated`: what gradient accumulation keeps between micro-batches (all of them, even when the optimizer
    # steps in backward: torchtune refuses that combination, a loop that allows it cannot free them)
    return {"weights": weights, "gradients": gradients, "optimizer": optimizer, "optimizer_temp": temp,
            "trainable": trainable, "paged": paged, "accumulated": accumulated}


def _optimizer_temp(w: Workload, trainable: int, largest: int, state_b: int) -> float:
    """The optimizer step's temporaries, before sharding."""
    if w.optimizer == "adafactor":  # HF Adafactor works one parameter at a time in fp32: the gradient,
        # its square (the update), and for 16-bit parameters fp32 copies of the parameter and gradient
        return largest * 4 * (4 if state_b == 2 else 2)
    if w.optimizer in ("sgd", "adamw-8bit", "paged-adamw-8bit"):  # in place: momentum SGD; bitsandbytes' kernels
        return 0.0
    if w.optimizer_implementation == "foreach":  # torch._foreach_sqrt(exp_avg_sq): one state-sized list
        return trainable * state_b
    if w.optimizer_implementation == "for-loop":  # one parameter at a time: the largest parameter's size
        return largest * state_b
    return 0.0  # fused kernels update in place


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

    __slots__ = (
        "amp_casts",
        "amp_casts_bwd",
        "beta",
        "ckpt",
        "cnn",
        "cnn_layers",
        "cnn_per_sample",
        "compiled",
        "dequant",
        "dp",
        "embed_per_token",
        "fixed_other",
        "gpus",
        "groups",
        "head",
        "head_grad",
        "hidden",
        "lay",
        "layer_grad",
        "notes",
        "num_channels",
        "offload",
        "pp",
        "resid",
        "retained",
        "seq",
        "static",
        "trainable",
    )

    def __init__(self, arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                 table: ActivationTable, cache: dict[tuple[object, ...], object] | None = None,
                 qlora: QloraImpl | None = None) -> None:
        """`cache`: a dict shared by the terms of one model and workload (the search's), which keeps the parts that
        depend on neither the GPU count nor the ZeRO stage (trainable parameters, per-token activations);
        `qlora`: the 4-bit implementation when not `w.framework`'s (stack.qlora_impl)."""
        notes: list[Note] = []
        if cache is None:
            r = resolve(arch, w)
        else:
            r = cache.get("resolved") or cache.setdefault("resolved", resolve(arch, w))  # type: ignore[assignment]
        self.lay, self.gpus = lay, gpus
        dp = self.dp = max(gpus // (lay.tp * lay.pp), 1)
        if cache is not None and "trainable" not in cache:
            cache["trainable"] = _trainable(arch, w)
        st = self.static = _static(arch, p, w, lay, dp, None if cache is None else cache["trainable"],  # type: ignore[arg-type]
                                   qlora)
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
                        + _dropout_mask_bytes_per_token(arch, seq, eager, _compute_bytes(w))
                        - fused_activation_saving(arch, w, lay.tp))
                kept = full if not ckpt else _per_token(_coefficients(arch, w, True, table, notes), arch, seq, rank,
                                                        lay.tp, _fit_max_seq(arch, w, True))
                self.groups.append((layers, seq, kept, full))
            if cache is not None:
                cache[("groups", lay.tp, ckpt)] = (self.groups, list(notes))
        self.head = _head_terms(arch, r, w, lay.tp)  # type: ignore[arg-type]
        self.beta = _compute_bytes(w)
        self.hidden, self.num_channels, self.resid = arch.hidden_size, arch.num_channels, _residual_bytes(w)

        self.amp_casts, self.amp_casts_bwd = _amp_casts(arch, p, w, lay, dp)
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
        self.fixed_other = zero3_work + ddp_buckets
        self.layer_grad = st["gradients"] / n_layers
        head_grad = 0.0  # the LM head's weight gradient, the first one backward produces
        if w.task not in ("lora", "qlora") and arch.kind == "decoder" and st["trainable"]:
            head_grad = st["gradients"] * arch.vocab_size * arch.hidden_size / st["trainable"]
        if w.optimizer_in_backward:  # gradients are stepped and freed one parameter at a time
            self.layer_grad, head_grad = 0.0, min(head_grad, st["gradients"])
        self.head_grad = head_grad
        self.trainable = st["trainable"]
        self.notes = notes
        self.retained, self.dequant = qlora_terms(arch, p, w, lay.tp, qlora or qlora_impl(w))
        self.offload = bool(w.activation_offload)
        self.compiled = COMPILE_SAVED_FRACTION if w.compile else 1.0

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
            if self.offload:  # activation offloading: the layers in flight stay, the others wait in host memory
                layers = min(layers, OFFLOAD_LAYERS_ON_GPU)
            if not self.ckpt:  # compiled layers keep fewer intermediates; checkpointed ones keep their inputs anyway
                kept *= self.compiled
            saved_layer += layers * in_flight * tokens * kept
            one_layer = max(one_layer, tokens * full * self.compiled)
        head_saved, head_fwd, head_bwd = _head_bytes(self.head, batch)
        embed = batch * self.seq * self.hidden * self.resid
        if self.cnn:  # the input images
            embed = batch * self.num_channels * self.seq * self.seq * self.resid
        activations = saved_layer + head_saved + embed + batch * self.seq * self.retained
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

    def load_device_bytes(self, arch: ModelArch, p: ParamCount, w: Workload, oh: Overheads) -> int:
        """What `estimate_training(...).load_device_bytes` is (loading the checkpoint; no micro-batch in it): the
        search's `fits` needs the larger of it and `device_bytes`."""
        load = load_peak_bytes(arch, p, w, self.lay, _round(self.static["weights"]))
        return _reserve_and_device(load, 0, oh, self.gpus, self.lay, False)[1]


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
                      table: ActivationTable, oh: Overheads, qlora: QloraImpl | None = None) -> MemoryEstimate:
    terms = TrainingTerms(arch, p, w, lay, gpus, table, qlora=qlora)
    r = resolve(arch, w)
    phases = terms.phases(r.batch, _microbatches(w, r, terms.dp))
    return _finish(phases, oh, gpus, lay, training=True, notes=list(terms.notes), kv=0.0, trainable=terms.trainable)


def _microbatches(w: Workload, r: Resolved, dp: int) -> int:
    if w.global_batch_size:
        return max(w.global_batch_size // (r.batch * dp), 1)
    return 1


