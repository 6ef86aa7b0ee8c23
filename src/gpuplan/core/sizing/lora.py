"""LoRA adapters: which linear layers a target list adapts, and how many parameters that adds.

Module names are those of the Hugging Face implementation (q_proj, query_key_value, c_attn, wi_0, ...);
"all-linear" adapts every linear layer except the output head, as PEFT does. Mixture-of-experts blocks
follow PEFT 0.21 on transformers 5: mixtral/qwen3_moe fused expert weights get one adapter per expert
(rank r each), qwen2_moe's routed experts are not adapted (only its shared expert and gate). "all-linear" also
adapts the classification heads of encoders and ViT (PEFT excludes only the output embeddings)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.errors import InputError, clip, suggest
from gpuplan.schema.model import ModelArch

Linear = tuple[str, int, int, int]  # (module name, in features, out features, how many in the model)

_FUSED_QKV = {"gpt_neox": "query_key_value", "falcon": "query_key_value", "bloom": "query_key_value",
              "phi3": "qkv_proj", "gpt2": "c_attn", "mpt": "Wqkv"}
_NAMES = {
    "default": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    "phi": ("q_proj", "k_proj", "v_proj", "dense", "fc1", "fc1", "fc2"),
    "gpt2": ("c_attn", "c_attn", "c_attn", "c_proj", "c_fc", "c_fc", "c_proj"),
    "gpt_neox": ("", "", "", "dense", "dense_h_to_4h", "dense_h_to_4h", "dense_4h_to_h"),
    "falcon": ("", "", "", "dense", "dense_h_to_4h", "dense_h_to_4h", "dense_4h_to_h"),
    "bloom": ("", "", "", "dense", "dense_h_to_4h", "dense_h_to_4h", "dense_4h_to_h"),
    "mpt": ("", "", "", "out_proj", "up_proj", "up_proj", "down_proj"),
    "bert": ("query", "key", "value", "dense", "dense", "dense", "dense"),
    "vit": ("q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc1", "fc2"),
    "t5": ("q", "k", "v", "o", "wi_0", "wi_1", "wo"),
}


def block_linears(arch: ModelArch) -> list[Linear]:
    """Every linear layer of the model's blocks (and pooler/classifier dense layers), with multiplicity."""
    h, q, kv, i = arch.hidden_size, arch.q_dim, arch.kv_dim, arch.intermediate_size
    family = {"roberta": "bert", "mt5": "t5"}.get(arch.model_type, arch.model_type)
    qn, kn, vn, on, gn, un, dn = _NAMES.get(family, _NAMES["default"])
    n = arch.num_layers
    out: list[Linear] = []
    if arch.mla is not None:  # DeepSeek-V3's latent attention
        la, heads = arch.mla, arch.num_heads
        if la.q_lora_rank:
            out += [("q_a_proj", h, la.q_lora_rank, n), ("q_b_proj", la.q_lora_rank, heads * la.qk_head_dim, n)]
        else:
            out.append(("q_proj", h, heads * la.qk_head_dim, n))
        out += [("kv_a_proj_with_mqa", h, la.latent, n),
                ("kv_b_proj", la.kv_lora_rank, heads * (la.qk_nope_head_dim + la.v_head_dim), n),
                ("o_proj", heads * la.v_head_dim, h, n)]
    elif arch.model_type in _FUSED_QKV:
        out.append((_FUSED_QKV[arch.model_type], h, q + 2 * kv, n))
    else:
        out += [(qn, h, q, n), (kn, h, kv, n), (vn, h, kv, n)]
    if arch.mla is None:
        out.append((on, q, h, n))
    if family == "t5":  # decoder: self-attention + cross-attention, both q/k/v/o
        d = arch.num_decoder_layers
        out += [(qn, h, q, 2 * d), (kn, h, kv, 2 * d), (vn, h, kv, 2 * d), (on, q, h, 2 * d)]
        mlp_layers = n + d
        if arch.mlp_gated:
            out += [("wi_0", h, i, mlp_layers), ("wi_1", h, i, mlp_layers)]
        else:
            out.append(("wi", h, i, mlp_layers))
        out.append(("wo", i, h, mlp_layers))
        return out
    dense_layers = n - (arch.moe.moe_layers if arch.moe else 0)
    if arch.model_type == "gpt_oss":  # every layer MoE: a router (with bias) and fused experts, no plain MLP
        out.append(("router", h, arch.moe.num_experts if arch.moe else 0, n))
        return out
    if arch.model_type == "phi3":
        out.append(("gate_up_proj", h, 2 * i, dense_layers))
    elif arch.mlp_gated:
        out += [(gn, h, i, dense_layers), (un, h, i, dense_layers)]
    else:
        out.append((gn, h, i, dense_layers))
    out.append((dn, i, h, dense_layers))
    if arch.moe is not None:
        m, e = arch.moe, arch.moe.moe_layers
        if arch.model_type != "qwen2_moe":  # qwen2_moe's router is not a plain Linear PEFT adapts
            out.append(("router" if arch.model_type == "llama4_text" else "gate", h, m.num_experts, e))
        if m.shared_intermediate_size:
            s = m.shared_intermediate_size
            out += [("gate_proj", h, s, e), ("up_proj", h, s, e), ("down_proj", s, h, e)]
            if m.shared_expert_gate:
                out.append(("shared_expert_gate", h, 1, e))
    if arch.pooler:  # bert: pooler dense, then the classifier
        out += [("dense", h, h, 1), ("classifier", h, arch.num_labels, 1)]
    elif arch.kind == "encoder":  # roberta's classification head: dense + out_proj
        out += [("dense", h, h, 1), ("out_proj", h, arch.num_labels, 1)]
    elif arch.kind == "vit":
        out.append(("classifier", h, arch.num_labels, 1))
    return out


