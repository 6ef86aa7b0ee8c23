"""Measure what each supported architecture saves for backward, per layer and per token, and write the
coefficients to src/gpuplan/data/activations.toml.

How: build tiny models of each family with real (CPU) tensors, run one forward with labels under each
precision regime, and record every tensor autograd saves for backward (torch saved_tensors_hooks),
counting each storage once and leaving parameters out. The per-layer cost is the difference between a
2-layer and a 1-layer model; it is fitted, over several random shapes, as a linear combination of the
per-token sizes h (hidden), q (query width), kv (key/value width), i (MLP width), H (heads), H*s (eager
attention scores), ie*k (routed expert width x experts per token), E (experts). Coefficients are bytes.

The forward runs under gpuplan.trace.cuda_emulation, so the CPU allocates what CUDA would: CUDA's autocast
lists, its SDPA kernels (flash / memory-efficient, no seq x seq tensors) and its fused dropout. Dropout is
switched off while measuring (masks are added analytically, 1 byte per element as CUDA's fused dropout keeps
them). Run: python scripts/fit_activations.py  (needs the `trace` extra; ~5 minutes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageClassification,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
)

from gpuplan.trace.cuda_emulation import cuda_emulation  # CUDA's autocast lists, fused dropout, SDPA kernels

transformers.logging.set_verbosity_error()
BASIS = ["h", "q", "kv", "i", "H", "Hs", "s", "qg", "r", "iek", "E", "is", "Er", "Eie", "Eh", "ql", "kl", "v", "hk",
         "1"]


def build_config(model_type: str, d: dict) -> dict:
    h, heads, kv, hd, i = d["h"], d["heads"], d["kv_heads"], d["hd"], d["i"]
    common = dict(model_type=model_type, vocab_size=d["V"], tie_word_embeddings=False, pad_token_id=0,
                  bos_token_id=1, eos_token_id=2)
    nodrop = dict(attention_dropout=0.0, hidden_dropout=0.0)
    if model_type in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "stablelm"):
        c = dict(common, hidden_size=h, intermediate_size=i, num_attention_heads=heads, num_key_value_heads=kv,
                 head_dim=hd, **nodrop)
        if model_type == "stablelm":
            c.pop("head_dim")
            c["hidden_size"] = heads * hd
        if model_type in ("gemma2", "gemma3_text"):
            c.update(sliding_window=4096, final_logit_softcapping=None, attn_logit_softcapping=None)
        if model_type == "phi3":
            c.update(resid_pdrop=0.0, embd_pdrop=0.0)
            c.pop("head_dim")
            c["hidden_size"] = heads * hd
        return c
    if model_type == "llama4_text":  # every layer MoE: routed experts plus a shared expert of the same width
        return dict(common, hidden_size=h, intermediate_size=d["ie"], intermediate_size_mlp=i,
                    num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd, num_local_experts=d["E"],
                    num_experts_per_tok=d["k"], interleave_moe_layer_step=1, attention_dropout=0.0)
    if model_type == "deepseek_v3":  # MLA; every layer MoE (routed experts and a shared one), one routing group
        return dict(common, hidden_size=h, intermediate_size=i, moe_intermediate_size=d["ie"],
                    num_attention_heads=heads, num_key_value_heads=heads, n_routed_experts=d["E"],
                    num_experts_per_tok=d["k"], n_shared_experts=d["is"] // d["ie"], first_k_dense_replace=0,
                    n_group=1, topk_group=1, q_lora_rank=d["ql"], kv_lora_rank=d["kl"] - d["rope"],
                    qk_nope_head_dim=d["hd"] - d["rope"], qk_rope_head_dim=d["rope"], v_head_dim=d["vd"],
                    attention_dropout=0.0)
    if model_type in ("mixtral", "qwen2_moe", "qwen3_moe"):
        c = dict(common, hidden_size=h, intermediate_size=i, num_attention_heads=heads, num_key_value_heads=kv,
                 head_dim=hd, num_experts_per_tok=d["k"], **nodrop)
        if model_type == "mixtral":
            c.update(num_local_experts=d["E"], intermediate_size=d["ie"])
        else:
            c.update(num_experts=d["E"], moe_intermediate_size=d["ie"])
            if model_type == "qwen2_moe":
                c.update(shared_expert_intermediate_size=d["is"])
        return c
    if model_type == "phi":
        return dict(common, hidden_size=heads * hd, intermediate_size=i, num_attention_heads=heads,
                    num_key_value_heads=heads, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)
    if model_type == "gpt_neox":
        return dict(common, hidden_size=heads * hd, intermediate_size=i, num_attention_heads=heads, **nodrop)
    if model_type == "gpt2":
        return dict(common, n_embd=heads * hd, n_inner=i, n_head=heads, n_positions=512, resid_pdrop=0.0,
                    attn_pdrop=0.0, embd_pdrop=0.0)
    if model_type == "falcon":
        return dict(common, hidden_size=heads * hd, ffn_hidden_size=i, num_attention_heads=heads, multi_query=True,
                    **nodrop)
    if model_type == "bloom":
        return dict(common, hidden_size=heads * hd, n_head=heads, **nodrop)
    if model_type == "mpt":  # transformers' MPT: ALiBi always, an MLP of 4 x d_model, no SDPA path
        return dict(common, d_model=heads * hd, n_heads=heads, expansion_ratio=4, resid_pdrop=0, emb_pdrop=0,
                    attn_config={"alibi": True, "attn_pdrop": 0})  # MptConfig's fields are typed int
    if model_type in ("bert", "roberta"):
        return dict(common, hidden_size=heads * hd, intermediate_size=i, num_attention_heads=heads,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=600)
    if model_type in ("t5", "mt5"):
        return dict(common, d_model=h, d_kv=hd, d_ff=i, num_heads=heads, dropout_rate=0.0, decoder_start_token_id=0,
                    feed_forward_proj="relu" if model_type == "t5" else "gated-gelu")
    if model_type == "vit":
        return dict(model_type="vit", hidden_size=heads * hd, intermediate_size=i, num_attention_heads=heads,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, image_size=d["img"], patch_size=8)
    raise ValueError(model_type)


def model_class(model_type: str):
    if model_type in ("t5", "mt5"):
        return AutoModelForSeq2SeqLM
    if model_type in ("bert", "roberta"):
        return AutoModelForSequenceClassification
    if model_type == "vit":
        return AutoModelForImageClassification
    return AutoModelForCausalLM


#: families whose SDPA call carries an explicit mask or bias the efficient kernel keeps (seq x seq terms)
MASKED_SDPA = ("t5", "mt5", "falcon")
LAYER_KEYS = {"gpt2": "n_layer", "bloom": "n_layer", "mpt": "n_layers", "t5": "num_layers", "mt5": "num_layers"}


def saved_bytes(cfg: dict, regime: str, ckpt: bool, b: int, s: int, attn: str, rank: int = 8) -> int:
    """Bytes autograd saves for backward over one forward+loss (parameters excluded)."""
    torch.manual_seed(0)
    c = AutoConfig.for_model(**cfg)
    m = model_class(cfg["model_type"]).from_config(c, attn_implementation=attn)
    lora = regime.startswith("lora")
    if lora:
        from peft import LoraConfig, get_peft_model
        if not regime.startswith("lora-fp32"):
            m = m.to(torch.bfloat16)
        targets = attention_targets(cfg) if regime.endswith("-attn") else "all-linear"
        if cfg["model_type"] == "llama4_text" and targets == "all-linear":  # PEFT's LoRA on Llama4Router (a Linear
            # that returns a tuple) fails in forward: the linears a run can adapt
            targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        m = get_peft_model(m, LoraConfig(r=rank, lora_alpha=16, target_modules=targets, lora_dropout=0.0))
    elif regime == "bf16":
        m = m.to(torch.bfloat16)
    m.train()
    if ckpt:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:
            m.enable_input_require_grads()
    params = {p.untyped_storage().data_ptr() for p in m.parameters()}
    casts: dict[tuple, list] = {}
    for p in m.parameters():  # autocast's cached 16-bit weight copies are weights, not activations
        if p.dtype == torch.float32:
            casts.setdefault(tuple(p.shape), []).append(p.detach().to(torch.bfloat16))
    seen: dict[int, int] = {}

    def is_cast(t) -> bool:
        if t.dtype != torch.bfloat16:
            return False
        if any(torch.equal(t, c) for c in casts.get(tuple(t.shape), [])):
            return True
        return t.dim() == 2 and any(torch.equal(t.t(), c) for c in casts.get(tuple(t.t().shape), []))

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params and st.nbytes() and not is_cast(t):
            seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        return t

    mt = cfg["model_type"]
    if mt == "vit":
        kw = dict(pixel_values=torch.randn(b, 3, cfg["image_size"], cfg["image_size"]),
                  labels=torch.randint(0, 2, (b,)))
    elif mt in ("bert", "roberta"):
        kw = dict(input_ids=torch.randint(3, cfg["vocab_size"], (b, s)), labels=torch.randint(0, 2, (b,)))
    elif mt in ("t5", "mt5"):
        kw = dict(input_ids=torch.randint(0, cfg["vocab_size"], (b, s)),
                  labels=torch.randint(0, cfg["vocab_size"], (b, s)))
    else:
        ids = torch.randint(0, cfg["vocab_size"], (b, s))
        kw = dict(input_ids=ids, labels=ids)
    amp = regime in ("amp", "lora-amp", "lora-amp-attn")
    ctx = torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp)
    with cuda_emulation(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), ctx:
        m(**kw)
    return sum(seen.values())


def attention_targets(cfg: dict) -> list[str]:
    """LoRA on the attention's query and value only (PEFT's usual default), by the family's module names."""
    from gpuplan.catalog.hf_config import arch_from_hf_config
    from gpuplan.core.sizing.lora import ATTENTION_QV

    return ATTENTION_QV(arch_from_hf_config(cfg))


