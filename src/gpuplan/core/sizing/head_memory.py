"""The LM head's memory in a training step: the final norm, the head's logits and the loss over them, standard or
chunked, eager or compiled. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.activations import Resolved, compute_bytes
from gpuplan.core.sizing.stack import LM_HEADS, head_of
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Workload


class Head:
    """What the LM head's memory is made of (`head_terms`)."""

    __slots__ = ("beta", "chunked", "compiled", "hidden", "lm", "preference", "tokens_per_seq", "vocab")

    def __init__(self, lm: bool, tokens_per_seq: int, vocab: float, hidden: int, beta: int, chunked: bool,
                 compiled: bool, preference: str | None = None) -> None:
        self.lm = lm  # an LM head (classification heads, of encoders, ViTs, CNNs, are tiny)
        self.tokens_per_seq = tokens_per_seq  # the tokens it sees per sequence
        self.vocab = vocab  # the vocabulary per GPU
        self.hidden = hidden
        self.beta = beta  # bytes per element of its output
        self.chunked = chunked  # a chunked loss
        self.compiled = compiled
        #: DPO's loss over the sequences' log-probabilities (TRL's selective_log_softmax) in place of cross-entropy,
        #: on fp32 logits (mixed precision: accelerate returns the outputs in fp32) or 16-bit ones (pure bf16)
        self.preference = preference


def head_terms(arch: ModelArch, r: Resolved, w: Workload, tp: int) -> Head:
    """The LM head's terms for `r`'s sequences on `tp`-way tensor parallel GPUs."""
    tokens_per_seq = r.target if arch.kind == "encoder-decoder" else r.seq
    return Head(lm=head_of(arch, w) in LM_HEADS, tokens_per_seq=tokens_per_seq, vocab=arch.vocab_size / tp,
                hidden=arch.hidden_size, beta=compute_bytes(w), chunked=w.loss == "chunked", compiled=bool(w.compile),
                preference=_preference(w))


def _preference(w: Workload) -> str | None:
    """How a DPO policy's loss takes its logits: "fp32" (mixed precision or fp32: accelerate's wrapped forward
    returns fp32 logits), "16bit" (pure bf16), None (cross-entropy: no DPO, or a chunked loss)."""
    if w.dpo is None or w.loss == "chunked":
        return None
    return "16bit" if w.precision == "bf16" else "fp32"


#: chunked cross-entropy: the chunks a loss splits the logits into (torchtune CEWithChunkedOutputLoss num_output_chunks
#: = 8; LitGPT lm_head_chunk_size = 128 tokens, finer): one chunk's fp32 working set is alive at a time
LOSS_CHUNKS = 8


def head_bytes(head: Head, batch: int) -> tuple[float, float, float]:
    """(saved, forward transient, backward transient) bytes of the final norm, LM head, logits and loss."""
    if not head.lm:
        return 0.0, 0.0, 0.0
    tokens, v, hidden, beta = batch * head.tokens_per_seq, head.vocab, head.hidden, head.beta
    saved = tokens * (4 * v + 3 * 4 * hidden)  # fp32 log-softmax output; final norm + head input
    if head.chunked and head.compiled:  # a compiled chunk's loss keeps its 16-bit logits (and a logsumexp),
        # no fp32 copy
        return (tokens * (beta * v + 3 * 4 * hidden), tokens * v * beta / LOSS_CHUNKS,
                2 * tokens * v * beta / LOSS_CHUNKS)
    if head.chunked:  # eager chunks keep an fp32 log-softmax each (torchtune) or 16-bit logits and log-probs (LitGPT);
        # the upcast and the gradients come and go one chunk at a time
        return saved, tokens * v * (beta + 4) / LOSS_CHUNKS, 2 * tokens * v * 4 / LOSS_CHUNKS
    if head.preference == "16bit":
        # DPO in pure bf16: TRL's selective_log_softmax takes a 16-bit log_softmax row by row (no fp32 copy); each
        # row's output is saved, the gradients come back 16-bit (traced, tests/trace/test_dpo_trace.py)
        return tokens * (2 * v + 3 * 4 * hidden), tokens * v * 2, 2 * tokens * v * 2
    logits = tokens * v * beta  # the head's output, alive until the loss is taken
    upcast = 0 if beta == 4 else tokens * v * 4  # the loss upcasts 16-bit logits to fp32
    fwd = logits + upcast
    bwd = 2 * tokens * v * 4  # fp32 gradients of the log-softmax output and input (the logits are freed)
    if head.preference == "fp32":  # DPO (TRL selective_log_softmax over fp32 logits): the gather's backward
        # scatters into a full-size fp32 gradient and the per-row logsumexps' come back stacked into another,
        # summed into the logits' own: one more fp32 logits-sized buffer than cross-entropy's backward (traced,
        # tests/trace/test_dpo_trace.py)
        bwd += tokens * v * 4
    return saved, fwd, bwd


__all__ = ["LOSS_CHUNKS", "Head", "head_bytes", "head_terms"]
