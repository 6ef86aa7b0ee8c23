"""config.json readers of the GPT-style decoders that do not follow the Llama layout: fused QKV projections,
LayerNorms, plain GELU MLPs, learned or ALiBi positions (gpt2, falcon, mpt, bloom). Part of catalog/hf_config.py
(READERS there), split out by subject to keep modules short."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuplan.catalog.config_reader import Reader as _Reader
from gpuplan.catalog.config_reader import dropout as _dropout
from gpuplan.errors import InputError, clip


def _read_gpt2(r: _Reader) -> dict[str, Any]:
    h = r.int("n_embd", "hidden_size", default=768)
    heads = r.int("n_head", "num_attention_heads", default=12, positive=True)
    inner = r.int("n_inner", default=0)
    positions = r.int("n_positions", default=1024)
    return dict(
        model_type="gpt2", kind="decoder", hidden_size=h, num_layers=r.int("n_layer", "num_hidden_layers", default=12),
        num_heads=heads, num_kv_heads=heads, head_dim=h // heads, intermediate_size=inner or 4 * h,
        vocab_size=r.int("vocab_size", default=50257), max_position_embeddings=positions, positions="learned",
        position_rows=positions, tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)),
        norm="layernorm", norm_bias=True, qkv_bias=True, o_bias=True, mlp_gated=False, mlp_bias=True,
        activation=str(r.get("activation_function", default="gelu_new")),
        attention_dropout=_dropout(r, "attn_pdrop"), hidden_dropout=_dropout(r, "resid_pdrop"),
        torch_dtype=r.get("torch_dtype", "dtype"),
    )


def _read_falcon(r: _Reader) -> dict[str, Any]:
    h = r.int("hidden_size")
    heads = r.int("num_attention_heads", "n_head", positive=True)
    new_arch = bool(r.get("new_decoder_architecture", default=False))
    if new_arch:
        kv = r.int("num_kv_heads", "n_head_kv", default=heads)
    elif r.get("multi_query", default=True):
        kv = 1
    else:
        kv = heads
    parallel = bool(r.get("parallel_attn", default=True))
    if new_arch:
        norms = r.int("num_ln_in_parallel_attn", default=2)
    else:
        norms = 1 if parallel else 2
    bias = bool(r.get("bias", default=False))
    return dict(
        model_type="falcon", kind="decoder", hidden_size=h, num_layers=r.int("num_hidden_layers", "n_layer"),
        num_heads=heads, num_kv_heads=kv, head_dim=h // heads,
        intermediate_size=r.int("ffn_hidden_size", default=4 * h), vocab_size=r.int("vocab_size"),
        max_position_embeddings=r.int("max_position_embeddings", default=2048),
        positions="alibi" if r.get("alibi", default=False) else "rope",
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)), norm="layernorm", norm_bias=True,
        norms_per_layer=norms, qkv_bias=bias, o_bias=bias, mlp_gated=False, mlp_bias=bias, activation="gelu",
        parallel_residual=parallel or new_arch, attention_dropout=_dropout(r, "attention_dropout"),
        hidden_dropout=_dropout(r, "hidden_dropout"), torch_dtype=r.get("torch_dtype", "dtype"),
    )


def _read_mpt(r: _Reader) -> dict[str, Any]:
    """MosaicML MPT (transformers MptForCausalLM): fused Wqkv and out_proj, a plain GELU MLP of expansion_ratio x
    d_model (transformers builds 4 x, the value of every published MPT), LayerNorms without bias, ALiBi, the LM
    head tied to the embedding; `no_bias` (true in every published MPT) drops every bias."""
    h = r.int("d_model", "hidden_size")
    heads = r.int("n_heads", "num_attention_heads", positive=True)
    n_layers = r.int("n_layers", "num_hidden_layers")
    attn = r.get("attn_config", default={})
    if not isinstance(attn, Mapping):
        raise InputError(["attn_config"], f"must be an object, got {clip(attn)}", source=r.source)
    a = _Reader(attn, r.source)
    kv = {"multiquery_attention": 1, "grouped_query_attention": a.int("kv_n_heads", default=heads, positive=True)
          }.get(str(a.get("attn_type", default="multihead_attention")), heads)
    bias = not bool(r.get("no_bias", default=True))
    alibi = bool(a.get("alibi", default=True))
    learned = not alibi and bool(r.get("learned_pos_emb", default=True))
    return dict(
        model_type="mpt", kind="decoder", hidden_size=h, num_layers=n_layers, num_heads=heads, num_kv_heads=kv,
        head_dim=h // heads, intermediate_size=r.int("expansion_ratio", default=4, positive=True) * h,
        vocab_size=r.int("vocab_size", default=50368), max_position_embeddings=r.int("max_seq_len", default=2048),
        positions="alibi" if alibi else ("learned" if learned else "none"),
        position_rows=r.int("max_seq_len", default=2048) if learned else 0,
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)),
        norm="layernorm", norm_bias=bias, qkv_bias=bias, o_bias=bias, mlp_gated=False, mlp_bias=bias,
        activation="gelu", attention_dropout=_dropout(a, "attn_pdrop"), hidden_dropout=_dropout(r, "resid_pdrop"),
        torch_dtype=r.get("torch_dtype", "dtype"),
    )


def _read_bloom(r: _Reader) -> dict[str, Any]:
    h = r.int("hidden_size", "n_embed", default=64)
    heads = r.int("n_head", "num_attention_heads", default=8, positive=True)
    return dict(
        model_type="bloom", kind="decoder", hidden_size=h, num_layers=r.int("n_layer", "num_hidden_layers", default=2),
        num_heads=heads, num_kv_heads=heads, head_dim=h // heads, intermediate_size=4 * h,
        vocab_size=r.int("vocab_size", default=250880), positions="alibi",
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)), norm="layernorm", norm_bias=True,
        qkv_bias=True, o_bias=True, mlp_gated=False, mlp_bias=True, activation="gelu", embedding_norm=True,
        attention_dropout=_dropout(r, "attention_dropout"), hidden_dropout=_dropout(r, "hidden_dropout"),
        torch_dtype=r.get("torch_dtype", "dtype"),
    )


__all__ = ["_read_bloom", "_read_falcon", "_read_gpt2", "_read_mpt"]
