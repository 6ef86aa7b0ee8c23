"""A Hugging Face `config.json` (as a dict) -> ModelArch. Pure: the caller reads the file.

Each supported `model_type` has a reader that mirrors the shapes of the transformers class that
builds it (AutoModelForCausalLM for decoders, ...ForSeq2SeqLM for t5/mt5, ...ForSequenceClassification
for bert/roberta, ...ForImageClassification for vit/resnet). Defaults are those of the transformers
config classes (checked against transformers 5.24). Parameter counts built from these readers are
compared with transformers' own models in tests/trace/test_param_counts.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from gpuplan.catalog.config_reader import Reader as _Reader
from gpuplan.catalog.config_reader import dropout as _dropout
from gpuplan.catalog.config_reader import head_from_architectures
from gpuplan.catalog.hf_config_gpt import _read_bloom, _read_falcon, _read_gpt2, _read_mpt
from gpuplan.errors import InputError, UnsupportedModelError, clip
from gpuplan.schema.model import MLA, ModelArch, MoE, ResNetStages


def _sliding(r: _Reader, n_layers: int, default_window: int | None) -> tuple[int | None, int]:
    """(window, layers that use it) from layer_types / use_sliding_window / sliding_window_pattern."""
    window = r.get("sliding_window", default=default_window)
    if not window:
        return None, 0
    window = r.int("sliding_window", default=default_window or 0, positive=True)
    layer_types = r.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        n = sum(1 for t in layer_types[:n_layers] if t == "sliding_attention")
        return (window, n) if n else (None, 0)
    if r.get("use_sliding_window") is False:
        return None, 0
    return window, n_layers


#: transformers' class defaults when a config omits num_key_value_heads / head_dim (None: the head count /
#: hidden // heads). Checked against transformers 5.24.
_KV_DEFAULT = {"llama4_text": 8, "mistral": 8, "mixtral": 8, "qwen2": 32, "qwen2_moe": 16, "qwen3": 32, "qwen3_moe": 4,
               "gemma": 16, "gemma2": 4, "gemma3_text": 4, "stablelm": 32}
_HEAD_DIM_DEFAULT = {"llama4_text": 128, "qwen3": 128, "gemma": 256, "gemma2": 256, "gemma3_text": 256}


def _llama_like(r: _Reader, model_type: str, **overrides: Any) -> dict[str, Any]:
    h = r.int("hidden_size")
    heads = r.int("num_attention_heads", positive=True)
    n_layers = r.int("num_hidden_layers")
    fields: dict[str, Any] = dict(
        model_type=model_type,
        kind="decoder",
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=r.int("num_key_value_heads", default=_KV_DEFAULT.get(model_type, heads)),
        head_dim=r.int("head_dim", default=_HEAD_DIM_DEFAULT.get(model_type, h // heads)),
        intermediate_size=r.int("intermediate_size"),
        vocab_size=r.int("vocab_size"),
        max_position_embeddings=r.int("max_position_embeddings", default=0),
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=False)),
        activation=str(r.get("hidden_act", "hidden_activation", default="silu")),
        attention_dropout=_dropout(r, "attention_dropout"),
        torch_dtype=r.get("torch_dtype", "dtype"),
    )
    fields.update(overrides)
    return fields


def _read_llama(r: _Reader) -> dict[str, Any]:
    bias = bool(r.get("attention_bias", default=False))
    return _llama_like(r, "llama", qkv_bias=bias, o_bias=bias, mlp_bias=bool(r.get("mlp_bias", default=False)))


def _read_mistral(r: _Reader) -> dict[str, Any]:
    window, n = _sliding(r, r.int("num_hidden_layers"), None)
    return _llama_like(r, "mistral", sliding_window=window, sliding_window_layers=n)


def _moe_fields(r: _Reader, n_layers: int, expert_size: int, shared: int = 0, gate: bool = False) -> MoE:
    step = r.int("decoder_sparse_step", default=1, positive=True)
    only_dense = set(r.ints("mlp_only_layers", []))
    n_moe = sum(1 for i in range(n_layers) if i not in only_dense and (i + 1) % step == 0)
    return MoE(
        num_experts=r.int("num_local_experts", "num_experts"),
        experts_per_token=r.int("num_experts_per_tok"),
        expert_intermediate_size=expert_size,
        shared_intermediate_size=shared,
        shared_expert_gate=gate,
        moe_layers=max(n_moe, 1),
    )


def _read_mixtral(r: _Reader) -> dict[str, Any]:
    n = r.int("num_hidden_layers")
    window, n_sw = _sliding(r, n, None)
    moe = MoE(
        num_experts=r.int("num_local_experts"),
        experts_per_token=r.int("num_experts_per_tok"),
        expert_intermediate_size=r.int("intermediate_size"),
        moe_layers=n,
    )
    return _llama_like(r, "mixtral", moe=moe, sliding_window=window, sliding_window_layers=n_sw)


def _read_qwen2(r: _Reader) -> dict[str, Any]:
    window, n = _sliding(r, r.int("num_hidden_layers"), None)
    return _llama_like(r, "qwen2", qkv_bias=True, sliding_window=window, sliding_window_layers=n)


def _read_qwen2_moe(r: _Reader) -> dict[str, Any]:
    n = r.int("num_hidden_layers")
    moe = _moe_fields(
        r, n, r.int("moe_intermediate_size"), shared=r.int("shared_expert_intermediate_size", default=0), gate=True
    )
    window, n_sw = _sliding(r, n, None)
    return _llama_like(
        r, "qwen2_moe", qkv_bias=bool(r.get("qkv_bias", default=True)), moe=moe,
        sliding_window=window, sliding_window_layers=n_sw,
    )


def _read_qwen3(r: _Reader) -> dict[str, Any]:
    bias = bool(r.get("attention_bias", default=False))
    window, n = _sliding(r, r.int("num_hidden_layers"), None)
    return _llama_like(r, "qwen3", qk_norm=True, qkv_bias=bias, o_bias=bias, sliding_window=window,
                       sliding_window_layers=n)


def _read_qwen3_moe(r: _Reader) -> dict[str, Any]:
    n = r.int("num_hidden_layers")
    bias = bool(r.get("attention_bias", default=False))
    moe = _moe_fields(r, n, r.int("moe_intermediate_size"))
    return _llama_like(r, "qwen3_moe", qk_norm=True, qkv_bias=bias, o_bias=bias, moe=moe)


def _read_llama4_text(r: _Reader) -> dict[str, Any]:
    """Llama 4's text model (transformers Llama4ForCausalLM): MoE layers (`moe_layers`, else every
    `interleave_moe_layer_step`-th) of routed experts of `intermediate_size` plus a shared expert of the same width
    and a router without bias; the other layers a dense MLP of `intermediate_size_mlp`; QK norm without weights;
    chunked attention (`attention_chunk_size`) on the RoPE layers, counted as a sliding window of the chunk."""
    n = r.int("num_hidden_layers")
    step = r.int("interleave_moe_layer_step", default=1, positive=True)
    n_moe = sum(1 for i in set(r.ints("moe_layers", list(range(step - 1, n, step)))) if i < n)
    ie = r.int("intermediate_size")
    moe = MoE(num_experts=r.int("num_local_experts", default=16), experts_per_token=r.int("num_experts_per_tok",
              default=1), expert_intermediate_size=ie, shared_intermediate_size=ie, moe_layers=n_moe) if n_moe else None
    interval = r.int("no_rope_layer_interval", default=4, positive=True)
    rope = r.ints("no_rope_layers", []) or [int((i + 1) % interval != 0) for i in range(n)]
    chunk = r.get("attention_chunk_size", default=None)
    chunked = sum(1 for v in rope[:n] if v) if chunk else 0
    bias = bool(r.get("attention_bias", default=False))
    return _llama_like(r, "llama4_text", intermediate_size=r.int("intermediate_size_mlp", default=16384), moe=moe,
                       qkv_bias=bias, o_bias=bias, sliding_window=r.int("attention_chunk_size", positive=True)
                       if chunked else None, sliding_window_layers=chunked)


def _read_deepseek_v3(r: _Reader) -> dict[str, Any]:
    """DeepSeek-V3 (transformers DeepseekV3ForCausalLM): multi-head latent attention (q_lora_rank, which a null
    turns into a plain q_proj; kv_lora_rank; qk_nope/qk_rope/v head widths), the first `first_k_dense_replace`
    layers a dense MLP of `intermediate_size`, the others MoE: `n_routed_experts` of `moe_intermediate_size`, top
    `num_experts_per_tok`, a shared expert `n_shared_experts` times as wide, a router without bias (its score
    correction is a buffer). transformers ignores `moe_layer_freq`. `num_nextn_predict_layers` MTP modules are
    kept apart (ModelArch.mtp_layers). Defaults: DeepseekV3Config's (transformers 5.24)."""
    n = r.int("num_hidden_layers", default=61)
    heads = r.int("num_attention_heads", default=128, positive=True)
    q_rank = 0 if "q_lora_rank" in r.config and r.config["q_lora_rank"] is None else r.int("q_lora_rank",
                                                                                            default=1536)
    mla = MLA(q_lora_rank=q_rank, kv_lora_rank=r.int("kv_lora_rank", default=512, positive=True),
              qk_nope_head_dim=r.int("qk_nope_head_dim", default=128),
              qk_rope_head_dim=r.int("qk_rope_head_dim", default=64, positive=True),
              v_head_dim=r.int("v_head_dim", default=128, positive=True))
    dense = min(r.int("first_k_dense_replace", default=3), n)
    expert = r.int("moe_intermediate_size", default=2048, positive=True)
    moe = MoE(num_experts=r.int("n_routed_experts", "num_local_experts", default=256, positive=True),
              experts_per_token=r.int("num_experts_per_tok", default=8, positive=True),
              expert_intermediate_size=expert, shared_intermediate_size=expert * r.int("n_shared_experts", default=1),
              moe_layers=n - dense) if n > dense else None
    bias = bool(r.get("attention_bias", default=False))
    return dict(
        model_type="deepseek_v3", kind="decoder", hidden_size=r.int("hidden_size", default=7168), num_layers=n,
        num_heads=heads, num_kv_heads=heads, head_dim=mla.qk_head_dim,
        intermediate_size=r.int("intermediate_size", default=18432), vocab_size=r.int("vocab_size", default=129280),
        max_position_embeddings=r.int("max_position_embeddings", default=4096),
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=False)),
        activation=str(r.get("hidden_act", default="silu")), attention_dropout=_dropout(r, "attention_dropout"),
        torch_dtype=r.get("torch_dtype", "dtype"), mla=mla, moe=moe, o_bias=bias,
        mtp_layers=r.int("num_nextn_predict_layers", "num_mtp_layers", default=1),
    )


