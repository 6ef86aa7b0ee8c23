"""Activations saved for backward, per layer and per token, from the coefficients measured on the real Hugging
Face implementation of each architecture (data/activations.toml, scripts/fit_activations.py), and the workload
settings they depend on (regime, attention kernel, resolved batch and sequence). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.core.sizing.lora import attention_only
from gpuplan.core.sizing.params import cnn_feature_elements
from gpuplan.schema.estimate import ActivationCoefficients, ActivationTable, Note
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import LoraSpec, Workload


@dataclass(frozen=True, slots=True)
class Resolved:
    """Workload settings with the model's defaults filled in (a plain record: every estimate makes one)."""

    batch: int
    seq: int
    target: int
    training: bool


def resolve(arch: ModelArch, w: Workload) -> Resolved:
    training = w.task != "inference"
    if arch.kind in ("vit", "cnn"):
        img = w.image_size or arch.image_size or 224
        seq = (img // arch.patch_size) ** 2 + 1 if arch.kind == "vit" else img
    elif training:
        seq = w.sequence_length or min(arch.max_position_embeddings or 2048, 2048)
    else:
        seq = w.context_length or w.sequence_length or min(arch.max_position_embeddings or 4096, 4096)
    batch = w.micro_batch_size if training else w.batch_size
    return Resolved(batch=batch, seq=seq, target=w.target_length or seq, training=training)


def regime_of(w: Workload) -> str:
    """Which activation regime of data/activations.toml a workload runs in."""
    if w.task in ("lora", "qlora"):
        if w.precision == "fp32":
            return "lora-fp32"
        return "lora-bf16" if w.precision == "bf16" else "lora-amp"
    if w.precision == "fp32":
        return "fp32"
    return "bf16" if w.precision == "bf16" else "amp"


#: the longest sequences scripts/fit_activations.py measures, eager and SDPA: a fit whose per-token bytes fall
#: with the sequence is not extrapolated beyond them (saved tensors per token never shrink as sequences grow)
FIT_MAX_SEQ = {"eager": 512, "sdpa": 64}


def per_token(c: ActivationCoefficients, arch: ModelArch, seq: int, rank: int, tp: int,
               fit_max_seq: int = FIT_MAX_SEQ["sdpa"]) -> float:
    """Bytes per token of one layer's saved activations (model-parallel widths divided by tp). Never less
    than the layer's 16-bit input, whatever a fit's negative coefficients say far from where it was measured."""
    moe = arch.moe
    if c.Hs * arch.num_heads + c.s < 0:
        seq = min(seq, fit_max_seq)
    split = (c.q * arch.q_dim + c.kv * arch.kv_dim + c.i * arch.intermediate_size + c.H * arch.num_heads
             + c.Hs * arch.num_heads * seq + c.s * seq
             + c.qg * (arch.q_dim if arch.num_kv_heads < arch.num_heads else 0))
    if arch.mla is not None:
        split += c.ql * arch.mla.q_lora_rank + c.kl * arch.mla.latent + c.v * arch.num_heads * arch.mla.v_head_dim
    if moe is not None:
        split += (c.iek * moe.expert_intermediate_size * moe.experts_per_token + c.E * moe.num_experts
                  + c.is_ * moe.shared_intermediate_size + c.Er * moe.num_experts * rank
                  + c.Eie * moe.num_experts * moe.expert_intermediate_size + c.Eh * moe.num_experts * arch.hidden_size
                  + c.hk * arch.hidden_size * moe.experts_per_token)
    return max(c.h * arch.hidden_size + split / tp + c.r * rank + c.const, 2.0 * arch.hidden_size)


def compute_bytes(w: Workload) -> int:
    """Bytes per element of activations in the matmuls: 4 in fp32, 2 under autocast or in bf16."""
    return 4 if regime_of(w) in ("fp32", "lora-fp32") else 2


def residual_bytes(w: Workload) -> int:
    """Bytes per element of the residual stream: the weights' dtype (fp32 under autocast, bf16 for a bf16 or
    LoRA-frozen base)."""
    return 2 if regime_of(w) in ("bf16", "lora-bf16", "lora-amp") else 4


def activation_key(arch: ModelArch, w: Workload, ckpt: bool) -> str:
    attn = "eager" if (w.attention == "eager" and not ckpt) else "sdpa"  # ckpt keeps layer inputs only
    regime = regime_of(w)
    if regime.startswith("lora") and not ckpt and attention_only(arch, w.lora.targets if w.lora else None):
        regime += "-attn"  # frozen MLPs keep fewer inputs when only q/v are adapted
    return f"{arch.model_type}/{regime}/{'ckpt' if ckpt else 'full'}/{attn}"


def layers_tokens(arch: ModelArch, r: Resolved) -> list[tuple[float, int]]:
    """(layers, tokens per sequence) groups. Encoder-decoder coefficients are measured per encoder+decoder
    layer pair, so each stack counts as half a pair per layer (exact when input and target lengths match)."""
    if arch.kind == "encoder-decoder":
        return [(arch.num_layers / 2, r.seq), (arch.num_decoder_layers / 2, r.target)]
    return [(arch.num_layers, r.seq)]


def fit_max_seq(arch: ModelArch, w: Workload, ckpt: bool) -> int:
    return FIT_MAX_SEQ["eager" if "/eager" in activation_key(arch, w, ckpt) else "sdpa"]


def dropout_mask_bytes_per_token(arch: ModelArch, seq: int, eager: bool, beta: int) -> float:
    """Dropout's cost per token and layer: the 1-byte masks CUDA's fused dropout keeps (two residual sites),
    and with eager attention the probabilities' mask plus the dropped-out copy the next matmul saves."""
    per = 0.0
    if arch.hidden_dropout > 0:
        per += 2 * arch.hidden_size
    if arch.attention_dropout > 0 and eager:
        per += arch.num_heads * seq * (1 + beta)
    return per


def coefficients(arch: ModelArch, w: Workload, ckpt: bool, table: ActivationTable,
                  notes: list[Note]) -> ActivationCoefficients:
    key = activation_key(arch, w, ckpt)
    row = table.rows.get(key)
    if row is not None and row.max_rel_error > 0.1:
        notes.append(Note(code="activation-approximate", severity="warning",
                          message=f"activations of {key} are not linear in the layer's widths (fit residual up "
                                  f"to {100 * row.max_rel_error:.0f}%); treat them as approximate"))
    if row is None:  # e.g. a combination not measured: fall back to the sdpa / llama row, and say so
        for alt in (key.replace("-attn", ""), key.replace("/eager", "/sdpa"), f"llama/{key.split('/', 1)[1]}"):
            if alt in table.rows:
                notes.append(Note(code="activation-fallback", severity="warning",
                                  message=f"no measured activation coefficients for {key}; used {alt}"))
                return table.rows[alt]
        raise KeyError(key)
    return row


def saved_bytes_per_sample(arch: ModelArch, w: Workload, table: ActivationTable, tp: int = 1) -> float:
    """Bytes autograd saves for backward for one sample, over all layers, without checkpointing: the speed
    model's measure of the elementwise (memory-bound) traffic of a training step."""
    r = resolve(arch, w)
    if arch.kind == "cnn":
        per_elem = table.cnn[regime_of(w) if regime_of(w) in table.cnn else "amp"]
        return per_elem * cnn_feature_elements(arch, r.seq)
    rank = (w.lora or LoraSpec()).rank if w.task in ("lora", "qlora") else 0
    c = coefficients(arch, w, False, table, [])
    total = 0.0
    for layers, seq in layers_tokens(arch, r):
        total += layers * seq * (per_token(c, arch, seq, rank, tp, fit_max_seq(arch, w, False))
                                 + dropout_mask_bytes_per_token(arch, seq, w.attention == "eager", compute_bytes(w)))
    return total


