"""Peak memory per GPU of serving, as the engine allocates it: weights by dtype (quantization metadata included),
then, for a paged engine (vLLM), the KV cache of every request's prompt and output tokens in whole blocks (GQA,
sliding windows capped at the window, its own dtype), the prefill temporaries at the engine's token budget
(chunked prefill) and the captured CUDA graphs; for Hugging Face generate() (engine transformers, `paged` false),
the prefill of the whole batch at once (with a sliding-window model's explicit masks) and a KV cache of every
prompt and output token of every layer, whatever the window. With `engine` None (data/serving.toml not passed):
generate()'s prefill as the tracer runs it, the KV cache of the prompts alone. Pure."""

from __future__ import annotations

from gpuplan.core.sizing.activations import Resolved, resolve
from gpuplan.core.sizing.levels import _finish
from gpuplan.core.sizing.params import ParamCount, expert_weights
from gpuplan.core.sizing.speculative import draft_of, draft_weight_bytes
from gpuplan.schema.estimate import MemoryEstimate, Note, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload
from gpuplan.schema.serving import EngineDefaults, EngineTier
from gpuplan.units import GIB

#: int8 (LLM.int8 / fp8 row-wise): 1 byte + a 4-byte scale per output row (negligible per param)
#: int4 (GPTQ/AWQ, group size 128): 4 bits + fp16 scale and 4-bit zero per 128 weights
INT4_BYTES_PER_PARAM = 0.5 + (2 + 0.5) / 128
#: NVFP4: 4-bit E2M1 values and one FP8 E4M3 scale per block of 16 (plus one FP32 scale per tensor, negligible):
#: NVIDIA Technical Blog, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference" (2025-06-24)
NVFP4_BYTES_PER_PARAM = 0.5 + 1 / 16
#: MXFP4: 4-bit E2M1 values and one 8-bit E8M0 scale per block of 32: OCP Microscaling Formats (MX) Specification
#: v1.0 (2023-09), section 5, "MXFP4: block size 32, scale E8M0"
MXFP4_BYTES_PER_PARAM = 0.5 + 1 / 32
WEIGHT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": INT4_BYTES_PER_PARAM,
                "nvfp4": NVFP4_BYTES_PER_PARAM, "mxfp4": MXFP4_BYTES_PER_PARAM}
#: the weight dtypes whose matmuls run on FP4 tensor cores where the GPU has them (Blackwell), else weight-only
FP4_WEIGHTS = ("nvfp4", "mxfp4")


def quantized_weights(arch: ModelArch, p: ParamCount, dtype: str) -> int:
    """Parameters a checkpoint of `dtype` (< 16 bits) stores quantized: every linear weight of the blocks; for MXFP4
    on a mixture of experts the routed experts' weights only, as gpt-oss ships them (config.json's
    quantization_config keeps self_attn, the router, the embedding and lm_head out: 12.8 GiB / 60.8 GiB for
    gpt-oss-20b / -120b, OpenAI's model card, arXiv 2508.10925, 2025-08) and vLLM's MXFP4 method loads them (its
    fused-MoE layers in MXFP4, linear layers unquantized)."""
    if dtype == "mxfp4" and arch.moe is not None:
        return expert_weights(arch)
    return p.block_linear_weights