def features(d: dict, s: int) -> list[float]:
    return [d["h"], d["heads"] * d["hd"], d["kv_heads"] * d["hd"], d["i"], d["heads"], d["heads"] * s, s,
            d["heads"] * d["hd"] if d["kv_heads"] < d["heads"] else 0, d["r"], d["ie"] * d["k"], d["E"], d["is"],
            d["E"] * d["r"], d["E"] * d["ie"], d["E"] * d["h"], d["ql"], d["kl"], d["heads"] * d["vd"],
            d["h"] * d["k"] if d["ql"] else 0, 1.0]


def random_dims(rng: random.Random, model_type: str) -> dict:
    heads = rng.choice([2, 4, 6])
    kv = rng.choice([k for k in (1, 2, heads) if heads % k == 0])
    if model_type in ("phi", "gpt_neox", "gpt2", "bloom", "mpt", "bert", "roberta", "vit", "t5", "mt5"):
        kv = heads
    if model_type == "falcon":
        kv = 1
    hd = rng.choice([16, 32])
    h = (heads * hd if model_type not in ("deepseek_v3", "llama", "llama4_text", "mistral", "qwen2", "qwen3", "gemma",
                                           "gemma2", "gemma3_text", "mixtral", "qwen2_moe", "qwen3_moe", "t5", "mt5")
         else heads * rng.choice([20, 28, 36]))
    i = 4 * h if model_type in ("bloom", "mpt") else rng.choice([200, 264, 320])
    return dict(h=h, heads=heads, kv_heads=kv, hd=hd, i=i, V=rng.choice([500, 700]), E=rng.choice([4, 6]),
                k=2, ie=rng.choice([48, 80]), r=rng.choice([4, 8, 16]), **{"is": rng.choice([64, 96])},
                img=rng.choice([32, 48]), ql=0, kl=0, vd=0, rope=0)


