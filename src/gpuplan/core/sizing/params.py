"""Exact parameter counts from a ModelArch, split by where the parameters live.

The split feeds the memory model: which parameters are linear weights inside the blocks (quantized by
QLoRA, adapted by LoRA), which are embeddings/head/norms (kept in 16 bits), and how many are active
per token in a mixture of experts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuplan.schema.model import ModelArch


class ParamCount(BaseModel):
    """Parameters of a model by part. `total` is what `sum(p.numel() for p in model.parameters())` gives."""

    model_config = ConfigDict(frozen=True)

    embedding: int  # token, position and token-type tables, embedding norm
    blocks: int  # all transformer blocks (or CNN stages)
    block_linear_weights: int  # weight matrices of the blocks' linear layers (no biases, no norms)
    largest_linear_weight: int  # the largest single linear weight matrix in a block
    head: int  # untied LM head (+bias), final norm, pooler, classifier
    active: int  # parameters used per token (MoE: routed experts only)

    @property
    def total(self) -> int:
        return self.embedding + self.blocks + self.head

    @property
    def per_layer(self) -> int:
        return self.blocks


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _norm(arch: ModelArch, dim: int) -> int:
    return dim * (2 if arch.norm == "layernorm" and arch.norm_bias else 1)


def _mla(arch: ModelArch) -> tuple[int, int, int]:
    """(params, linear weights, largest weight) of one multi-head latent attention block (transformers'
    DeepseekV3Attention): q_a_proj, q_a_layernorm and q_b_proj (or q_proj), kv_a_proj_with_mqa to the latent and
    the RoPE key, kv_a_layernorm, kv_b_proj to every head's nope key and value, o_proj; `attention_bias` on
    q_a_proj, kv_a_proj_with_mqa and o_proj."""
    assert arch.mla is not None
    m, h, n = arch.mla, arch.hidden_size, arch.num_heads
    q_out = n * m.qk_head_dim
    mats = [h * m.q_lora_rank, m.q_lora_rank * q_out] if m.q_lora_rank else [h * q_out]
    mats += [h * m.latent, m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim), n * m.v_head_dim * h]
    weights = sum(mats)
    norms = m.q_lora_rank + m.kv_lora_rank
    bias = ((m.q_lora_rank if m.q_lora_rank else 0) + m.latent + h) if arch.o_bias else 0
    return weights + norms + bias, weights, max(mats)


def _attention(arch: ModelArch) -> tuple[int, int, int]:
    """(params, linear weights, largest weight) of one self-attention block."""
    if arch.mla is not None:
        return _mla(arch)
    h, q, kv = arch.hidden_size, arch.q_dim, arch.kv_dim
    weights = h * q + 2 * h * kv + q * h
    params = weights + (q + 2 * kv if arch.qkv_bias else 0) + (h if arch.o_bias else 0)
    if arch.qk_norm:
        if arch.model_type == "stablelm":  # one LayerNorm (no bias) per head
            params += q + kv
        elif arch.model_type == "phi":  # LayerNorm(head_dim) with bias, for q and k
            params += 4 * arch.head_dim
        else:  # RMSNorm(head_dim) for q and k
            params += 2 * arch.head_dim
    if arch.attention_sinks:  # gpt-oss: one sink logit per head
        params += arch.num_heads
    return params, weights, max(h * q, h * kv)


def _mlp(arch: ModelArch, inner: int) -> tuple[int, int]:
    h = arch.hidden_size
    n_in = 2 if arch.mlp_gated else 1
    weights = n_in * h * inner + inner * h
    bias = (n_in * inner + h) if arch.mlp_bias else 0
    return weights + bias, weights


def _decoder_block_totals(arch: ModelArch) -> tuple[int, int, int, int]:
    """(block params, block linear weights, largest weight, active params) over all layers."""
    attn, attn_w, largest = _attention(arch)
    norms = arch.norms_per_layer * _norm(arch, arch.hidden_size)
    dense, dense_w = _mlp(arch, arch.intermediate_size)
    n = arch.num_layers
    largest = max(largest, arch.hidden_size * arch.intermediate_size)
    if arch.moe is None:
        per = attn + dense + norms
        return n * per, n * (attn_w + dense_w), largest, n * per
    moe = arch.moe
    expert, expert_w = _mlp(arch, moe.expert_intermediate_size)
    if moe.expert_bias:  # gpt-oss: gate_up_proj_bias and down_proj_bias
        expert += 2 * moe.expert_intermediate_size + arch.hidden_size
    router = arch.hidden_size * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    shared, shared_w = _mlp(arch, moe.shared_intermediate_size) if moe.shared_intermediate_size else (0, 0)
    gate = arch.hidden_size if moe.shared_expert_gate else 0
    moe_block = moe.num_experts * expert + router + shared + gate
    moe_w = moe.num_experts * expert_w + router + shared_w + gate
    moe_active = moe.experts_per_token * expert + router + shared + gate
    n_dense = n - moe.moe_layers
    total = n * (attn + norms) + moe.moe_layers * moe_block + n_dense * dense
    weights = n * attn_w + moe.moe_layers * moe_w + n_dense * dense_w
    active = n * (attn + norms) + moe.moe_layers * moe_active + n_dense * dense
    return total, weights, largest, active


def expert_weights(arch: ModelArch) -> int:
    """Weight-matrix elements of the routed experts over all MoE layers (biases, routers and shared experts
    aside): what an MXFP4 checkpoint such as gpt-oss's stores in 4 bits."""
    if arch.moe is None:
        return 0
    return arch.moe.moe_layers * arch.moe.num_experts * _mlp(arch, arch.moe.expert_intermediate_size)[1]


