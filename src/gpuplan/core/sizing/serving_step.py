"""The cost of one serving engine step on one replica (core/sizing/batching.py's engines step through it): the sum
of its kernels' rooflines, the linear layers, then the attention, the kernels' floor and the tensor-parallel
all-reduces, each pipeline stage in turn. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuplan.core.sizing.tp_comm import AllReduce


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds of one engine step on one replica, from per-GPU rates (each pipeline stage does 1/pp of it).

    The step runs its kernels one after another, so its time is the sum of each kernel family's own roofline,
    not one roofline over the whole step: the linear layers (reading the weights, or their FLOPs at the
    efficiency a matmul of the step's tokens reaches) and then the attention over the KV cache (reading it at
    the bandwidth the paged-attention kernels reach, or its FLOPs); a prefill chunk's compute therefore does not
    hide under the decoding requests' KV reads. Then the kernels' floor and the tensor-parallel all-reduces."""

    #: weights read per step (dense part), seconds; MoE: expert weights in all and their routing
    weights_s: float
    experts_s: float = 0.0
    num_experts: int = 0
    experts_per_token: int = 0
    #: reading one token of KV cache (every layer) in the attention kernels, seconds
    kv_s_per_token: float = 0.0
    #: compute per decoding token and per prefill token (matmuls at the roofline), seconds
    decode_flop_s: float = 0.0
    prefill_flop_s: float = 0.0
    #: attention compute per (query token, context token) pair
    attn_s_per_pair: float = 0.0
    #: the decode kernels' floor per step (replayed from a CUDA graph)
    fixed_s: float = 0.0
    #: all-reduces per step (two per layer) and the bytes each moves per token
    allreduces: int = 0
    allreduce_bytes_per_token: float = 0.0
    allreduce: AllReduce | None = None
    #: pipeline stages and the seconds of one hop between stages per token and fixed
    pp: int = 1
    hop_s: float = 0.0
    hop_s_per_token: float = 0.0
    #: its hash, made once: a step cost is in the key of every cache its engines are in
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((
            self.weights_s, self.experts_s, self.num_experts, self.experts_per_token, self.kv_s_per_token,
            self.decode_flop_s, self.prefill_flop_s, self.attn_s_per_pair, self.fixed_s, self.allreduces,
            self.allreduce_bytes_per_token, self.allreduce, self.pp, self.hop_s, self.hop_s_per_token)))

    def __hash__(self) -> int:
        return self._hash

    def seconds(self, decodes: float, prefill: float, kv_tokens: float, pairs: float) -> float:
        """A step of `decodes` decoding requests and `prefill` prompt tokens that reads `kv_tokens` tokens of KV
        cache and computes `pairs` attention pairs."""
        tokens = decodes + prefill
        w = self.weights_s
        if self.num_experts:
            e = self.num_experts
            touched = e * (1 - (1 - self.experts_per_token / e) ** max(tokens, 0.0))
            w -= self.experts_s * (e - touched) / e
        gemm = self.decode_flop_s * decodes + self.prefill_flop_s * prefill
        # the larger of each pair (max()'s choice, first of equals, without a call: the search's hottest line)
        kv, pair = self.kv_s_per_token * kv_tokens, self.attn_s_per_pair * pairs
        t = (gemm if gemm > w else w) + (pair if pair > kv else kv) + self.fixed_s
        if self.allreduce is not None and self.allreduces:  # a step that runs carries at least one token
            t += self.allreduces * self.allreduce.seconds((1.0 if 1.0 > tokens else tokens)
                                                          * self.allreduce_bytes_per_token)
        if self.pp > 1:  # every stage in turn, then a hop to the next
            t = self.pp * t + (self.pp - 1) * (self.hop_s + self.hop_s_per_token * tokens)
        return t


__all__ = ["StepCost"]