def mla_dims(rng: random.Random, d: dict) -> None:
    """DeepSeek-V3's latent widths, varied apart: query rank, KV latent (rank + RoPE key), value head width;
    the shared expert one or two routed experts wide. Head widths are multiples of 8, as DeepSeek-V3's (nope 128,
    rope 64, v 128): the values (a slice after the nope keys) stay aligned for CUDA's efficient SDPA kernel, which
    takes a value width other than the query's (flash does not)."""
    d["rope"], d["hd"] = 8, rng.choice([24, 32, 40])
    d.update(ql=rng.choice([24, 40, 56]), kl=rng.choice([16, 32, 48]) + d["rope"], vd=rng.choice([8, 16, 24]),
             k=rng.choice([1, 2]))
    d["is"] = d["ie"] * rng.choice([1, 2])
    d["kv_heads"] = d["heads"]


def fit(model_type: str, regime: str, ckpt: bool, attn: str, n: int = 11, seed: int = 0) -> dict:
    rng = random.Random(seed)
    rows, ys, nonlayer = [], [], []
    moe = model_type in ("mixtral", "qwen2_moe", "qwen3_moe", "llama4_text", "deepseek_v3")
    if moe:  # more widths vary (experts, expert width, shared width): enough samples for every term
        n = max(n, 32)
    for _ in range(n):
        d = random_dims(rng, model_type)
        if not moe:
            d.update(E=0, k=0, ie=0, **{"is": 0})
        elif model_type == "llama4_text":  # the shared expert is as wide as a routed one; vary top-k to tell them apart
            d["is"], d["k"] = d["ie"], rng.choice([1, 2])
        elif model_type == "deepseek_v3":
            mla_dims(rng, d)
        elif model_type != "qwen2_moe":
            d["is"] = 0
        # eager attention's seq x seq terms must be pinned down for long sequences: measure at longer ones
        lengths = [128, 256, 384, 512] if attn == "eager" else [16, 32, 48, 64]
        b, s = rng.choice([1, 2, 3]), rng.choice(lengths) if model_type != "vit" else 0
        cfg = build_config(model_type, d)
        key = LAYER_KEYS.get(model_type, "num_hidden_layers")
        if model_type == "vit":
            s = (d["img"] // 8) ** 2 + 1
        if not regime.startswith("lora"):
            d["r"] = 0
        one = saved_bytes({**cfg, key: 1}, regime, ckpt, b, max(s, 1), attn, d["r"])
        two = saved_bytes({**cfg, key: 2}, regime, ckpt, b, max(s, 1), attn, d["r"])
        tokens = b * s
        rows.append(features(d, s))
        ys.append((two - one) / tokens)
        nonlayer.append((one - (two - one), tokens, d))
    x, y = np.array(rows, dtype=float), np.array(ys)
    used = [j for j in range(len(BASIS)) if x[:, j].any()]
    if model_type in ("mixtral", "qwen3_moe", "llama4_text", "deepseek_v3"):  # every layer MoE: no dense width
        used = [j for j in used if BASIS[j] != "i"]
    if model_type != "llama4_text":  # only transformers' Llama 4 runs every expert on every token (hidden x experts)
        used = [j for j in used if BASIS[j] != "Eh"]
    if model_type == "deepseek_v3" and not regime.startswith("lora"):  # experts x expert width is PEFT's per-expert
        used = [j for j in used if BASIS[j] != "Eie"]  # adapters: with 4-6 experts it fits noise, x256 at scale
    if attn == "sdpa" and model_type not in MASKED_SDPA:  # flash/efficient kernels keep no seq x seq tensor:
        used = [j for j in used if BASIS[j] not in ("Hs", "s", "qg")]  # such terms would only fit noise
    coef, *_ = np.linalg.lstsq(x[:, used], y, rcond=None)
    full = {BASIS[j]: 0.0 for j in range(len(BASIS))}
    for j, c in zip(used, coef):
        full[BASIS[j]] = round(float(c), 3)
    pred = x @ np.array([full[k] for k in BASIS])
    err = float(np.max(np.abs(pred - y) / y))
    return {"coef": full, "max_rel_error": round(err, 4)}


FAMILIES = ["deepseek_v3",
            "llama", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
            "gemma3_text", "phi", "phi3", "gpt2", "gpt_neox", "falcon", "bloom", "mpt", "stablelm", "bert", "roberta",
            "t5", "mt5", "vit"]
REGIMES = ["fp32", "amp", "bf16", "lora-amp", "lora-bf16", "lora-fp32", "lora-amp-attn", "lora-bf16-attn",
           "lora-fp32-attn"]

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="*", default=FAMILIES)
    ap.add_argument("--regimes", nargs="*", default=REGIMES)
    ap.add_argument("--jsonl", default="activations.jsonl", help="results so far, one per line; resumed")
    ap.add_argument("--toml", default=None, help="write the data file from the jsonl and stop")
    ap.add_argument("--attention", nargs="*", default=["sdpa", "eager"], help="the attention kinds to measure")
    a = ap.parse_args()
    done: dict[str, dict] = {}
    path = Path(a.jsonl)
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            done[row["key"]] = row
    if a.toml:
        write_toml(done, Path(a.toml))
        return
    with path.open("a") as out:
        for fam in a.families:
            for regime in a.regimes:
                for ckpt in (False, True):
                    for attn in a.attention:
                        key = f"{fam}/{regime}/{'ckpt' if ckpt else 'full'}/{attn}"
                        if (ckpt and (attn == "eager" or regime.endswith("-attn"))) or key in done:
                            continue
                        try:
                            r = fit(fam, regime, ckpt, attn)
                        except ValueError as exc:  # e.g. no SDPA in this architecture: it runs eager
                            if "scaled_dot_product_attention" not in str(exc):
                                raise
                            if ckpt:  # checkpointing keeps only layer inputs: the attention kind does not matter
                                r = {**fit(fam, regime, ckpt, "eager"), "why": "no SDPA path: measured eager"}
                            else:
                                r = {"use": "eager", "why": "transformers has no SDPA path for this architecture"}
                        row = {"key": key, **r}
                        done[key] = row
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        print(key, r, file=sys.stderr, flush=True)


