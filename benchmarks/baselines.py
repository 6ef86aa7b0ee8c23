"""The formulas of two public estimators, as comparison columns for benchmarks/accuracy.py.

Both are re-implemented from their documented formulas (see ../shared/research/estimators.md s1.1, s1.2);
neither tool's code is used. None means the tool gives no answer for that case.

* Accelerate `estimate-memory` (huggingface/accelerate, src/accelerate/commands/estimate.py): exact parameter
  bytes; training with Adam reports the max of its stages: 16 B/param in fp32, 8 B/param in fp16/bf16; no
  activations, no context, no LoRA. Inference: weights in the dtype.
* llm-analysis (cli99/llm-analysis, analysis.py): weights + (master 4 B + Adam 8 B) per param + max(activations,
  fp32 gradients) + the loss's backward buffer; activations per layer with FlashAttention (its default);
  no LoRA, no CUDA context (a lower bound by design). Inference: weights + KV cache.
"""

from __future__ import annotations

from gpuplan.core.sizing.params import ParamCount
from gpuplan.schema.model import ModelArch


def accelerate_bytes(p: ParamCount, task: str, precision: str, weights_dtype: str | None) -> float | None:
    if task == "inference":
        return p.total * {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1, "int4": 0.5}.get(weights_dtype or "bf16", 2)
    if task in ("lora", "qlora"):
        return None
    return p.total * (16 if precision == "fp32" else 8)


def llm_analysis_bytes(arch: ModelArch, p: ParamCount, task: str, precision: str, batch: int, seq: int,
                       ckpt: bool, dp: int = 1, zero: int = 0, kv_bytes: float = 0.0) -> float | None:
    if task in ("lora", "qlora"):
        return None
    wb = 4 if precision == "fp32" else 2
    if task == "inference":
        return p.total * wb + kv_bytes
    h, a, i, v, L = arch.hidden_size, arch.num_heads, arch.intermediate_size, arch.vocab_size, arch.num_layers
    sbh = seq * batch * h
    if ckpt:
        act_layer = sbh * wb
    else:
        attn = (sbh + 4 * sbh) * wb + (2 * sbh + 4 * a * seq * batch) * wb
        if arch.attention_dropout > 0:
            attn += sbh
        mlp = sbh * wb + 2 * wb * i * seq * batch
        if arch.hidden_dropout > 0:
            mlp += sbh
        act_layer = attn + mlp + 2 * sbh * 4
    act = L * act_layer + sbh * wb + v * batch * seq * wb
    weights = p.total * wb / (dp if zero >= 3 else 1)
    opt = p.total * 12 / (dp if zero >= 1 else 1)
    grads = p.total * 4 / (dp if zero >= 2 else 1)
    loss_bwd = seq * batch * v * wb
    return weights + opt + max(act, grads) + loss_bwd
