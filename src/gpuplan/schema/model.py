"""ModelArch: what gpuplan knows of a model's architecture, enough to count its parameters exactly
and to size its activations and KV cache. Built from a Hugging Face config.json (catalog/hf_config.py),
for built-in presets and user files alike."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

ModelKind = Literal["decoder", "encoder", "encoder-decoder", "vit", "cnn"]
NormKind = Literal["rmsnorm", "layernorm"]
Positions = Literal["rope", "learned", "alibi", "relative", "none"]
#: the task head on top of the model, from config.json's `architectures` (BertForMaskedLM -> masked-lm, ...)
Head = Literal["causal-lm", "masked-lm", "sequence-classification", "seq2seq-lm", "image-classification"]


#: upper bounds of a config.json's sizes: beyond any published model, low enough that counts stay exact and finite
#: (a model of 1e30 parameters cannot be described)
MAX_WIDTH = 1 << 22
MAX_LAYERS = 10_000
MAX_HEADS = 1 << 16
MAX_VOCAB = 100_000_000
MAX_POSITIONS = 1_000_000_000
Width = Annotated[int, Field(gt=0, le=MAX_WIDTH)]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class MoE(_Frozen):
    """Mixture-of-experts feed-forward blocks."""

    num_experts: PositiveInt = Field(le=MAX_HEADS)
    experts_per_token: PositiveInt = Field(le=MAX_HEADS)
    expert_intermediate_size: Width
    #: a shared (always active) expert's intermediate size; 0 when there is none
    shared_intermediate_size: int = Field(0, ge=0, le=MAX_WIDTH)
    #: qwen2_moe gates the shared expert with a (hidden -> 1) linear
    shared_expert_gate: bool = False
    #: how many of the layers are MoE (the others use the dense MLP of `intermediate_size`)
    moe_layers: PositiveInt = Field(le=MAX_LAYERS)
    #: gpt-oss: the router has a bias (experts), and every expert's gate_up and down projections have biases
    router_bias: bool = False
    expert_bias: bool = False


class MLA(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): queries through a low-rank `q_lora_rank` bottleneck (0: a plain
    q_proj), keys and values from one compressed latent of `kv_lora_rank` plus a shared RoPE key of
    `qk_rope_head_dim`, expanded per head to `qk_nope_head_dim` (+ the RoPE part) keys and `v_head_dim` values."""

    q_lora_rank: int = Field(0, ge=0, le=MAX_WIDTH)
    kv_lora_rank: Width
    qk_nope_head_dim: int = Field(ge=0, le=MAX_WIDTH)
    qk_rope_head_dim: Width
    v_head_dim: Width

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def latent(self) -> int:
        """Values one token's compressed KV holds per layer: what an MLA kernel caches."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class ResNetStages(_Frozen):
    """A ResNet's stem and stages (HF ResNetConfig)."""

    embedding_size: Width
    hidden_sizes: list[Width] = Field(min_length=1, max_length=64)
    depths: list[Annotated[int, Field(gt=0, le=MAX_LAYERS)]] = Field(min_length=1, max_length=64)
    layer_type: Literal["basic", "bottleneck"]
    downsample_in_first_stage: bool = False
    downsample_in_bottleneck: bool = False


class ModelArch(_Frozen):
    """A model's architecture. Sizes are element counts; nothing here is in bytes."""

    model_type: str = Field(max_length=64)
    kind: ModelKind
    hidden_size: Width
    num_layers: PositiveInt = Field(le=MAX_LAYERS)
    num_heads: PositiveInt = Field(le=MAX_HEADS)
    num_kv_heads: PositiveInt = Field(le=MAX_HEADS)
    head_dim: Width
    intermediate_size: Width
    vocab_size: int = Field(ge=0, le=MAX_VOCAB)
    max_position_embeddings: int = Field(0, ge=0, le=MAX_POSITIONS)

    positions: Positions = "rope"
    #: rows of a learned position table (gpt2 n_positions, bert max_position_embeddings)
    position_rows: int = Field(0, ge=0, le=MAX_POSITIONS)
    token_type_rows: int = Field(0, ge=0, le=MAX_VOCAB)
    tie_word_embeddings: bool = True
    norm: NormKind = "rmsnorm"
    norm_bias: bool = False
    #: norms inside one block (2 usually; 1 for parallel blocks; 4 in gemma2/3)
    norms_per_layer: int = Field(2, ge=0, le=64)
    qk_norm: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_gated: bool = True
    mlp_bias: bool = False
    activation: str = Field("silu", max_length=64)
    parallel_residual: bool = False
    embedding_norm: bool = False
    final_norm: bool = True
    lm_head_bias: bool = False
    moe: MoE | None = None
    #: multi-head latent attention (DeepSeek-V3): head_dim is then the query/key head width (nope + rope) and
    #: num_kv_heads the heads its keys and values expand to
    mla: MLA | None = None
    #: multi-token prediction modules the checkpoint carries beyond num_layers (DeepSeek-V3: 1); transformers'
    #: causal LM does not build them (MtpModel does, for speculative decoding): see params.mtp_params
    mtp_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    #: gpt-oss: one learned attention-sink logit per head and layer
    attention_sinks: bool = False
    #: sliding-window attention: window tokens and how many layers use it (the others are global)
    sliding_window: int | None = Field(None, gt=0, le=MAX_POSITIONS)
    sliding_window_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    #: encoder-decoder: decoder depth; relative position buckets
    num_decoder_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    relative_attention_num_buckets: int = Field(0, ge=0, le=MAX_POSITIONS)
    #: classification heads (encoders, vision): labels; pooler (bert)
    num_labels: int = Field(0, ge=0, le=MAX_VOCAB)
    pooler: bool = False
    #: vision transformers / CNNs
    image_size: int = Field(0, ge=0, le=65_536)
    patch_size: int = Field(0, ge=0, le=65_536)
    num_channels: int = Field(3, ge=0, le=65_536)
    resnet: ResNetStages | None = None
    #: dropout probabilities the model applies in training (masks cost memory)
    attention_dropout: float = Field(0.0, ge=0, le=1)
    hidden_dropout: float = Field(0.0, ge=0, le=1)
    #: the task head, as config.json's `architectures` names it (None: the kind's and the task's default, see
    #: core/sizing/stack.py head_of: a causal LM for decoders, masked-LM pre-training or sequence classification
    #: for encoders, seq2seq LM, image classification)
    head: Head | None = None
    #: the dtype the checkpoint is stored in (config torch_dtype), informational
    torch_dtype: str | None = Field(None, max_length=64)

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def cache_kv_heads(self) -> int:
        """KV heads a cache holds and tensor parallelism splits: MLA's latent is one head, whole on every GPU."""
        return 1 if self.mla is not None else self.num_kv_heads

    @property
    def cache_values_per_token_layer(self) -> int:
        """Values one token's KV cache holds per layer: K and V of every KV head; MLA's compressed latent and RoPE
        key (kv_lora_rank + qk_rope_head_dim), as vLLM's MLA backend and transformers' DeepseekV3 cache it."""
        return self.mla.latent if self.mla is not None else 2 * self.kv_dim
