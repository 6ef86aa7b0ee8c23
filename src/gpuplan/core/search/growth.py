"""The growth view of `gpuplan plan`: what still fits when the model grows beyond the plan. For each shown
candidate, the peak memory per GPU of its layout at x1 (the project as planned), x1.5 and x2 model size, whether
that still fits the GPU less the headroom, and the fewest GPUs of the same type that would hold it.

The model grows as the planned growth grows it (`core.sizing.project.grow_arch`: deeper by whole layers, with the
project's planned context and users growth), and memory comes from the search's own memoised estimator
(`device_at`), so the view costs a few estimates per layout, whatever the size of the catalog. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import NamedTuple

from gpuplan.core.search.candidate import Pick
from gpuplan.core.search.ranking import Listed
from gpuplan.core.search.shapes import Config
from gpuplan.schema.plan import GrowthRow

#: model sizes against the plan: as planned, then 1.5 and 2 times deeper
GROWTH_FACTORS = (1.0, 1.5, 2.0)
#: layouts per server shape whose grown memory is checked for min_gpus: those that need the least memory today
LEANEST_PER_SHAPE = 2
#: a configuration's memory per GPU, read without a Python call
_BYTES = attrgetter("device_bytes")


def leanest(configs: Sequence[Config]) -> list[Config]:
    """The layouts of one server shape that need the least memory today (grown, they are the likeliest to fit)."""
    return sorted(configs, key=_BYTES)[:LEANEST_PER_SHAPE]


def min_gpus(shapes: Sequence[tuple[int, Sequence[Config]]], factor: float, usable: int,
             device_at: Callable[[Config, float], int]) -> int | None:
    """The fewest GPUs, over `shapes` ((GPU count, leanest layouts) tried for one GPU type), on which a layout fits
    `usable` bytes with the model `factor` times the planned size; None when none does."""
    for n, configs in sorted(shapes, key=lambda s: s[0]):
        # growing never shrinks memory: a layout over the limit today is over it grown, with no estimate
        if any(c.device_bytes <= usable and device_at(c, factor) <= usable for c in configs):
            return n
    return None


def growth_rows(cand: Listed, config: Config, usable: int, shapes: Sequence[tuple[int, Sequence[Config]]],
                model_scale: float, parameters: Callable[[float], int],
                device_at: Callable[[Config, float], int],
                fewest_of: dict[float, int | None] | None = None) -> list[GrowthRow]:
    """The candidate (run with `config`) at each of GROWTH_FACTORS x the planned model. `model_scale` is the
    project's growth.model_scale, `parameters(factor)` the grown model's parameters, `device_at(config, factor)`
    the peak bytes per GPU of a layout with the model `factor` times the planned size; `fewest_of`: min_gpus of
    `shapes` by factor, kept for the candidates of the same GPU type (the same shapes and usable bytes)."""
    n = cand.gpus_per_server * cand.servers
    out = []
    fewest_at = {} if fewest_of is None else fewest_of
    for f in GROWTH_FACTORS:
        dev = device_at(config, f)
        fits = dev <= usable
        if f in fewest_at:
            fewest = fewest_at[f]
        else:
            fewest = fewest_at[f] = min_gpus(shapes, f, usable, device_at)
        if fits:  # this layout holds it: the fewest GPUs are at most the candidate's own
            fewest = n if fewest is None else min(fewest, n)
        out.append(GrowthRow(gpu_id=cand.gpu_id, gpus_per_server=cand.gpus_per_server, servers=cand.servers,
                             factor=f, model_scale=model_scale * f, parameters=parameters(f), device_bytes=dev,
                             usable_bytes=usable, fits=fits, min_gpus=fewest))
    return out


def growth_view(ranked: Sequence[Pick], tried: dict[str, list[tuple[int, int]]], usable_of: dict[str, int],
                configs_of: Callable[[int, int], Sequence[Config]], model_scale: float,
                parameters: Callable[[float], int], device_at: Callable[[Config, float, int], int],
                device_for: Callable[[Pick], Callable[[Config, float, int], int]] | None = None) -> list[GrowthRow]:
    """The growth rows of the `ranked` candidates: each at GROWTH_FACTORS x the planned model (in the layout the
    grown model is run as: the candidate's own, or `Pick.grown_as` where that does not hold it), with the fewest GPUs
    of its type over the server shapes `tried` for that type ((GPUs per server, servers); `configs_of(n,
    per_server)`: a shape's layouts). `usable_of`: each GPU type's usable bytes; `parameters(factor)`,
    `device_at(config, factor, usable)`: the grown model's parameters and a layout's peak bytes per GPU with it;
    `device_for(pick)`: the same for one candidate's own rows where its load is its own (a service timed under
    users or an arrival rate holds the requests its grown load keeps in flight), the fewest GPUs staying
    `device_at`'s."""
    growth: list[GrowthRow] = []
    lean: dict[ServerShape, list[Config]] = {}  # each shape's leanest layouts
    #: each GPU type's shapes tried (GPU count, leanest layouts) and its min_gpus by factor
    per_gpu: dict[str, tuple[list[tuple[int, list[Config]]], dict[float, int | None]]] = {}
    for k in ranked:
        hit = per_gpu.get(k.gpu_id)
        if hit is None:
            shapes = [ServerShape(ps, s) for ps, s in tried[k.gpu_id]]
            for shape in shapes:
                if shape not in lean:
                    lean[shape] = leanest(configs_of(shape.gpus, shape.per_server))
            hit = per_gpu[k.gpu_id] = ([(shape.gpus, lean[shape]) for shape in shapes], {})
        own = device_at if device_for is None else device_for(k)
        growth += growth_rows(k, k.grown_as or k.config, usable_of[k.gpu_id], hit[0], model_scale, parameters,
                              _at_usable(own, usable_of[k.gpu_id]), hit[1])
    return growth


class ServerShape(NamedTuple):
    """A server shape tried for a GPU type."""

    per_server: int
    servers: int

    @property
    def gpus(self) -> int:
        return self.per_server * self.servers


def _at_usable(device_at: Callable[[Config, float, int], int], usable: int) -> Callable[[Config, float], int]:
    """`device_at` with a GPU type's usable bytes."""
    def at(c: Config, factor: float) -> int:
        return device_at(c, factor, usable)
    return at


__all__ = ["GROWTH_FACTORS", "LEANEST_PER_SHAPE", "ServerShape", "growth_rows", "growth_view", "leanest", "min_gpus"]
