"""Expert parallelism in training (issue #30): a MoE's routed experts spread over `ep` of the data-parallel ranks
(Megatron-Core's expert_model_parallel_size, torchtitan's expert_parallel_degree). Pure.

What it changes in a step on each GPU (core/sizing/step.py StepWork, timed in core/sizing/step_time.py):
- each GPU holds 1/ep of the routed experts' weights, so it steps their optimizer states and reduces their
  gradients for 1/ep of them (the other ranks of the expert group hold the rest);
- every MoE layer sends each token's hidden state to the GPUs of its top-k experts and brings the results back
  (all-to-all dispatch and combine), in forward, again in backward (the gradients of both), and once more when
  the layer's forward is recomputed. The bytes: tokens x top-k x hidden x 2 (bf16) per all-to-all; the share that
  leaves the GPU is (ep - 1) / ep, over the scale-up link inside a node (NVLink, Infinity Fabric: its whole domain,
  72 GPUs in an NVL72) and the NIC across nodes.
Not modelled: the grouped expert GEMMs' lower efficiency with few tokens per expert, routing imbalance, FP8
dispatch (DeepSeek-V3 sends FP8 and combines in bf16), and the overlap of the all-to-all with compute that
DeepSeek's DualPipe or Megatron's 1F1B A2A overlap buy: the all-to-all is timed exposed.
"""

from __future__ import annotations

from gpuplan.core.sizing.params import expert_weights
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Workload

#: bytes per element of the tokens an all-to-all moves (bf16 hidden states)
A2A_BYTES_PER_ELEMENT = 2


def expert_split(arch: ModelArch, w: Workload, trainable: int, total: int, opt_bytes: float, ep: int,
                 mb_tokens: int, pp: int, ckpt: bool) -> tuple[int, int, float, float, int]:
    """(trainable parameters, parameters, optimizer bytes per GPU, all-to-all bytes, all-to-all calls per
    micro-batch) of one GPU when the routed experts are spread over `ep` ranks, from the same figures without
    expert parallelism. A LoRA's frozen experts keep its trainable count. `mb_tokens`: a micro-batch's tokens on
    one GPU; `pp`: the pipeline stages the MoE layers are split over."""
    moe = arch.moe
    if moe is None or ep <= 1:
        return trainable, total, opt_bytes, 0.0, 0
    away = round(expert_weights(arch) * (ep - 1) / ep)  # held by the other ranks of the expert group
    frozen = w.task in ("lora", "qlora")
    kept = trainable if frozen else max(trainable - away, 1)
    opt = opt_bytes * kept / trainable if trainable else opt_bytes
    passes = 3 if ckpt else 2  # forward, backward, and the recomputed forward
    calls = round(passes * 2 * moe.moe_layers / pp)  # dispatch and combine in each
    per_call = mb_tokens * moe.experts_per_token * arch.hidden_size * A2A_BYTES_PER_ELEMENT
    return kept, max(total - away, 1), opt, calls * per_call, calls


__all__ = ["A2A_BYTES_PER_ELEMENT", "expert_split"]
