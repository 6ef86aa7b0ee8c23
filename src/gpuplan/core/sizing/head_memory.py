"""The LM head's memory in a training step: the final norm, the head's logits and the loss over them, standard or
chunked, eager or compiled. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.activations import Resolved, compute_bytes
from gpuplan.core.sizing.stack import LM_HEADS, head_of
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Workload

Head = tuple[bool, int, float, float, int, bool, bool]


def head_terms(arch: ModelArch, r: Resolved, w: Workload, tp: int) -> Head:
    """(has an LM head, tokens per sequence it sees, vocabulary per GPU, hidden width, bytes per element of its
    output, chunked loss, compiled)."""
    tokens_per_seq = r.target if arch.kind == "encoder-decoder" else r.seq
    lm = head_of(arch, w) in LM_HEADS  # classification heads (encoders, ViTs, CNNs) are tiny
    return (lm, tokens_per_seq, arch.vocab_size / tp, arch.hidden_size, compute_bytes(w), w.loss == "chunked",
            bool(w.compile))


#: chunked cross-entropy: the chunks a loss splits the logits into (torchtune CEWithChunkedOutputLoss num_output_chunks
#: = 8; LitGPT lm_head_chunk_size = 128 tokens, finer): one chunk's fp32 working set is alive at a time
LOSS_CHUNKS = 8


def head_bytes(head: Head, batch: int) -> tuple[float, float, float]:
    """(saved, forward transient, backward transient) bytes of the final norm, LM head, logits and loss."""
    lm, tokens_per_seq, v, hidden, beta, chunked, compiled = head
    if not lm:
        return 0.0, 0.0, 0.0
    tokens = batch * tokens_per_seq
    saved = tokens * (4 * v + 3 * 4 * hidden)  # fp32 log-softmax output; final norm + head input
    if chunked and compiled:  # a compiled chunk's loss keeps its 16-bit logits (and a logsumexp), no fp32 copy
        return tokens * (beta * v + 3 * 4 * hidden), tokens * v * beta / LOSS_CHUNKS, 2 * tokens * v * beta / LOSS_CHUNKS
    if chunked:  # eager chunks keep an fp32 log-softmax each (torchtune) or 16-bit logits and log-probs (LitGPT);
        # the upcast and the gradients come and go one chunk at a time
        return saved, tokens * v * (beta + 4) / LOSS_CHUNKS, 2 * tokens * v * 4 / LOSS_CHUNKS
    logits = tokens * v * beta  # the head's output, alive until the loss is taken
    upcast = 0 if beta == 4 else tokens * v * 4  # the loss upcasts 16-bit logits to fp32
    fwd = logits + upcast
    bwd = 2 * tokens * v * 4  # fp32 gradients of the log-softmax output and input (the logits are freed)
    return saved, fwd, bwd


__all__ = ["LOSS_CHUNKS", "Head"]