def _expert_adapters(arch: ModelArch, rank: int) -> int:
    """PEFT's adapters on fused 3-D expert weights: rank 2r per expert on the fused gate_up (r for each of
    gate and up), rank r on down."""
    m = arch.moe
    if m is None or arch.model_type in ("qwen2_moe", "llama4_text", "gpt_oss"):  # llama4's and gpt-oss's experts
        return 0  # are plain Parameters: PEFT's all-linear leaves them
    h, ie = arch.hidden_size, m.expert_intermediate_size
    return m.moe_layers * rank * m.num_experts * (2 * (h + 2 * ie) + (ie + h))


#: linears PEFT 0.21's "all-linear" leaves on transformers 5 models it maps to attention modules plus expert
#: parameters: DeepSeek-V3's dense MLPs and shared experts (its targets are q_a/q_b/kv_a/kv_b/o_proj and the
#: parameters gate.weight, gate_up_proj, down_proj), gpt-oss's router and experts (q/k/v/o only). Measured with
#: tests/trace/test_param_counts.py::test_lora_all_linear_equals_peft.
_ALL_LINEAR_LEAVES = {"deepseek_v3": frozenset({"gate_proj", "up_proj", "down_proj"}),
                      "gpt_oss": frozenset({"router"})}


def lora_params(arch: ModelArch, rank: int, targets: list[str] | None = None) -> int:
    """Adapter parameters: r x (in + out) for each targeted linear layer."""
    targets = targets or ["all-linear"]
    every = "all-linear" in targets
    wanted = set(targets)
    if not every and arch.model_type in _FUSED_QKV:  # asking for q/k/v on a fused model means the fused layer
        if wanted & _QKV_NAMES:
            wanted.add(_FUSED_QKV[arch.model_type])
    total = 0
    seen_fused = False
    skip = _ALL_LINEAR_LEAVES.get(arch.model_type, frozenset()) if every else frozenset()
    for name, n_in, n_out, count in block_linears(arch):
        if (every and name not in skip) or name in wanted:
            if name == _FUSED_QKV.get(arch.model_type) and arch.model_type == "gpt2":
                if seen_fused:
                    continue
                seen_fused = True
            total += rank * (n_in + n_out) * count
    if every or "experts" in wanted:
        total += _expert_adapters(arch, rank)
    return total


def known_module_names(arch: ModelArch) -> set[str]:
    return {name for name, *_ in block_linears(arch)} | {"all-linear"} | (
        {"experts"} if arch.moe else set())


#: module names of q/k/v that mean the fused QKV layer on a model that fuses them (lora_params maps them)
_QKV_NAMES = frozenset({"q_proj", "k_proj", "v_proj", "query", "key", "value"})
#: every target name some supported model has: a name outside it is a typo whatever the model
ALL_TARGET_NAMES = frozenset({n for names in _NAMES.values() for n in names if n} | set(_FUSED_QKV.values())
                             | {"all-linear", "experts", "gate", "gate_up_proj", "wi", "classifier", "out_proj",
                                "shared_expert_gate", "router", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                                "kv_b_proj"} | _QKV_NAMES)


def _unknown_target(loc: Sequence[str | int], name: str, known: Sequence[str], subject: str) -> InputError:
    hint = suggest(name, known)
    message = f"{subject} {clip(name)}; LoRA would adapt nothing there" + (
        f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
    error = InputError(loc, message, ", ".join(sorted(known)))
    error.suggestions = hint  # type: ignore[attr-defined]
    return error


def check_target_names(targets: Sequence[str], loc: Sequence[str | int] = ("workload", "lora", "targets")) -> None:
    """A target no supported model has (a typo): InputError with the closest names."""
    for i, name in enumerate(targets):
        if name not in ALL_TARGET_NAMES:
            raise _unknown_target([*loc, i], name, sorted(ALL_TARGET_NAMES),
                                  "no model gpuplan knows has a linear layer named")


def check_targets(arch: ModelArch, targets: Sequence[str] | None,
                  loc: Sequence[str | int] = ("workload", "lora", "targets")) -> None:
    """Every target names a linear layer of this model (else LoRA would add nothing for it, silently):
    InputError naming the target, with the model's linear names as did-you-mean."""
    known = known_module_names(arch)
    fused = _QKV_NAMES if arch.model_type in _FUSED_QKV else frozenset()
    for i, name in enumerate(targets or []):
        if name not in known and name not in fused:
            raise _unknown_target([*loc, i], name, sorted(known),
                                  f"the {arch.model_type} model has no linear layer named")


def ATTENTION_QV(arch: ModelArch) -> list[str]:
    """The query and value projections' module names (the fused QKV layer where the family fuses them)."""
    if arch.model_type in _FUSED_QKV:
        return [_FUSED_QKV[arch.model_type]]
    family = {"roberta": "bert", "mt5": "t5"}.get(arch.model_type, arch.model_type)
    names = _NAMES.get(family, _NAMES["default"])
    return [names[0], names[2]]


def attention_only(arch: ModelArch, targets: list[str] | None) -> bool:
    """True when the targets adapt only the attention's q/k/v projections (the '-attn' activation rows)."""
    if not targets or "all-linear" in targets:
        return False
    qkv = set(ATTENTION_QV(arch)) | {_FUSED_QKV.get(arch.model_type, "")}
    family = {"roberta": "bert", "mt5": "t5"}.get(arch.model_type, arch.model_type)
    names = _NAMES.get(family, _NAMES["default"])
    qkv |= {names[0], names[1], names[2]}
    return set(targets) <= qkv
