"""A server shape's configurations as the search reads them (`ShapeConfigs`): in the order they are timed, with
their memory per GPU in that order, so that the layouts that fit a GPU are picked out without a Python call per
configuration (`fitting`). Pure."""

from __future__ import annotations

from itertools import compress, islice
from operator import attrgetter
from typing import NamedTuple

from gpuplan.core.search.shapes import Config

#: a configuration's timing order (shapes.proxy) and its memory per GPU, read without a Python call
_ORDER, _BYTES = attrgetter("order"), attrgetter("device_bytes")


class ShapeKey(NamedTuple):
    """A server shape as its configurations see it: the GPUs, and the GPUs per server up to 8 (tensor parallelism
    spans at most 8 GPUs, so a larger server, an NVL72 rack, shares the 8-GPU server's)."""

    n: int
    per_server: int


class ShapeConfigs:
    """A shape's configurations in the order they are timed (`Config.order`), each one's peak bytes per GPU in that
    order, and the least of them (None: the shape has no configuration). A plain slots class: `leanest` is set once
    asked."""

    __slots__ = ("configs", "device_bytes", "leanest", "smallest")

    def __init__(self, configs: list[Config]) -> None:
        self.configs = sorted(configs, key=_ORDER)
        self.device_bytes: list[int] = list(map(_BYTES, self.configs))
        self.smallest: int | None = min(self.device_bytes, default=None)
        #: training, growing: the layout the grown model holds best when none of the first that fit holds it (the
        #: same whatever the GPU: core/search/explore.py finds it once)
        self.leanest: Config | None = None

    def fitting(self, usable: int, limit: int) -> list[Config]:
        """The first `limit` configurations, in timing order, whose peak bytes per GPU are within `usable`."""
        return list(islice(compress(self.configs, map(usable.__ge__, self.device_bytes)), limit))


__all__ = ["ShapeConfigs", "ShapeKey"]