def mtp_params(arch: ModelArch) -> int:
    """Parameters of the multi-token prediction modules the checkpoint adds (DeepSeek-V3's
    num_nextn_predict_layers), as transformers' MtpModel builds them: per module the embedding's and the hidden
    state's RMSNorms, eh_proj (2h -> h), one MoE decoder layer and its post norm; the embedding and the head are
    the main model's (shared, not counted). Not part of count_params: AutoModelForCausalLM does not build them."""
    if not arch.mtp_layers:
        return 0
    h = arch.hidden_size
    attn, _, _ = _attention(arch)
    norms = arch.norms_per_layer * _norm(arch, h)
    if arch.moe is not None:
        moe_only = arch.model_copy(update={"num_layers": 1, "moe": arch.moe.model_copy(update={"moe_layers": 1})})
        layer = _decoder_block_totals(moe_only)[0]
    else:
        layer = attn + norms + _mlp(arch, arch.intermediate_size)[0]
    return arch.mtp_layers * (3 * _norm(arch, h) + 2 * h * h + layer)


def _decoder(arch: ModelArch) -> ParamCount:
    h, v = arch.hidden_size, arch.vocab_size
    embedding = v * h + arch.position_rows * h + arch.token_type_rows * h
    if arch.embedding_norm:
        embedding += _norm(arch, h)
    blocks, weights, largest, active = _decoder_block_totals(arch)
    head = _norm(arch, h) if arch.final_norm else 0
    if not arch.tie_word_embeddings:
        head += v * h
    if arch.lm_head_bias:
        head += v
    return ParamCount(embedding=embedding, blocks=blocks, block_linear_weights=weights, largest_linear_weight=largest,
                      head=head, active=embedding + active + head)


def _encoder(arch: ModelArch) -> ParamCount:
    h = arch.hidden_size
    base = _decoder(arch.model_copy(update={"tie_word_embeddings": True, "final_norm": False}))
    head = 0
    if arch.pooler:  # bert: pooler dense + classifier
        head = _linear(h, h, True) + _linear(h, arch.num_labels, True)
    else:  # roberta: classification head dense + out_proj
        head = _linear(h, h, True) + _linear(h, arch.num_labels, True)
    return base.model_copy(update={"head": head, "active": base.active - base.head + head})


