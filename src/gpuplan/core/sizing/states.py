"""The model states of a training step on one GPU: weights, gradients, optimizer states and the optimizer step's
temporaries, by precision, optimizer and LoRA/QLoRA (`unsharded_states`), then divided over the layout's tensor and
pipeline parallel degrees, ZeRO stage and CPU offload (`shard_states`). Pure."""

from __future__ import annotations

import math

from gpuplan.core.sizing.levels import ALLOC_BLOCK
from gpuplan.core.sizing.lora import lora_params
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.stack import QloraImpl, head_of, qlora_impl
from gpuplan.schema.estimate import Note
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, LoraSpec, Workload


class States:
    """The model states of a training step, in bytes (`unsharded_states`: the whole model; `shard_states`: per GPU)."""

    __slots__ = ("accumulated", "gradients", "optimizer", "optimizer_temp", "paged", "trainable", "weights")

    def __init__(self, weights: float, gradients: float, optimizer: float, optimizer_temp: float, trainable: int,
                 accumulated: float, paged: float = 0.0) -> None:
        self.weights = weights
        self.gradients = gradients  # what is alive at once (one parameter's, when the optimizer steps in backward)
        self.optimizer = optimizer
        self.optimizer_temp = optimizer_temp  # the optimizer step's temporaries
        self.trainable = trainable  # parameters
        self.accumulated = accumulated  # what gradient accumulation keeps between micro-batches
        self.paged = paged  # paged 8-bit AdamW's states, outside the peak


#: a phase's gradient bytes at each of the PHASES of a step (core/sizing/layout_memory.py), rounded to the
#: allocator's blocks
PhaseGradients = tuple[int, int, int, int, int]


class LayoutStates:
    """What a layout's memory is made of whatever the recomputation (`layout_states`)."""

    __slots__ = ("fixed_other", "gradients_accumulating", "gradients_one", "head_grad", "layer_grad", "notes",
                 "optimizer", "states", "weights")

    def __init__(self, states: States, fixed_other: float, layer_grad: float, head_grad: float, notes: list[Note],
                 weights: int, optimizer: int, gradients_one: PhaseGradients,
                 gradients_accumulating: PhaseGradients) -> None:
        self.states = states  # per GPU
        self.fixed_other = fixed_other  # FSDP's gathered blocks, DDP's buckets
        self.layer_grad = layer_grad  # one layer's weight gradients
        self.head_grad = head_grad  # the LM head's
        self.notes = notes
        #: the weights and the optimizer states, each rounded to the allocator's blocks
        self.weights = weights
        self.optimizer = optimizer
        #: each phase's gradients, rounded, with one micro-batch per step and with gradient accumulation
        self.gradients_one = gradients_one
        self.gradients_accumulating = gradients_accumulating


def trainable_adapters(arch: ModelArch, w: Workload) -> int | None:
    """The LoRA adapters' parameters (None: every parameter trains)."""
    if w.task not in ("lora", "qlora"):
        return None
    spec = w.lora or LoraSpec()
    return lora_params(arch, spec.rank, spec.targets)


def unsharded_states(arch: ModelArch, p: ParamCount, w: Workload, adapters: int | None = None,
                     qlora: QloraImpl | None = None) -> States:
    """Weights, gradients, optimizer states and optimizer-step temporaries of the whole model, before any layout
    divides them. `adapters`: the LoRA parameters when already counted (trainable_adapters); `qlora`: how the
    4-bit base is held (stack.qlora_impl)."""
    total = p.total
    lora = w.task in ("lora", "qlora")
    trainable = total
    if lora:
        counted = adapters if adapters is not None else trainable_adapters(arch, w)
        assert counted is not None
        trainable = counted
    impl = qlora or qlora_impl(w)
    head_w = arch.vocab_size * arch.hidden_size
    # LitGPT's model keeps an LM head of its own beside a tied embedding (frozen, so only LoRA/QLoRA change)
    extra_head = head_w if (lora and impl.separate_head and arch.tie_word_embeddings
                            and head_of(arch, w) == "causal-lm") else 0
    weights: float
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
    optimizer: float = trainable * per_param_states[w.optimizer]
    if w.optimizer == "adafactor":  # factored second moment: a row and a column vector per matrix
        optimizer = adafactor_state_elements(arch, p, trainable if lora else None) * state_b
    largest = max(p.largest_linear_weight, head_w) if not lora else 0
    temp = _optimizer_temp(w, trainable, largest, state_b)
    gradients: float = trainable * grad_b
    accumulated = gradients
    if w.optimizer_in_backward:  # each parameter steps as its gradient is ready, and the gradient is freed: the
        # largest one at a time (LoRA: about one layer's adapters)
        one = largest or trainable / max(arch.num_layers + arch.num_decoder_layers, 1)
        gradients = min(trainable, one) * grad_b
        temp = 0.0
    return States(weights=weights, gradients=gradients, optimizer=optimizer, optimizer_temp=temp, trainable=trainable,
                  accumulated=accumulated)