def request_tokens(arch: ModelArch, w: Workload, engine: EngineDefaults | None, r: Resolved | None = None) -> int:
    """KV cache tokens one request holds at its end: prompt and output (whole blocks with an engine); `r`: the
    workload resolved, when the caller has it."""
    r = r or resolve(arch, w)
    generative = arch.kind in ("decoder", "encoder-decoder")
    tokens = r.seq + ((w.output_tokens or 256) if generative else 0)
    if engine is None:
        return r.seq
    block = engine.block_size_tokens  # generate()'s cache grows a token at a time: blocks of 1
    return -(-tokens // block) * block


def engine_tier(engine: EngineDefaults, gpu_gib: float | None) -> EngineTier | None:
    """The engine's defaults for a GPU of `gpu_gib` (SGLang's by GPU memory); None: the engine has none, or no GPU."""
    if gpu_gib is None:
        return None
    return next((t for t in engine.gpu_tiers if gpu_gib < t.below_gib), None)


def prefill_budget(w: Workload, engine: EngineDefaults | None, large_gpu: bool = True,
                   gpu_gib: float | None = None) -> int | None:
    """Tokens one engine step prefills at most: workload.prefill_tokens, else the engine's default budget (None: the
    whole batch at once, as generate() does): by the GPU's memory where the engine sets it so (SGLang's
    chunked-prefill size, `gpu_gib`), else vLLM's large- or small-GPU default (`large_gpu`)."""
    if w.prefill_tokens:
        return w.prefill_tokens
    if engine is None or not engine.paged:
        return None
    tier = engine_tier(engine, gpu_gib)
    if tier is not None:
        return tier.chunked_prefill_tokens
    return engine.max_num_batched_tokens_large if large_gpu else engine.max_num_batched_tokens_small


def static_reserve_bytes(engine: EngineDefaults, w: Workload, lay: Layout, gpu_bytes: int | None) -> float:
    """The memory per GPU an engine with a static pool (SGLang) keeps out of it for the step's activations and CUDA
    graphs: (1 - workload.gpu_memory_utilization) of the GPU when the project sets the fraction, else the engine's
    own reserve from its chunked-prefill size and CUDA-graph batch (data/serving.toml [[engine]] sglang)."""
    if w.gpu_memory_utilization and gpu_bytes is not None:
        return (1 - w.gpu_memory_utilization) * gpu_bytes
    tier = engine_tier(engine, gpu_bytes / GIB if gpu_bytes is not None else None)
    chunk = prefill_budget(w, engine, gpu_gib=gpu_bytes / GIB if gpu_bytes is not None else None) or 0
    graphs = ((tier.cuda_graph_max_bs_tp4 if lay.tp >= 4 else tier.cuda_graph_max_bs) if tier
              else engine.cuda_graph_max_bs)
    mib = (engine.reserve_base_mib
           + max(chunk, engine.reserve_min_prefill_tokens) * engine.reserve_mib_per_prefill_token
           + graphs * engine.reserve_mib_per_graph_batch + lay.tp * lay.pp * engine.reserve_mib_per_gpu)
    if gpu_bytes is not None and gpu_bytes > engine.reserve_min_above_gib * GIB:
        mib = max(mib, engine.reserve_min_mib)
    spec = w.speculative.method if w.speculative is not None else None
    if spec in ("eagle3", "mtp"):
        mib += engine.reserve_mib_speculative
    elif spec == "draft":
        mib += engine.reserve_mib_speculative_draft
    return mib * 2**20


def held_back(m: MemoryEstimate, engine: EngineDefaults, w: Workload, lay: Layout,
              gpu_bytes: int | None) -> MemoryEstimate:
    """`m` with the memory the engine keeps out of its KV pool added to the device total (and the reserve above the
    tensors): SGLang's reserve beside the weights and the KV cache where it exceeds what the step's tensors take
    (pool "static"); the share of the free memory TensorRT-LLM leaves out of its KV cache (pool "free", with a GPU
    size). The engine then fills the GPU: its KV cache is what the GPU leaves beside this total."""
    kv = m.breakdown.kv_cache_bytes
    if engine.pool == "static":
        outside = m.device_bytes - m.reserved_bytes  # the CUDA context and NCCL, outside the allocator
        need = m.breakdown.weights_bytes + kv + outside + static_reserve_bytes(engine, w, lay, gpu_bytes)
        extra = max(need - m.device_bytes, 0.0)
    elif engine.pool == "free" and gpu_bytes is not None:
        fraction = w.gpu_memory_utilization or engine.gpu_memory_utilization
        extra = (1 - fraction) * max(gpu_bytes - (m.device_bytes - kv), 0)
    else:
        return m
    extra = int(extra)
    return m.model_copy(update={"reserved_bytes": m.reserved_bytes + extra, "device_bytes": m.device_bytes + extra})


def estimate_inference(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                       oh: Overheads, engine: EngineDefaults | None = None,
                       gpu_bytes: int | None = None) -> MemoryEstimate:
    """`gpu_bytes`: the GPU's memory, for the engines whose defaults and pool depend on it (SGLang's chunked-prefill
    size and reserve, TensorRT-LLM's share of the free memory); vLLM's estimate does not read it."""
    r = resolve(arch, w)
    notes: list[Note] = []
    dtype = w.weights_dtype or "bf16"
    wb = WEIGHT_BYTES[dtype]
    mp = lay.tp * lay.pp
    if wb < 2:  # quantized: embeddings, head and norms stay in 16 bits
        quantized = quantized_weights(arch, p, dtype)
        weights = quantized * wb + (p.total - quantized) * 2
    else:
        weights = p.total * wb
    weights /= mp
    kv_b = {"bf16": 2, "fp16": 2, "fp8": 1}[w.kv_cache_dtype or ("fp16" if dtype == "fp16" else "bf16")]
    # tensor parallel splits the KV heads; with fewer KV heads than GPUs each GPU keeps a replica of one
    # Hugging Face's cache keeps every prefilled token, sliding-window layers too; a paged engine's blocks the window
    paged = engine is not None and engine.paged
    tokens_each, shared = request_tokens(arch, w, engine, r), 0
    pc = w.prefix_cache
    if paged and engine is not None and pc is not None and pc.shared and r.batch > 1:  # a shared prefix held once
        shared = int(pc.hit_rate * r.seq) // engine.block_size_tokens * engine.block_size_tokens
        tokens_each -= shared
    kv = (kv_cache_bytes(arch, r.batch, tokens_each, kv_b, window=paged)
          + kv_cache_bytes(arch, 1, shared, kv_b, window=paged)) / min(lay.tp, arch.cache_kv_heads) / lay.pp
    draft = draft_of(arch, p, w, engine) if engine is not None and w.speculative is not None else None
    if draft is not None:  # the draft's weights (split as the target's) and its layers' KV cache of every token
        weights += draft_weight_bytes(draft, wb if wb < 2 else WEIGHT_BYTES[dtype]) / lay.tp
        kv += (draft.layers * arch.cache_values_per_token_layer * kv_b * r.batch * (tokens_each + shared)
               / min(lay.tp, arch.cache_kv_heads))
    beta = 4 if dtype == "fp32" else 2
    tokens = min(prefill_budget(w, engine, gpu_gib=gpu_bytes / GIB if gpu_bytes is not None else None)
                 or r.batch * r.seq, r.batch * r.seq)
    # prefill temporaries of one layer: the MLP's intermediate tensors and the attention's q/k/v/out
    mlp_width = max(arch.intermediate_size, (arch.moe.expert_intermediate_size * arch.moe.experts_per_token
                                             if arch.moe else 0))
    layer_tmp = tokens * beta * (3 * mlp_width + 2 * arch.q_dim + arch.hidden_size * 2) / lay.tp
    if w.attention == "eager":
        layer_tmp += r.batch * arch.num_heads * r.seq * r.seq * (beta + 4) / lay.tp
    elif not paged:
        layer_tmp = max(layer_tmp, _sliding_mask_attention(arch, r.batch, r.seq, beta) / lay.tp)
    logits = r.batch * arch.vocab_size * 4 / lay.tp  # last position only, as generate() asks for
    if engine is not None:  # the captured CUDA graphs stay allocated beside the step's temporaries
        logits += engine.cuda_graph_gib * GIB
    phases = {"prefill": dict(weights=weights, optimizer=0.0, gradients=0.0, activations=layer_tmp,
                              other=logits)}
    m = _finish(phases, oh, gpus, lay, training=False, notes=notes, kv=kv, trainable=0)
    return held_back(m, engine, w, lay, gpu_bytes) if engine is not None and engine.pool != "share" else m


def _sliding_mask_attention(arch: ModelArch, batch: int, seq: int, beta: int) -> float:
    """The attention's temporaries of a whole-batch prefill (Hugging Face, SDPA) of a sliding-window model whose
    prompt outgrows the window: the mask is no longer causal-only, so SDPA leaves the flash kernel for the
    memory-efficient one, which takes the boolean mask (seq x seq) as an additive bias in the compute dtype for
    every sequence of the batch, and the keys and values expanded to every query head (no grouped-query path
    with a mask); beside them the residual stream and its normed copy, the queries, their rotary copy and the
    output. 0 when the mask stays causal."""
    window = arch.sliding_window or 0
    if not window or not arch.sliding_window_layers or arch.kind != "decoder" or seq <= window:
        return 0.0
    masks = batch * seq * seq * beta + seq * seq
    return masks + batch * seq * beta * (2 * arch.hidden_size + 5 * arch.q_dim)


def kv_cache_bytes(arch: ModelArch, batch: int, context: int, dtype_bytes: int, window: bool = True) -> float:
    """K and V for every layer: sliding-window layers keep at most the window (`window`: an engine's paged cache;
    Hugging Face's keeps every prefilled token). MLA (DeepSeek-V3) caches its compressed latent and RoPE key,
    kv_lora_rank + qk_rope_head_dim values per token and layer, one head that tensor parallelism does not split
    (ModelArch.cache_values_per_token_layer / cache_kv_heads)."""
    if arch.kind not in ("decoder", "encoder-decoder"):
        return 0.0
    per_token_layer = arch.cache_values_per_token_layer * dtype_bytes * batch
    global_layers = arch.num_layers - arch.sliding_window_layers
    total = global_layers * context
    if arch.sliding_window:
        total += arch.sliding_window_layers * (min(context, arch.sliding_window) if window else context)
    return per_token_layer * total
