"""The memory kernel of a training step: what one layout holds on each GPU at each moment of a step, for any
micro-batch, from the terms that do not grow with the micro-batch (computed once per layout from the parts
core/sizing/training_memory.py computes and caches, rounded to the allocator's blocks where the estimate rounds them);
the micro-batch's activations are linear in it, so they are kept as bytes per sequence.

One formula: `step_peaks` computes each phase of a step (the estimate's breakdown, which levels.finish turns into its
levels) and the step's tensor peak, for all the micro-batches of a layout at once; `device_bytes_of` adds the
allocator's reserve and what lies outside it (levels.reserved_bytes_of, levels.outside_bytes), for any number of
peaks at once (the search asks it of every micro-batch of every layout). `LayoutMemory` keeps a layout's parts for
the estimate. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from math import ceil

from gpuplan.core.sizing.head_memory import Head
from gpuplan.core.sizing.levels import ALLOC_BLOCK, outside_bytes, reserve_and_device, reserved_bytes_of
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.stack import load_peak_bytes
from gpuplan.core.sizing.states import LayoutStates
from gpuplan.schema.estimate import Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload

#: the moments of a training step whose memory is compared for the peak, in the order the first of equals wins
PHASES = ("forward", "backward", "backward-layers", "backward-end", "optimizer")


class Allocator:
    """What a training step's device bytes take of the overheads (a search reads them once)."""

    __slots__ = ("context", "cublas", "fraction", "nccl", "rounding")

    def __init__(self, fraction: float, rounding: int, cublas: int, context: int, nccl: int) -> None:
        self.fraction = fraction  # the allocator's reserve, as a fraction of what churns
        self.rounding = rounding  # its segments
        self.cublas = cublas  # cuBLAS's workspace
        self.context = context  # the CUDA context
        self.nccl = nccl  # one NCCL communicator

    @classmethod
    def of(cls, oh: Overheads) -> Allocator:
        return cls(oh.allocator_fraction_training, oh.allocator_rounding_bytes, oh.cublas_workspace_bytes,
                   oh.cuda_context_bytes, oh.nccl_bytes_per_communicator)


class LayerGroup:
    """Layers alike (an encoder-decoder has two groups): how many, their tokens per sequence, the bytes per token
    one of them saves for backward and holds in full."""

    __slots__ = ("full", "kept", "layers", "seq")

    def __init__(self, layers: float, seq: int, kept: float, full: float) -> None:
        self.layers = layers
        self.seq = seq
        self.kept = kept
        self.full = full


class PerSequence:
    """What each sequence of the micro-batch adds, in bytes."""

    __slots__ = ("embed", "head_backward", "head_forward", "head_saved", "one_layer", "retained", "saved")

    def __init__(self, saved: float, one_layer: float, head_saved: float, head_forward: float, head_backward: float,
                 embed: float, retained: float) -> None:
        self.saved = saved  # saved by the layers, before 1F1B's share in flight
        self.one_layer = one_layer  # the largest layer in full
        self.head_saved = head_saved
        self.head_forward = head_forward
        self.head_backward = head_backward
        self.embed = embed  # the embedding's output (a CNN's input images)
        self.retained = retained  # what an old bitsandbytes keeps


class TpTerms:
    """What a training step's activation memory is made of for one tensor-parallel degree and recomputation choice,
    whatever the rest of the layout (training_memory.tp_terms)."""

    __slots__ = ("cnn", "cnn_layers", "cnn_per_sample", "compiled", "dequant", "groups", "head", "notes", "offload",
                 "per_seq", "retained", "seq")

    def __init__(self, cnn: bool, seq: int, cnn_per_sample: tuple[float, float], cnn_layers: int,
                 groups: list[LayerGroup], notes: list[Note], head: Head, offload: bool, compiled: float,
                 retained: float, dequant: float, per_seq: PerSequence) -> None:
        self.cnn = cnn
        self.seq = seq  # tokens per sequence (a CNN's image size)
        self.cnn_per_sample = cnn_per_sample  # a CNN's bytes per element and elements per sample
        self.cnn_layers = cnn_layers
        self.groups = groups
        self.notes = notes  # of the activation coefficients used
        self.head = head
        self.offload = offload  # activation offloading
        self.compiled = compiled  # torch.compile's saved fraction (1: not compiled)
        self.retained = retained  # the bitsandbytes terms: bytes per token an old bitsandbytes keeps, ...
        self.dequant = dequant  # ... and the dequantized weights alive during a 4-bit matmul
        self.per_seq = per_seq