def shard_states(base: States, w: Workload, lay: Layout, dp: int) -> States:
    """`unsharded_states` per GPU on layout `lay` with `dp` data-parallel ranks."""
    mp = lay.tp * lay.pp
    weights, gradients, accumulated = base.weights, base.gradients, base.accumulated
    optimizer, temp = base.optimizer, base.optimizer_temp
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
        # DeepSpeed ZeRO-Offload / ZeRO-Infinity (deepspeed/runtime/zero/stage3.py,
        # estimate_zero3_model_states_mem_needs: with offload_optimizer the GPU holds 2 bytes per parameter, its
        # partition of the 16-bit weights, plus the largest layer gathered; with offload_param too, only that layer):
        # the optimizer states, the fp32 master weights and the gradients live in host memory, the gradients are
        # copied there as they are reduced (and accumulated there between micro-batches)
        optimizer = 0.0
        temp = 0.0
        gradients = 0.0
        accumulated = 0.0
        if w.task not in ("lora", "qlora") and w.precision in ("bf16-mixed", "fp16-mixed"):
            weights /= 2  # the fp32 master copy moved to the host with the optimizer: the 16-bit working copy stays
    if lay.offload == "params":
        weights = 0.0
    paged = 0.0
    if w.optimizer == "paged-adamw-8bit":
        paged, optimizer = optimizer, 0.0
    # `accumulated`: what gradient accumulation keeps between micro-batches (all of them, even when the optimizer
    # steps in backward: torchtune refuses that combination, a loop that allows it cannot free them)
    return States(weights, gradients, optimizer, temp, base.trainable, accumulated, paged)


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


def layout_states(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, dp: int, base: States) -> LayoutStates:
    """What a layout's memory is made of whatever the recomputation: the model states per GPU, the fixed temporaries
    (FSDP's gathered blocks, DDP's buckets), one layer's and the head's weight gradients, their notes, and, rounded as
    `round_block` rounds them, the weights, the optimizer states and each phase's gradients, with one micro-batch
    per step and with several."""
    notes: list[Note] = []
    st = shard_states(base, w, lay, dp)
    n_layers = max(arch.num_layers + arch.num_decoder_layers, 1)
    zero3_work = 0.0
    if lay.zero >= 3 and dp > 1:  # FSDP all-gathers one block (and prefetches the next)
        zero3_work = 2 * p.blocks / n_layers * 2 / lay.tp
    ddp_buckets = st.gradients if (lay.zero == 0 and dp > 1) else 0.0
    if ddp_buckets:
        notes.append(DDP_BUCKETS_NOTE)
    if st.paged:
        notes.append(Note(code="paged-optimizer", message=f"paged 8-bit AdamW keeps its states "
                          f"({st.paged / 2**30:.1f} GiB per GPU) in CUDA unified memory, outside the peak: on the "
                          "GPU while there is room, paged to host memory (and slower) when there is not"))
    layer_grad = st.gradients / n_layers
    head_grad = 0.0  # the LM head's weight gradient, the first one backward produces
    if w.task not in ("lora", "qlora") and arch.kind == "decoder" and st.trainable:
        head_grad = st.gradients * arch.vocab_size * arch.hidden_size / st.trainable
    if w.optimizer_in_backward:  # gradients are stepped and freed one parameter at a time
        layer_grad, head_grad = 0.0, min(head_grad, st.gradients)
    b, ceil = ALLOC_BLOCK, math.ceil
    G, A, lg, hg = st.gradients, st.accumulated, layer_grad, head_grad
    # each phase's gradients (core/sizing/layout_memory.PHASES): none in forward and at the loss but what
    # accumulation keeps, the head's (or the accumulated) at the top layer, all but the first layer's at the first,
    # all of them at the optimizer step
    one = (0, 0, ceil(max(0.0, hg) / b) * b, ceil((G - lg) / b) * b, ceil(G / b) * b)
    a = ceil(A / b) * b
    accumulating = (a, a, ceil(max(A, hg) / b) * b, ceil((A - lg) / b) * b, a)
    return LayoutStates(st, zero3_work + ddp_buckets, layer_grad, head_grad, notes, ceil(st.weights / b) * b,
                        ceil(st.optimizer / b) * b, one, accumulating)


__all__ = ["DDP_BUCKETS_NOTE", "LayoutStates", "PhaseGradients", "States", "adafactor_state_elements", "layout_states",
           "shard_states", "trainable_adapters", "unsharded_states"]
