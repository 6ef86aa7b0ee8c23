"""A server shape's configurations as the search reads them (`ShapeConfigs`): in the order they are timed, the least
memory per GPU of any, the first that fit a GPU (`fitting`) and, for a growing model, the layout that holds it best
when none of those does (`leanest`, found once per shape). Pure."""

from __future__ import annotations

from itertools import islice
from operator import attrgetter
from typing import NamedTuple

from gpuplan.core.search.shapes import Config

#: a configuration's timing order (shapes.proxy) and its memory per GPU, read without a Python call (a generator over
#: the configurations picks out those that fit: `itertools.compress` over their bytes was no faster, docs/plan.md)
_ORDER, _BYTES = attrgetter("order"), attrgetter("device_bytes")


class ShapeKey(NamedTuple):
    """A server shape as its configurations see it: the GPUs, and the GPUs per server up to 8 (tensor parallelism
    spans at most 8 GPUs, so a larger server, an NVL72 rack, shares the 8-GPU server's)."""

    n: int
    per_server: int
    gpu: int = 0  # the GPU's memory where the serving engine's memory depends on it (ServingTimer.gpu_key), else 0


class ShapeConfigs:
    """A shape's configurations in the order they are timed (`Config.order`) and the least peak bytes per GPU of any
    (None: the shape has no configuration). A plain slots class: `leanest` is set once asked."""

    __slots__ = ("configs", "leanest", "smallest")

    def __init__(self, configs: list[Config]) -> None:
        self.configs = sorted(configs, key=_ORDER)
        self.smallest: int | None = min(map(_BYTES, configs), default=None)
        #: training, growing: the layout the grown model holds best when none of the first that fit holds it (the
        #: same whatever the GPU: core/search/explore.py finds it once)
        self.leanest: Config | None = None

    def fitting(self, usable: int, limit: int) -> list[Config]:
        """The first `limit` configurations, in timing order, whose peak bytes per GPU are within `usable`."""
        return list(islice((c for c in self.configs if c.device_bytes <= usable), limit))


__all__ = ["ShapeConfigs", "ShapeKey"]