def write_toml(done: dict[str, dict], path: Path) -> None:
    lines = [
        "# Activation bytes saved for backward, per layer and per token, measured on the Hugging Face",
        "# implementation of each architecture by scripts/fit_activations.py (saved-tensor hooks on real CPU",
        "# runs of tiny models, fitted over random shapes). Do not edit by hand: rerun the script.",
        "# Coefficients multiply the layer's widths: h hidden, q query width, kv key/value width, i MLP width,",
        "# H heads, Hs heads x sequence, s sequence, qg query width when GQA repeats K/V (eager), r LoRA rank,",
        "# iek routed-expert width x experts per token, E experts, is shared-expert width; MLA: ql query rank,",
        "# kl KV latent (kv_lora_rank + qk_rope_head_dim), v heads x v_head_dim, hk hidden x experts per token",
        "# (each routed token's gathered input; measured for deepseek_v3 only); '1' is a constant.",
        "schema_version = 1",
        f'source = "scripts/fit_activations.py, transformers {transformers.__version__}, '
        f'torch {torch.__version__.split("+")[0]}"',
        f"as_of = {datetime.date.today().isoformat()}",
        "",
    ]
    for key in sorted(done):
        row = done[key]
        if "use" in row:  # this attention runs as another one: copy its coefficients
            alt = key.rsplit("/", 1)[0] + "/" + row["use"]
            if alt not in done:
                continue
            row = {**done[alt], "key": key}
        lines.append("[[row]]")
        lines.append(f'key = "{key}"')
        for name, value in row["coef"].items():
            if abs(value) > 1e-6:
                lines.append(f'"{name}" = {round(value, 3)}')
        lines.append(f"max_rel_error = {row['max_rel_error']}")
        lines.append("")
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