def _read_gpt_oss(r: _Reader) -> dict[str, Any]:
    """gpt-oss (transformers GptOssForCausalLM): every layer MoE (`num_local_experts` of `intermediate_size`, top
    `num_experts_per_tok`) with biases on the router and on every expert's gate_up and down projections; q/k/v/o
    with biases (`attention_bias`); one learned sink logit per head; sliding-window attention on the layers
    `layer_types` names (default: every other layer from the first, window 128)."""
    n = r.int("num_hidden_layers", default=36)
    moe = MoE(num_experts=r.int("num_local_experts", default=128, positive=True),
              experts_per_token=r.int("num_experts_per_tok", default=4, positive=True),
              expert_intermediate_size=r.int("intermediate_size", default=2880, positive=True), moe_layers=n,
              router_bias=True, expert_bias=True)
    layer_types = r.get("layer_types")
    window, n_sw = _sliding(r, n, 128)
    if window and not isinstance(layer_types, list):
        n_sw = sum(1 for i in range(n) if (i + 1) % 2)
    bias = bool(r.get("attention_bias", default=True))
    heads = r.int("num_attention_heads", default=64, positive=True)
    return dict(
        model_type="gpt_oss", kind="decoder", hidden_size=r.int("hidden_size", default=2880), num_layers=n,
        num_heads=heads, num_kv_heads=r.int("num_key_value_heads", default=8, positive=True),
        head_dim=r.int("head_dim", default=64, positive=True),
        intermediate_size=r.int("intermediate_size", default=2880), vocab_size=r.int("vocab_size", default=201088),
        max_position_embeddings=r.int("max_position_embeddings", default=131072),
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=False)),
        activation=str(r.get("hidden_act", default="silu")), attention_dropout=_dropout(r, "attention_dropout"),
        torch_dtype=r.get("torch_dtype", "dtype"), moe=moe, qkv_bias=bias, o_bias=bias, attention_sinks=True,
        sliding_window=window, sliding_window_layers=n_sw,
    )


