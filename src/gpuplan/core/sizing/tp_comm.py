"""The tensor-parallel all-reduces of a serving step, from measurements (data/serving.toml [[allreduce]]): a
serving engine's one-shot all-reduce for small messages (a fixed latency and a cost per byte, measured at two
sizes) or NCCL's ring for large ones (its latency plus the ring's bytes over the link), whichever is faster, as
vLLM picks. Replaces a per-hop latency guess that made TP decoding about twice too slow. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.core.sizing.rates import GB, link_gbs
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.serving import AllReduceCost, ServingData
from gpuplan.schema.speed import SpeedModel


def link_kind(gpu: Gpu, tp: int, gpus_per_node: int) -> str:
    """"nvlink" when the group sits inside the GPU's scale-up domain, else "pcie" (across nodes too)."""
    ic = gpu.interconnect
    return "nvlink" if ic.kind != "none" and tp <= min(ic.domain_gpus, gpus_per_node) else "pcie"


def _at(table: dict[str, float], n: int) -> float:
    """The value measured at group size n, or at the nearest measured size below it (the smallest above)."""
    sizes = sorted(int(k) for k in table)
    below = [s for s in sizes if s <= n]
    return table[str(below[-1] if below else sizes[0])]


@dataclass(frozen=True, slots=True)
class AllReduce:
    """Seconds of one all-reduce of `bytes_` over a TP group of `tp` GPUs (built by `all_reduce`)."""

    tp: int
    kind: str
    latency: float
    per_byte: float
    nccl_latency: float
    ring_per_byte: float

    def seconds(self, bytes_: float) -> float:
        if self.tp <= 1 or bytes_ <= 0:
            return 0.0
        one_shot, ring = self.latency + bytes_ * self.per_byte, self.nccl_latency + bytes_ * self.ring_per_byte
        return ring if ring < one_shot else one_shot  # min(), without the call (every step of every engine)


def all_reduce(gpu: Gpu, sm: SpeedModel, data: ServingData, tp: int, gpus_per_node: int) -> AllReduce:
    """The all-reduce of a TP group of `tp` `gpu`s with `gpus_per_node` per node."""
    kind = link_kind(gpu, tp, gpus_per_node)
    cost: AllReduceCost = data.allreduce[kind]
    bw = link_gbs(gpu, sm, tp, gpus_per_node) if tp > 1 else 1.0
    return AllReduce(tp=tp, kind=kind, latency=_at(cost.latency_s, tp) if tp > 1 else 0.0,
                     per_byte=_at(cost.s_per_byte, tp) if tp > 1 else 0.0, nccl_latency=cost.nccl_latency_s,
                     ring_per_byte=2 * (tp - 1) / tp / (bw * GB) if tp > 1 else 0.0)


__all__ = ["AllReduce", "all_reduce", "link_kind"]
