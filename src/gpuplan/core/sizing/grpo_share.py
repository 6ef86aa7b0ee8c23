"""The colocated rollout engine's share of each GPU (task grpo, `workload.grpo.gpu_memory_utilization`).

In colocated mode the vLLM engine is given a fraction of each GPU: verl `actor_rollout_ref.rollout.
gpu_memory_utilization` (default 0.5: verl/trainer/config/rollout/rollout.yaml, volcengine/verl@035682e, "Fraction
of GPU memory used by vLLM/SGLang for KV cache"), TRL `GRPOConfig.vllm_gpu_memory_utilization` (default 0.3:
trl/trainer/grpo_config.py, "only applies when vllm_mode is set to 'colocate'"). vLLM takes that share whole: its
weights, its prefill temporaries at the token budget and its CUDA graphs, and KV cache blocks in all that is left
(vLLM docs, engine arguments, `--gpu-memory-utilization`: "the fraction of GPU memory to be used for the model
executor"). The trainer keeps what it holds through the rollout (its weights, optimizer states, the reference) in the
rest of the GPU.

The KV cache does not need to hold every sequence of the step at once: vLLM admits the sequences whose blocks fit
and queues the others (or preempts one when the running ones outgrow the cache), so the rollout runs in waves of the
sequences that fit at their full length (prompt + response_length: every response is timed to the cap), each wave
prefilled and decoded as `grpo.rollout_seconds` times it. This is an upper bound on the rollout's time where the
responses' lengths spread (vLLM then refills the batch as short responses end); said in the estimate's note.

The rollout fits a GPU of G bytes when the engine starts in its share (u G: its weights, temporaries and graphs with
the KV cache of one sequence) and the trainer's kept memory fits beside it: kept + u G <= (1 - headroom) G. Both are
linear in G, so the search, which compares one figure per configuration with each GPU's usable bytes, compares
`equivalent_bytes`: (1 - headroom) x the smallest G that holds both. Pure."""

from __future__ import annotations

import math
from typing import NamedTuple

from gpuplan.schema.estimate import MemoryEstimate

#: where the engine's share comes from, for notes and docs
SHARE_SOURCE = ("verl actor_rollout_ref.rollout.gpu_memory_utilization (default 0.5), TRL "
                "vllm_gpu_memory_utilization (default 0.3)")


class EngineShare(NamedTuple):
    """The colocated engine on one GPU: the bytes it takes (`share`), what of them is not KV cache (`fixed`: its
    weights, prefill temporaries and CUDA graphs), the KV bytes of one sequence at its full length
    (`per_sequence`), and the sequences of its replica (`wanted`)."""

    share: int
    fixed: int
    per_sequence: float
    wanted: int

    @property
    def kv_bytes(self) -> int:
        """The KV cache vLLM allocates in its share (0: the engine cannot start)."""
        return max(self.share - self.fixed, 0)

    @property
    def holds(self) -> int:
        """Sequences at their full length the KV cache holds at once (0: not even one: the engine cannot start)."""
        if self.per_sequence <= 0:
            return self.wanted
        return int(self.kv_bytes // self.per_sequence)

    @property
    def starts(self) -> bool:
        return self.holds >= 1

    @property
    def in_flight(self) -> int:
        """Sequences generated at once: all of the replica's when they fit, else as many as fit (at least one, so a
        rollout that cannot start is still timed)."""
        return max(min(self.wanted, self.holds), 1)

    @property
    def waves(self) -> int:
        return math.ceil(self.wanted / self.in_flight)

    @property
    def start_bytes(self) -> int:
        """What the engine needs to start: its fixed bytes and one sequence's KV cache."""
        return int(self.fixed + math.ceil(self.per_sequence))


def engine_share(eng: MemoryEstimate, wanted: int, gpu_bytes: int, utilization: float) -> EngineShare:
    """The engine of `eng` (gpuplan's vLLM estimate with its replica's `wanted` sequences all in flight) given
    `utilization` of a GPU of `gpu_bytes`."""
    b = eng.breakdown
    fixed = b.weights_bytes + b.activations_bytes + b.other_bytes
    per_seq = b.kv_cache_bytes / max(wanted, 1)
    return EngineShare(share=int(gpu_bytes * utilization), fixed=fixed, per_sequence=per_seq, wanted=max(wanted, 1))


def equivalent_bytes(kept_device: int, start_bytes: int, utilization: float, headroom: float) -> int:
    """The rollout phase as the search compares it with a GPU's usable bytes ((1 - headroom) x its memory): (1 -
    headroom) x the smallest GPU on which the trainer's `kept_device` bytes fit beside the engine's share and the
    engine starts in it (`start_bytes` <= utilization x G). A huge figure when no GPU can hold both (the share
    leaves the trainer nothing under the headroom)."""
    room = 1.0 - headroom - utilization
    if room <= 0:
        return 1 << 62
    need = max(kept_device / room, start_bytes / utilization)
    return int(math.ceil(need * (1.0 - headroom)))


__all__ = ["SHARE_SOURCE", "EngineShare", "engine_share", "equivalent_bytes"]
