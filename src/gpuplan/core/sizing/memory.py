"""Peak GPU memory per GPU for a training step or an inference prefill.

The model follows what a trace of the real step shows (tests/trace/ compare the two):

* static tensors from exact parameter counts: weights, gradients and optimizer states by precision,
  optimizer, LoRA/QLoRA and sharding (ZeRO-1/2/3 = FSDP, tensor and pipeline parallel, CPU offload);
* activations saved for backward, per layer and per token, from coefficients measured on the real
  Hugging Face implementation of each architecture (data/activations.toml, scripts/fit_activations.py),
  plus the LM head's logits and loss, dropout masks (1 byte each, as CUDA's fused dropout keeps them),
  and, with gradient checkpointing, the layer inputs plus one layer recomputed during backward;
* a phased peak: the largest of end-of-forward, start and end of backward, and optimizer step, with the
  breakdown taken at that moment so the parts sum to the peak;
* inference: weights by dtype (quantization metadata included), the KV cache (GQA, sliding windows, its
  own dtype) and the largest prefill temporaries.

Then the allocator's reserve and the CUDA context, cuBLAS and NCCL give the reserved and device levels.
"""

from __future__ import annotations

from gpuplan.core.sizing.activations import activation_key, regime_of, resolve, saved_bytes_per_sample
from gpuplan.core.sizing.levels import ALLOC_BLOCK, memory_out, reserve_and_device
from gpuplan.core.sizing.params import ParamCount
from gpuplan.core.sizing.serving_memory import INT4_BYTES_PER_PARAM, WEIGHT_BYTES, estimate_inference, kv_cache_bytes
from gpuplan.core.sizing.stack import NF4_BYTES_PER_PARAM, QloraImpl, check_stack, load_peak_bytes
from gpuplan.core.sizing.states import adafactor_state_elements
from gpuplan.core.sizing.training_memory import PHASES, MemoryCache, estimate_training, layout_memory
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Overheads
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload


def estimate_memory(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, gpus: int,
                    table: ActivationTable, oh: Overheads, qlora: QloraImpl | None = None,
                    cache: MemoryCache | dict[tuple[object, ...], object] | None = None) -> MemoryEstimate:
    """Peak memory per GPU of `w` on `gpus` GPUs laid out as `lay`, and of loading its checkpoint. `qlora`: the
    4-bit implementation when it is not `w.framework`'s (e.g. an old bitsandbytes, stack.qlora_impl); `cache`:
    the parts of the training layouts estimated so far (the search passes its MemoryCache; a plain dict, what
    candidate.Context holds by default, keeps nothing)."""
    check_stack(arch, w)
    if w.task != "inference":
        return estimate_training(arch, p, w, lay, gpus, table, oh, qlora,
                                 cache if isinstance(cache, MemoryCache) else None)
    m = estimate_inference(arch, p, w, lay, gpus, oh)
    load = load_peak_bytes(arch, p, w, lay, m.breakdown.weights_bytes)
    device = reserve_and_device(load, 0, oh, gpus, lay, False)[1]
    return m.model_copy(update={"load_peak_bytes": load, "load_device_bytes": device})


__all__ = [
    "ALLOC_BLOCK",
    "INT4_BYTES_PER_PARAM",
    "NF4_BYTES_PER_PARAM",
    "PHASES",
    "WEIGHT_BYTES",
    "MemoryCache",
    "QloraImpl",
    "activation_key",
    "adafactor_state_elements",
    "estimate_inference",
    "estimate_memory",
    "estimate_training",
    "kv_cache_bytes",
    "layout_memory",
    "load_peak_bytes",
    "memory_out",
    "regime_of",
    "resolve",
    "saved_bytes_per_sample",
]