def _encoder_decoder(arch: ModelArch) -> ParamCount:
    d, inner, v = arch.hidden_size, arch.q_dim, arch.vocab_size
    attn_w = 4 * d * inner
    mlp, mlp_w = _mlp(arch, arch.intermediate_size)
    rel = arch.relative_attention_num_buckets * arch.num_heads
    enc = arch.num_layers * (attn_w + mlp + 2 * d) + rel + d
    dec = arch.num_decoder_layers * (2 * attn_w + mlp + 3 * d) + rel + d
    weights = ((arch.num_layers + 2 * arch.num_decoder_layers) * attn_w
               + (arch.num_layers + arch.num_decoder_layers) * mlp_w)
    head = 0 if arch.tie_word_embeddings else v * d
    largest = max(d * inner, d * arch.intermediate_size)
    return ParamCount(embedding=v * d, blocks=enc + dec, block_linear_weights=weights, largest_linear_weight=largest,
                      head=head, active=v * d + enc + dec + head)


def _vit(arch: ModelArch) -> ParamCount:
    h, p = arch.hidden_size, arch.patch_size
    embedding = h + arch.position_rows * h + _linear(arch.num_channels * p * p, h, True)
    blocks, weights, largest, active = _decoder_block_totals(arch)
    head = _norm(arch, h) + _linear(h, arch.num_labels, True)
    return ParamCount(embedding=embedding, blocks=blocks, block_linear_weights=weights, largest_linear_weight=largest,
                      head=head, active=embedding + active + head)


def resnet_blocks(arch: ModelArch) -> list[tuple[int, int, int]]:
    """(input channels, output channels, stride) of every residual block, stage after stage."""
    assert arch.resnet is not None
    st = arch.resnet
    out = []
    c_in = st.embedding_size
    for i, (c_out, depth) in enumerate(zip(st.hidden_sizes, st.depths, strict=True)):
        stride = 2 if (i > 0 or st.downsample_in_first_stage) else 1
        for j in range(depth):
            out.append((c_in if j == 0 else c_out, c_out, stride if j == 0 else 1))
        c_in = c_out
    return out


def _resnet(arch: ModelArch) -> ParamCount:
    assert arch.resnet is not None
    st = arch.resnet

    def conv_bn(c_in: int, c_out: int, k: int) -> int:
        return c_in * c_out * k * k + 2 * c_out

    embedding = conv_bn(arch.num_channels, st.embedding_size, 7)
    blocks = 0
    largest = 0
    for src, c_out, s in resnet_blocks(arch):
        if src != c_out or s != 1:
            blocks += conv_bn(src, c_out, 1)
        if st.layer_type == "bottleneck":
            red = c_out // 4
            blocks += conv_bn(src, red, 1) + conv_bn(red, red, 3) + conv_bn(red, c_out, 1)
            largest = max(largest, red * red * 9, src * red, red * c_out)
        else:
            blocks += conv_bn(src, c_out, 3) + conv_bn(c_out, c_out, 3)
            largest = max(largest, c_out * c_out * 9)
    head = _linear(st.hidden_sizes[-1], arch.num_labels, True)
    return ParamCount(embedding=embedding, blocks=blocks, block_linear_weights=0, largest_linear_weight=largest,
                      head=head, active=embedding + blocks + head)


def count_params(arch: ModelArch) -> ParamCount:
    """Exact parameter count of the model `arch` describes, by part."""
    if arch.kind == "decoder":
        return _decoder(arch)
    if arch.kind == "encoder":
        return _encoder(arch)
    if arch.kind == "encoder-decoder":
        return _encoder_decoder(arch)
    if arch.kind == "vit":
        return _vit(arch)
    return _resnet(arch)


def cnn_feature_elements(arch: ModelArch, image_size: int) -> int:
    """Elements of a ResNet's feature maps for one image: the stem's conv output and max-pooled map, and per
    block the conv outputs (bottleneck: reduce at the input resolution, reduce and expand at the output's)."""
    assert arch.resnet is not None
    st = arch.resnet
    res = image_size // 2
    total = st.embedding_size * res * res
    res //= 2
    total += st.embedding_size * res * res
    for i, (c_out, depth) in enumerate(zip(st.hidden_sizes, st.depths, strict=True)):
        stride = 2 if (i > 0 or st.downsample_in_first_stage) else 1
        for j in range(depth):
            r_in = res
            if j == 0:
                res = max(res // stride, 1)
            if st.layer_type == "bottleneck":
                red = c_out // 4
                total += red * r_in * r_in + red * res * res + c_out * res * res
            else:
                total += 2 * c_out * res * res
    return total