def _read_gemma(r: _Reader) -> dict[str, Any]:
    return _llama_like(r, "gemma", tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)),
                       activation=str(r.get("hidden_activation", "hidden_act", default="gelu_pytorch_tanh")))


def _read_gemma2(r: _Reader, model_type: str = "gemma2", qk_norm: bool = False) -> dict[str, Any]:
    n = r.int("num_hidden_layers")
    window, n_sw = _sliding(r, n, 4096)
    if window and r.get("layer_types") is None:
        pattern = r.int("sliding_window_pattern", default=2 if model_type == "gemma2" else 6, positive=True)
        n_sw = sum(1 for i in range(n) if (i + 1) % pattern != 0)
    return _llama_like(
        r, model_type, tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)), norms_per_layer=4,
        qk_norm=qk_norm, activation=str(r.get("hidden_activation", "hidden_act", default="gelu_pytorch_tanh")),
        sliding_window=window, sliding_window_layers=n_sw,
    )


def _read_gemma3_text(r: _Reader) -> dict[str, Any]:
    return _read_gemma2(r, "gemma3_text", qk_norm=True)


def _read_phi(r: _Reader) -> dict[str, Any]:
    return _llama_like(
        r, "phi", norm="layernorm", norm_bias=True, norms_per_layer=1, qkv_bias=True, o_bias=True, mlp_gated=False,
        mlp_bias=True, activation=str(r.get("hidden_act", default="gelu_new")), parallel_residual=True,
        lm_head_bias=True, qk_norm=bool(r.get("qk_layernorm", default=False)),
        hidden_dropout=_dropout(r, "resid_pdrop"),
    )


