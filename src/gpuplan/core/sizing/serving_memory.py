"""Peak memory per GPU of serving: weights by dtype (quantization metadata included), the KV cache (GQA, sliding
windows, its own dtype) and the largest prefill temporaries. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.activations import resolve
from gpuplan.core.sizing.levels import _finish
from gpuplan.core.sizing.params import ParamCount
from gpuplan.schema.estimate import MemoryEstimate, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload

#: int8 (LLM.int8 / fp8 row-wise): 1 byte + a 4-byte scale per output row (negligible per param)
#: int4 (GPTQ/AWQ, group size 128): 4 bits + fp16 scale and 4-bit zero per 128 weights
INT4_BYTES_PER_PARAM = 0.5 + (2 + 0.5) / 128
WEIGHT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": INT4_BYTES_PER_PARAM}


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