class AmpCasts:
    """Autocast's 16-bit copies of fp32 weights alive in forward and in backward."""

    __slots__ = ("backward", "forward")

    def __init__(self, forward: float, backward: float) -> None:
        self.forward = forward
        self.backward = backward


class PhaseBytes:
    """What a phase of a step holds besides the weights and optimizer states, each rounded to the allocator's
    blocks."""

    __slots__ = ("activations", "gradients", "other")

    def __init__(self, gradients: int, activations: int, other: int) -> None:
        self.gradients = gradients
        self.activations = activations
        self.other = other


def step_peaks(states: LayoutStates, terms: TpTerms, amp: AmpCasts, pp: int, ckpt: bool,
               batches: Iterable[tuple[int, int]], phases: list[tuple[PhaseBytes, ...]] | None = None,
               out: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """The tensor peak per GPU of a layout's step (its parts: `states`, `terms`, `amp`; `pp` pipeline stages,
    recomputation or not) for each (micro-batch, micro-batches per step) of `batches`, and what of it is allocated
    and freed within the step: the largest of the PHASES of the step, the first of equals. The one formula of a
    training step's memory (`device_bytes_of` adds the allocator's reserve and what lies outside it): with `phases`,
    each one's `PhaseBytes` are appended to it (the estimate's breakdown). A function of the parts, not a method: the
    search calls it once per layout it makes, for all its micro-batches, appending to its `out`."""
    b, ceil_ = ALLOC_BLOCK, ceil  # each part rounded to the allocator's blocks (levels.round_block, written out)
    cnn, cnn_layers, dq, ps = terms.cnn, terms.cnn_layers, terms.dequant, terms.per_seq
    saved, one, hs, hf, hb, emb, kept = ps.saved, ps.one_layer, ps.head_saved, ps.head_forward, ps.head_backward, \
        ps.embed, ps.retained
    st, fo, one_mb, accumulating = states.states, states.fixed_other, states.gradients_one, \
        states.gradients_accumulating
    amp_fwd, amp_bwd = amp.forward, amp.backward
    fixed = states.weights + states.reference + states.optimizer
    # the temporaries that do not grow with the micro-batch
    o3, o4 = ceil_((amp_bwd + fo + dq) / b) * b, ceil_((fo + dq) / b) * b
    o5 = ceil_((st.optimizer_temp + fo) / b) * b
    peaks = [] if out is None else out
    for batch, microbatches in batches:
        g0, g1, g2, g3, g4 = one_mb if microbatches == 1 else accumulating
        # bytes saved over all layers; 1F1B: the first stage holds pp micro-batches (without stages the factor is
        # 1.0, and the product the same)
        saved_layer = batch * saved if pp == 1 else batch * (min(pp, microbatches) / pp) * saved
        # the largest single layer's activations (recomputed during backward with checkpointing)
        one_layer = saved_layer / cnn_layers if cnn else batch * one
        head_saved, embed = batch * hs, batch * emb
        activations = saved_layer + head_saved + embed + batch * kept
        a12 = ceil_(activations / b) * b  # forward, and backward through the loss
        a3 = ceil_((activations - head_saved + (one_layer if ckpt else 0.0)) / b) * b  # the top layer's backward
        a4 = ceil_((embed + one_layer) / b) * b  # the first layer's backward
        # the temporaries: autocast's weight copies, the logits and their fp32 copies in forward, their fp32
        # gradients at the loss
        o1 = ceil_((amp_fwd + batch * hf + fo + dq) / b) * b
        o2 = ceil_((amp_bwd + batch * hb + fo + dq) / b) * b
        if phases is not None:
            phases.append((PhaseBytes(g0, a12, o1), PhaseBytes(g1, a12, o2), PhaseBytes(g2, a3, o3),
                           PhaseBytes(g3, a4, o4), PhaseBytes(g4, 0, o5)))
        # the first phase with the largest total, and what churns in it (PHASES' order)
        top, churn = g0 + a12 + o1, a12 + o1
        total = g1 + a12 + o2
        if total > top:
            top, churn = total, a12 + o2
        total = g2 + a3 + o3
        if total > top:
            top, churn = total, a3 + o3
        total = g3 + a4 + o4
        if total > top:
            top, churn = total, a4 + o4
        total = g4 + o5
        if total > top:
            top, churn = total, o5
        peaks.append((fixed + top, churn))
    return peaks


def device_bytes_of(peaks: Iterable[tuple[int, int]], alloc: Allocator, gpus: int, tp: int, pp: int) -> list[int]:
    """The device bytes per GPU of each (tensor peak, churn) of `step_peaks` on `gpus` GPUs with `tp`-way tensor and
    `pp`-way pipeline parallelism: the allocator's reserve, the CUDA context and the communicators (levels)."""
    return reserved_bytes_of(peaks, alloc.fraction, alloc.rounding, alloc.cublas,
                             outside_bytes(alloc.context, alloc.nccl, gpus, tp, pp))


class LayoutMemory:
    """One layout's step memory per GPU (a layout, GPU count and recomputation choice, for one model and workload):
    its parts, and `device_bytes_of` over them."""

    __slots__ = ("alloc", "amp", "ckpt", "gpus", "lay", "outside", "states", "terms")

    def __init__(self, states: LayoutStates, terms: TpTerms, amp: AmpCasts, lay: Layout, gpus: int, ckpt: bool,
                 alloc: Allocator) -> None:
        self.states, self.terms, self.amp, self.lay, self.gpus, self.ckpt = states, terms, amp, lay, gpus, ckpt
        self.alloc = alloc
        self.outside = outside_bytes(alloc.context, alloc.nccl, gpus, lay.tp, lay.pp)

    @property
    def notes(self) -> list[Note]:
        """The notes of the activation coefficients used, then the states'."""
        return self.terms.notes + self.states.notes

    @property
    def trainable(self) -> int:
        return self.states.states.trainable

    def device_bytes_of(self, batches: Iterable[tuple[int, int]],
                        phases: list[tuple[PhaseBytes, ...]] | None = None) -> list[int]:
        """The device bytes per GPU of each (micro-batch, micro-batches per step) of `batches` (`step_peaks`,
        `device_bytes_of`); with `phases`, each one's `PhaseBytes` are appended to it."""
        a = self.alloc
        return reserved_bytes_of(step_peaks(self.states, self.terms, self.amp, self.lay.pp, self.ckpt, batches, phases),
                                 a.fraction, a.rounding, a.cublas, self.outside)

    def device_bytes(self, batch: int, microbatches: int) -> int:
        """What `estimate_training(...).device_bytes` is for this micro-batch, with no result objects built."""
        return self.device_bytes_of(((batch, microbatches),))[0]

    def phase_bytes(self, batch: int, microbatches: int) -> tuple[PhaseBytes, ...]:
        """Each of PHASES' gradients, activations and temporaries for `batch` sequences per micro-batch and
        `microbatches` micro-batches per optimizer step (the weights and optimizer states are the same in all)."""
        out: list[tuple[PhaseBytes, ...]] = []
        self.device_bytes_of(((batch, microbatches),), out)
        return out[0]

    def phases(self, batch: int, microbatches: int) -> dict[str, dict[str, float]]:
        """Bytes by part at each of PHASES (levels.finish's input)."""
        s = self.states
        return {name: {"weights": s.weights, "reference": s.reference, "optimizer": s.optimizer,
                       "gradients": b.gradients, "activations": b.activations, "other": b.other}
                for name, b in zip(PHASES, self.phase_bytes(batch, microbatches))}

    def load_device_bytes(self, arch: ModelArch, p: ParamCount, w: Workload, oh: Overheads) -> int:
        """What `estimate_memory(...).load_device_bytes` is (loading the checkpoint; no micro-batch in it)."""
        return reserve_and_device(load_peak_bytes(arch, p, w, self.lay, self.states.weights), 0, oh, self.gpus,
                                  self.lay, False)[1]


__all__ = ["PHASES", "Allocator", "AmpCasts", "LayerGroup", "LayoutMemory", "PerSequence", "PhaseBytes", "TpTerms",
           "device_bytes_of", "step_peaks"]