def _read_phi3(r: _Reader) -> dict[str, Any]:
    window, n = _sliding(r, r.int("num_hidden_layers"), None)
    return _llama_like(r, "phi3", sliding_window=window, sliding_window_layers=n,
                       hidden_dropout=_dropout(r, "resid_pdrop"))


def _read_stablelm(r: _Reader) -> dict[str, Any]:
    parallel = bool(r.get("use_parallel_residual", default=False))
    return _llama_like(
        r, "stablelm", norm="layernorm", norm_bias=True, norms_per_layer=1 if parallel else 2,
        qkv_bias=bool(r.get("use_qkv_bias", default=False)), qk_norm=bool(r.get("qk_layernorm", default=False)),
        parallel_residual=parallel, hidden_dropout=_dropout(r, "hidden_dropout"),
    )


def _read_gpt_neox(r: _Reader) -> dict[str, Any]:
    bias = bool(r.get("attention_bias", default=True))
    return _llama_like(
        r, "gpt_neox", norm="layernorm", norm_bias=True, qkv_bias=bias, o_bias=bias, mlp_gated=False, mlp_bias=True,
        activation=str(r.get("hidden_act", default="gelu")),
        parallel_residual=bool(r.get("use_parallel_residual", default=True)),
        hidden_dropout=_dropout(r, "hidden_dropout"),
    )


