"""FLOPs of a model per token, for training and inference, from its architecture.

Conventions (one multiply-add = 2 FLOPs):
- forward linear FLOPs per token = 2 x the weight-matrix parameters a token passes through: embedding
  tables excluded (a lookup is free), a tied LM head included (it is still a matmul), biases and norms
  excluded (no matmul); MoE: routed experts only.
- attention scores and the weighted sum: 4 x q_dim x (keys attended) per token and layer. A causal
  decoder attends on average to (s + 1) / 2 keys with SDPA/flash kernels, which skip the masked half;
  eager attention computes the full s x s matrix and masks it, so it does all of it. A sliding window
  caps the keys at the window. Multi-head latent attention (DeepSeek-V3) as it trains and prefills (the latent
  expanded by kv_b_proj, which is counted with the weights): scores over qk_nope + qk_rope per head, the weighted
  sum over v_head_dim, i.e. 2 x heads x (qk_head_dim + v_head_dim) per key.
- training = forward + backward; backward costs 2 x forward for layers with trainable weights (input and
  weight gradients) and 1 x forward for frozen ones (input gradients only: LoRA's base, QLoRA's NF4 base);
  attention has no weights and costs 2 x forward in backward. Gradient checkpointing re-runs each block's
  forward once more (the hardware does it; the model FLOPs MFU counts do not).
- CNNs: convolution MACs from the stage shapes, x2.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuplan.core.sizing.params import ParamCount, resnet_blocks
from gpuplan.schema.model import ModelArch


class Flops(BaseModel):
    """FLOPs per sample of a training step or a forward pass, split where the backward rule differs."""

    model_config = ConfigDict(frozen=True)

    tokens: int  # tokens per sample (the sequence; for encoder-decoders source + target)
    linear_forward: float  # matmuls against weights in the blocks (and the head)
    attention_forward: float  # scores and weighted sum
    head_forward: float  # LM/classification head alone (part of linear_forward)

    @property
    def forward(self) -> float:
        return self.linear_forward + self.attention_forward


class TrainingFlops(BaseModel):
    """Per token: the model FLOPs (what MFU counts) and the hardware FLOPs (with recomputation)."""

    model_config = ConfigDict(frozen=True)

    model_per_token: float
    hardware_per_token: float
    forward_per_token: float


def _attended(seq: int, causal: bool, eager: bool, window: int | None) -> float:
    """Average keys one query attends to."""
    if not causal:
        return float(seq)
    if window and window < seq:
        # each query attends to min(pos + 1, window) keys
        return (window * (window + 1) / 2 + (seq - window) * window) / seq if not eager else float(seq)
    return float(seq) if eager else (seq + 1) / 2


def attention_flops_per_key(arch: ModelArch) -> int:
    """Forward FLOPs of one query against one key in one layer: scores and weighted sum (4 x q_dim; MLA:
    2 x heads x (qk_head_dim + v_head_dim))."""
    if arch.mla is not None:
        return 2 * arch.num_heads * (arch.mla.qk_head_dim + arch.mla.v_head_dim)
    return 4 * arch.q_dim


def _attention_per_token(arch: ModelArch, seq: int, eager: bool) -> float:
    """Attention FLOPs per token summed over the decoder/encoder layers (self-attention only)."""
    causal = arch.kind == "decoder"
    full = _attended(seq, causal, eager, None)
    if arch.sliding_window and arch.sliding_window_layers:
        sw = _attended(seq, causal, eager, arch.sliding_window)
        n_sw = min(arch.sliding_window_layers, arch.num_layers)
        keys = n_sw * sw + (arch.num_layers - n_sw) * full
    else:
        keys = arch.num_layers * full
    return float(attention_flops_per_key(arch)) * keys


def _tied_head(arch: ModelArch) -> int:
    """Parameters of a tied LM head (counted as embedding, but a matmul per token)."""
    return arch.hidden_size * arch.vocab_size if arch.kind == "decoder" and arch.tie_word_embeddings else 0


def _resnet_macs(arch: ModelArch, image_size: int) -> float:
    assert arch.resnet is not None
    st = arch.resnet
    res = image_size // 2
    macs = float(arch.num_channels * st.embedding_size * 49 * res * res)  # 7x7 stride-2 stem
    res //= 2  # max pool
    for src, c_out, s in resnet_blocks(arch):
        r_in, r_out = res, max(res // s, 1)
        if src != c_out or s != 1:
            macs += src * c_out * r_out * r_out
        if st.layer_type == "bottleneck":
            red = c_out // 4
            # HF ResNet puts the stride on the 1x1 reduce (downsample_in_bottleneck) or on the 3x3
            r_red = r_out if st.downsample_in_bottleneck else r_in
            macs += src * red * r_red * r_red + red * red * 9 * r_out * r_out + red * c_out * r_out * r_out
        else:
            macs += src * c_out * 9 * r_out * r_out + c_out * c_out * 9 * r_out * r_out
        res = r_out
    return macs + st.hidden_sizes[-1] * arch.num_labels


def forward_flops(arch: ModelArch, p: ParamCount, seq: int, *, target: int | None = None, eager: bool = False,
                  image_size: int | None = None, task_head: str | None = None) -> Flops:
    """Forward FLOPs of one sample: `seq` tokens (encoder-decoders: `seq` source and `target` target tokens;
    CNNs: one image of `image_size` pixels square, counted as one 'token'). `task_head`: the task head
    (core/sizing/stack.head_of); an encoder's masked-LM head is a dense transform and the vocabulary projection on
    every token (BertForMaskedLM), in place of a classification head on one."""
    if arch.kind == "cnn":
        f = 2.0 * _resnet_macs(arch, image_size or arch.image_size or 224)
        return Flops(tokens=1, linear_forward=f, attention_forward=0.0, head_forward=0.0)
    if arch.kind == "encoder-decoder":
        tgt = target or seq
        d, inner, v = arch.hidden_size, arch.q_dim, arch.vocab_size
        attn_w = 4 * d * inner
        mlp_w = (3 if arch.mlp_gated else 2) * d * arch.intermediate_size
        enc_w = arch.num_layers * (attn_w + mlp_w)
        dec_w = arch.num_decoder_layers * (2 * attn_w + mlp_w)
        head = v * d
        linear = 2.0 * (enc_w * seq + dec_w * tgt + head * tgt)
        attention = 4.0 * inner * (arch.num_layers * seq * seq  # encoder self
                                   + arch.num_decoder_layers * (tgt * _attended(tgt, True, eager, None)  # causal
                                                                + tgt * seq))  # cross
        return Flops(tokens=seq + tgt, linear_forward=linear, attention_forward=attention,
                     head_forward=2.0 * head * tgt)
    # biases and norms add no matmul FLOPs: count the blocks' weight matrices only
    weights = p.active - p.embedding - (p.blocks - p.block_linear_weights) + _tied_head(arch)
    head = p.head + _tied_head(arch)
    if arch.kind == "encoder" and task_head == "masked-lm":
        mlm = arch.hidden_size * arch.hidden_size + arch.hidden_size * arch.vocab_size
        blocks = 2.0 * (weights - p.head) * seq
        attention = _attention_per_token(arch, seq, eager) * seq
        return Flops(tokens=seq, linear_forward=blocks + 2.0 * mlm * seq, attention_forward=attention,
                     head_forward=2.0 * mlm * seq)
    if arch.kind in ("encoder", "vit"):
        # the classification head sees one token (pooler / CLS), not every token
        per_token_linear = 2.0 * (weights - p.head)
        linear = per_token_linear * seq + 2.0 * p.head
        head_f = 2.0 * p.head
        if arch.kind == "vit":  # patch embedding: a linear over every patch
            linear += 2.0 * arch.num_channels * arch.patch_size**2 * arch.hidden_size * (seq - 1)
    else:
        linear = 2.0 * weights * seq
        head_f = 2.0 * head * seq
    attention = _attention_per_token(arch, seq, eager) * seq
    return Flops(tokens=seq, linear_forward=linear, attention_forward=attention, head_forward=head_f)


def training_flops(fwd: Flops, *, frozen_base: bool, checkpointing: bool,
                   reference_forward: bool = False) -> TrainingFlops:
    """Per-token FLOPs of a training step from the forward of one sample. `reference_forward`: DPO's frozen
    reference also runs a forward pass (without grad) over every token (core/sizing/preference.py)."""
    lin_bwd = 1.0 if frozen_base else 2.0
    model = fwd.linear_forward * (1 + lin_bwd) + fwd.attention_forward * 3
    if reference_forward:
        model += fwd.forward
    # checkpointing re-runs the blocks' forward (not the head's) during backward
    recompute = (fwd.forward - fwd.head_forward) if checkpointing else 0.0
    return TrainingFlops(model_per_token=model / fwd.tokens, hardware_per_token=(model + recompute) / fwd.tokens,
                         forward_per_token=fwd.forward / fwd.tokens)


__all__ = ["Flops", "TrainingFlops", "attention_flops_per_key", "forward_flops", "training_flops"]
