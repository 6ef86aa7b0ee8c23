"""The matrix of traced cases the estimator ships as supported (estimate within 12% of the exact trace each,
5% at the median): families x tasks x precisions x batch/sequence sizes x checkpointing x attention.

Real Hugging Face configs (tests/fixtures/hf-configs, the built-in presets), most with fewer layers than the
real model so the suite stays fast: per-layer terms and the head are what is being checked, and depth only
scales them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_validation import Case

from gpuplan.catalog.loader import load_presets

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hf-configs"


def _config(name: str, layers: int | None = None) -> dict[str, Any]:
    path = FIXTURES / f"{name}.json"
    cfg = json.loads(path.read_text()) if path.exists() else dict(load_presets()[name].config)
    if layers is not None:
        key = {"gpt2": "n_layer", "bloom": "n_layer", "t5": "num_layers", "mt5": "num_layers"}.get(
            cfg["model_type"], "num_hidden_layers")
        cfg[key] = layers
        if cfg["model_type"] in ("t5", "mt5"):
            cfg["num_decoder_layers"] = layers
        if "layer_types" in cfg:
            cfg["layer_types"] = cfg["layer_types"][:layers]
    return cfg


def cases() -> list[Case]:
    llama = _config("llama-3-8b", 4)
    out = [
        Case(name="llama3-8b/4L amp b1 s512", config=llama),
        Case(name="llama3-8b/4L fp32 b1 s512", config=llama, precision="fp32"),
        Case(name="llama3-8b/4L bf16 b2 s1024", config=llama, precision="bf16", micro_batch_size=2,
             sequence_length=1024),
        Case(name="llama3-8b/4L amp b4 s2048", config=llama, micro_batch_size=4, sequence_length=2048),
        Case(name="llama3-8b/4L amp b4 s2048 ckpt", config=llama, micro_batch_size=4, sequence_length=2048,
             gradient_checkpointing=True),
        Case(name="llama3-8b/4L amp b1 s2048 eager", config=llama, sequence_length=2048, attention="eager"),
        Case(name="llama3-8b/4L lora q,v amp b4 s1024", config=llama, task="lora", micro_batch_size=4,
             sequence_length=1024, lora_targets=["q_proj", "v_proj"]),
        Case(name="llama3-8b/4L lora all amp b2 s2048 ckpt", config=llama, task="lora", micro_batch_size=2,
             sequence_length=2048, gradient_checkpointing=True),
        Case(name="llama3-8b/4L lora all bf16 b2 s1024", config=llama, task="lora", precision="bf16",
             micro_batch_size=2, sequence_length=1024),
        Case(name="llama3-8b/4L adafactor bf16 b2 s1024", config=llama, precision="bf16", optimizer="adafactor",
             micro_batch_size=2, sequence_length=1024),
        Case(name="llama3-8b/4L sgd fp32 b2 s512", config=llama, precision="fp32", optimizer="sgd",
             micro_batch_size=2),
        Case(name="llama3-8b/4L inference b4 ctx2048", config=llama, task="inference", batch_size=4,
             context_length=2048),
        Case(name="llama3-8b/32L amp b1 s512", config=_config("llama-3-8b")),
        Case(name="mistral-7b/4L amp b2 s1024", config=_config("mistral-7b", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="mistral-7b/4L inference b2 ctx8192", config=_config("mistral-7b", 4), task="inference",
             batch_size=2, context_length=8192),
        Case(name="mixtral-8x22b/2L amp b1 s512", config=_config("mixtral-8x22b", 2)),
        Case(name="qwen2.5-72b/2L amp b2 s1024", config=_config("qwen2.5-72b", 2), micro_batch_size=2,
             sequence_length=1024),
        Case(name="qwen2.5-72b/2L lora q,v bf16 b1 s2048", config=_config("qwen2.5-72b", 2), task="lora",
             precision="bf16", sequence_length=2048, lora_targets=["q_proj", "v_proj"]),
        Case(name="qwen3-235b/2L amp b1 s512", config=_config("qwen3-235b-a22b", 2)),
        Case(name="qwen3-8b/4L amp b2 s1024", config=_config("qwen3-8b", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="gemma-2b/4L amp b2 s1024", config=_config("gemma-2b", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="gemma-2-9b/4L amp b1 s1024", config=_config("gemma-2-9b", 4), sequence_length=1024),
        Case(name="gemma-3-1b/4L amp b2 s1024", config=_config("gemma-3-1b", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="phi-2/4L amp b2 s1024", config=_config("phi-2", 4), micro_batch_size=2, sequence_length=1024),
        Case(name="phi-3-mini/4L amp b2 s1024", config=_config("phi-3-mini-4k", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="falcon-7b/4L amp b2 s1024", config=_config("falcon-7b", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="falcon-7b/4L lora qkv bf16 b1 s512", config=_config("falcon-7b", 4), task="lora",
             precision="bf16", lora_targets=["query_key_value"]),
        Case(name="bloomz-7b1/2L amp b1 s1024", config=_config("bloomz-7b1", 2), sequence_length=1024),
        Case(name="stablelm-alpha-3b/4L amp b2 s1024", config=_config("stablelm-base-alpha-3b", 4),
             micro_batch_size=2, sequence_length=1024),
        Case(name="stablelm-2-1.6b/4L amp b2 s1024", config=_config("stablelm-2-1.6b", 4), micro_batch_size=2,
             sequence_length=1024),
        Case(name="gpt2 fp32 b4 s512", config=_config("gpt2"), precision="fp32", micro_batch_size=4),
        Case(name="gpt2 amp b8 s1024 ckpt", config=_config("gpt2"), micro_batch_size=8, sequence_length=1024,
             gradient_checkpointing=True),
        Case(name="bert-large fp32 b4 s512", config=_config("bert-large-uncased"), precision="fp32",
             micro_batch_size=4),
        Case(name="bert-large amp b8 s512 eager", config=_config("bert-large-uncased"), micro_batch_size=8,
             attention="eager"),
        Case(name="roberta-base amp b16 s256", config=_config("roberta-base"), micro_batch_size=16,
             sequence_length=256),
        # transformers 5 ties T5's lm_head on build (the checkpoint has its own): trace and estimate alike
        Case(name="t0-3b/4L fp32 b8 s128", config={**_config("t0-3b", 4), "tie_word_embeddings": True},
             precision="fp32", micro_batch_size=8,
             sequence_length=128),
        Case(name="vit-base amp b32", config=_config("vit-base-patch16-224"), micro_batch_size=32),
        # activation-dominated: long sequences and big batches
        Case(name="llama3-8b/4L amp b8 s4096", config=llama, micro_batch_size=8, sequence_length=4096),
        Case(name="llama3-8b/4L bf16 b4 s8192 eager", config=llama, precision="bf16", micro_batch_size=4,
             sequence_length=8192, attention="eager"),
        Case(name="mistral-7b/4L amp b8 s4096 ckpt", config=_config("mistral-7b", 4), micro_batch_size=8,
             sequence_length=4096, gradient_checkpointing=True),
        Case(name="mixtral-8x22b/2L amp b4 s4096", config=_config("mixtral-8x22b", 2), micro_batch_size=4,
             sequence_length=4096),
        Case(name="qwen3-235b/2L lora q,v bf16 b4 s4096", config=_config("qwen3-235b-a22b", 2), task="lora",
             precision="bf16", micro_batch_size=4, sequence_length=4096, lora_targets=["q_proj", "v_proj"]),
        Case(name="qwen2.5-72b/2L amp b4 s4096", config=_config("qwen2.5-72b", 2), micro_batch_size=4,
             sequence_length=4096),
        Case(name="gemma-2b/4L bf16 b8 s2048", config=_config("gemma-2b", 4), precision="bf16", micro_batch_size=8,
             sequence_length=2048),
        Case(name="phi-2/4L fp32 b8 s2048", config=_config("phi-2", 4), precision="fp32", micro_batch_size=8,
             sequence_length=2048),
        Case(name="gpt2 fp32 b16 s1024 eager", config=_config("gpt2"), precision="fp32", micro_batch_size=16,
             sequence_length=1024, attention="eager"),
        Case(name="falcon-7b/4L amp b8 s2048", config=_config("falcon-7b", 4), micro_batch_size=8,
             sequence_length=2048),
        Case(name="bert-base fp32 b32 s512", config=_config("bert-base-uncased"), precision="fp32",
             micro_batch_size=32),
        Case(name="vit-large amp b128", config=_config("vit-large-patch16-224"), micro_batch_size=128),
        Case(name="resnet-50 fp32 b64", config=_config("resnet-50"), precision="fp32", micro_batch_size=64),
        Case(name="resnet-50 amp b128 192px", config=_config("resnet-50"), micro_batch_size=128, image_size=192),
        # the extremes of issue 15: masked-LM pre-training (the vocabulary-sized logits of every position), a small
        # model with a 150k vocabulary in fp32 (its logits and their copies outweigh the layers), prefill of
        # hundreds of thousands of tokens at once (b >= 8 x ctx >= 32k; sliding-window masks)
        Case(name="bert-base MLM amp b32 s512", config=_config("bert-base-uncased"), task="pretrain",
             micro_batch_size=32),
        Case(name="qwen2.5-0.5b fp32 b4 s1024", config=_config("qwen2.5-0.5b"), precision="fp32", micro_batch_size=4,
             sequence_length=1024),
        Case(name="llama3-8b/2L inference b8 ctx32768", config=_config("llama-3-8b", 2), task="inference",
             batch_size=8, context_length=32768),
        Case(name="mistral-7b/2L inference b16 ctx32768", config=_config("mistral-7b", 2), task="inference",
             batch_size=16, context_length=32768),
        # chunked cross-entropy (loss: chunked; the tracer runs torchtune's CEWithChunkedOutputLoss)
        Case(name="llama3-8b/4L amp b4 s2048 chunked", config=llama, micro_batch_size=4, sequence_length=2048,
             loss="chunked"),
        Case(name="qwen2.5-0.5b/4L bf16 b8 s2048 chunked", config=_config("qwen2.5-0.5b", 4), precision="bf16",
             micro_batch_size=8, sequence_length=2048, loss="chunked"),
        Case(name="qwen2.5-0.5b/4L inference fp32 b8 ctx32768", config=_config("qwen2.5-0.5b", 4), task="inference",
             batch_size=8, context_length=32768, weights_dtype="fp32"),
        # issue 29: `engine: transformers` (Hugging Face generate()) as `gpuplan estimate` reports it, against the
        # prefill of the real models at full depth, batch x context up to 8 x 32k (Mistral's sliding window makes its
        # mask explicit beyond 4k tokens; the cache keeps every token whatever the window)
        *[Case(name=f"{name} engine transformers b{b} ctx{ctx}", config=_config(name), task="inference",
               batch_size=b, context_length=ctx, engine="transformers")
          for name, shapes in (("mistral-7b", ((8, 32768), (1, 32768), (8, 4096))),
                               ("llama-3-8b", ((8, 32768), (2, 8192))),
                               ("qwen2.5-7b", ((8, 32768), (4, 16384))))
          for b, ctx in shapes],
    ]
    return out