def _num_labels(r: _Reader, default: int) -> int:
    id2label = r.get("id2label")
    if isinstance(id2label, Mapping) and id2label:
        return len(id2label)
    return r.int("num_labels", default=default)


def _read_bert(r: _Reader, model_type: str = "bert", pooler: bool = True) -> dict[str, Any]:
    h = r.int("hidden_size", default=768)
    heads = r.int("num_attention_heads", default=12, positive=True)
    positions = r.int("max_position_embeddings", default=512)
    return dict(
        model_type=model_type, kind="encoder", hidden_size=h, num_layers=r.int("num_hidden_layers", default=12),
        num_heads=heads, num_kv_heads=heads, head_dim=h // heads,
        intermediate_size=r.int("intermediate_size", default=3072),
        vocab_size=r.int("vocab_size", default=30522 if model_type == "bert" else 50265),
        max_position_embeddings=positions, positions="learned", position_rows=positions,
        token_type_rows=r.int("type_vocab_size", default=2), tie_word_embeddings=False, norm="layernorm",
        norm_bias=True, qkv_bias=True, o_bias=True, mlp_gated=False, mlp_bias=True,
        activation=str(r.get("hidden_act", default="gelu")), embedding_norm=True, final_norm=False,
        num_labels=_num_labels(r, 2), pooler=pooler,
        attention_dropout=_dropout(r, "attention_probs_dropout_prob"),
        hidden_dropout=_dropout(r, "hidden_dropout_prob"), torch_dtype=r.get("torch_dtype", "dtype"),
    )


def _read_roberta(r: _Reader) -> dict[str, Any]:
    return _read_bert(r, "roberta", pooler=False)


def _read_t5(r: _Reader, model_type: str = "t5") -> dict[str, Any]:
    d = r.int("d_model", default=512)
    heads = r.int("num_heads", default=8 if model_type == "t5" else 6)
    n_enc = r.int("num_layers", default=6 if model_type == "t5" else 8)
    proj = str(r.get("feed_forward_proj", default="relu" if model_type == "t5" else "gated-gelu"))
    gated = proj.startswith("gated-")
    return dict(
        model_type=model_type, kind="encoder-decoder", hidden_size=d, num_layers=n_enc, num_heads=heads,
        num_kv_heads=heads, head_dim=r.int("d_kv", default=64),
        intermediate_size=r.int("d_ff", default=2048 if model_type == "t5" else 1024),
        vocab_size=r.int("vocab_size", default=32128 if model_type == "t5" else 250112), positions="relative",
        tie_word_embeddings=bool(r.get("tie_word_embeddings", default=True)), norm="rmsnorm", mlp_gated=gated,
        activation=proj.removeprefix("gated-"), num_decoder_layers=r.int("num_decoder_layers", default=n_enc),
        relative_attention_num_buckets=r.int("relative_attention_num_buckets", default=32),
        hidden_dropout=_dropout(r, "dropout_rate") if "dropout_rate" in r.config else 0.1,
        torch_dtype=r.get("torch_dtype", "dtype"),
    )


def _read_mt5(r: _Reader) -> dict[str, Any]:
    return _read_t5(r, "mt5")


def _read_vit(r: _Reader) -> dict[str, Any]:
    h = r.int("hidden_size", default=768)
    heads = r.int("num_attention_heads", default=12, positive=True)
    image, patch = r.int("image_size", default=224), r.int("patch_size", default=16, positive=True)
    return dict(
        model_type="vit", kind="vit", hidden_size=h, num_layers=r.int("num_hidden_layers", default=12), num_heads=heads,
        num_kv_heads=heads, head_dim=h // heads, intermediate_size=r.int("intermediate_size", default=3072),
        vocab_size=0, positions="learned", position_rows=(image // patch) ** 2 + 1, tie_word_embeddings=False,
        norm="layernorm", norm_bias=True, qkv_bias=bool(r.get("qkv_bias", default=True)), o_bias=True,
        mlp_gated=False, mlp_bias=True, activation=str(r.get("hidden_act", default="gelu")),
        num_labels=_num_labels(r, 2), image_size=image, patch_size=patch, num_channels=r.int("num_channels", default=3),
        attention_dropout=_dropout(r, "attention_probs_dropout_prob"),
        hidden_dropout=_dropout(r, "hidden_dropout_prob"),
        torch_dtype=r.get("torch_dtype", "dtype"),
    )


def _read_resnet(r: _Reader) -> dict[str, Any]:
    sizes = r.ints("hidden_sizes", [256, 512, 1024, 2048])
    if not sizes:
        raise InputError(["hidden_sizes"], "must list at least one stage", source=r.source)
    stages = ResNetStages(
        embedding_size=r.int("embedding_size", default=64), hidden_sizes=sizes,
        depths=r.ints("depths", [3, 4, 6, 3]), layer_type=r.get("layer_type", default="bottleneck"),
        downsample_in_first_stage=bool(r.get("downsample_in_first_stage", default=False)),
        downsample_in_bottleneck=bool(r.get("downsample_in_bottleneck", default=False)),
    )
    return dict(
        model_type="resnet", kind="cnn", hidden_size=sizes[-1], num_layers=sum(stages.depths), num_heads=1,
        num_kv_heads=1, head_dim=1, intermediate_size=sizes[-1], vocab_size=0, positions="none",
        tie_word_embeddings=False, norm="layernorm", norms_per_layer=0, mlp_gated=False, activation="relu",
        final_norm=False, num_labels=_num_labels(r, 2), image_size=r.int("image_size", default=224),
        num_channels=r.int("num_channels", default=3), resnet=stages, torch_dtype=r.get("torch_dtype", "dtype"),
    )


READERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "deepseek_v3": _read_deepseek_v3, "gpt_oss": _read_gpt_oss,
    "llama": _read_llama, "llama4_text": _read_llama4_text, "mistral": _read_mistral, "mixtral": _read_mixtral,
    "qwen2": _read_qwen2,
    "qwen2_moe": _read_qwen2_moe, "qwen3": _read_qwen3, "qwen3_moe": _read_qwen3_moe, "gemma": _read_gemma,
    "gemma2": _read_gemma2, "gemma3_text": _read_gemma3_text, "phi": _read_phi, "phi3": _read_phi3,
    "gpt2": _read_gpt2, "gpt_neox": _read_gpt_neox, "falcon": _read_falcon, "bloom": _read_bloom, "mpt": _read_mpt,
    "stablelm": _read_stablelm, "bert": _read_bert, "roberta": _read_roberta, "t5": _read_t5, "mt5": _read_mt5,
    "vit": _read_vit, "resnet": _read_resnet,
}
SUPPORTED_MODEL_TYPES = tuple(sorted(READERS))


def arch_from_hf_config(config: Mapping[str, Any], *, source: str = "config.json") -> ModelArch:
    """Describe the model of a Hugging Face config.json dict. Raises InputError naming the key."""
    if not isinstance(config, Mapping):
        raise InputError([], "a config.json must be a JSON object", source=source)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in READERS:
        raise UnsupportedModelError(
            ["model_type"], f"unsupported model_type {clip(model_type)}",
            ", ".join(SUPPORTED_MODEL_TYPES), source=source,
        )
    try:
        return ModelArch(**READERS[model_type](_Reader(config, source)),
                         head=head_from_architectures(config, source))
    except ValidationError as exc:  # a size out of bounds, or a ResNet stage / MoE field of the wrong type
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        got = f" (got {clip(err['input'])})" if not isinstance(err.get("input"), (dict, list)) else ""
        raise InputError(loc, err["msg"].removeprefix("Value error, ") + got, source=source) from None
