"""The search space of `gpuplan plan`: which GPUs are allowed, how many fit a server, and the configurations of a
workload on n GPUs (tensor and pipeline parallel inside a server, ZeRO stage, recomputation, micro-batch), each with
its peak memory per GPU. Pure.

Memory does not depend on the GPU type, only its capacity does, so each configuration is estimated once per GPU
count and compared with every GPU. A training layout's configurations are the micro-batches of one `LayoutGroup`
(core/search/training.py makes them, with the layout's memory kernel); serving's are made here
(`inference_configs`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuplan.core.sizing.engine_memory import serving_start_bytes
from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.params import ParamCount
from gpuplan.schema.catalog import Catalog
from gpuplan.schema.estimate import ActivationTable, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import Rejected
from gpuplan.schema.project import Layout, Project, Workload
from gpuplan.schema.serving import EngineDefaults

if TYPE_CHECKING:
    from gpuplan.core.sizing.layout_memory import LayoutMemory
    from gpuplan.core.sizing.step import StepWork

SERVER_COUNTS = (1, 2, 4, 8, 16, 32, 64)
PER_SERVER = (1, 2, 4, 8)


@dataclass(eq=False, slots=True)
class Config:
    """A way to run the workload on n GPUs (GPU-type independent). `batch` is the micro-batch (training) or the
    concurrent requests per replica (inference); the trial workload is built only when asked for."""

    n: int
    layout: Layout
    base: Workload
    gradient_checkpointing: bool
    batch: int
    #: training: sequences per optimizer step on this layout
    global_batch: int
    device_bytes: int
    #: the order the search times layouts in (`proxy`, `order_key`), made with the configuration
    order: int
    #: training: micro-batches per optimizer step (gradient accumulation)
    microbatches: int = 1
    #: training: the layout the configuration is a micro-batch of (core/search/training.py)
    group: LayoutGroup | None = field(default=None, repr=False)
    #: training: the step's work, once the search times the configuration (core/sizing/step.StepWork)
    work: StepWork | None = field(default=None, repr=False)
    #: training: its peak bytes per GPU after the planned growth, once the search asks (core/search/training.py)
    grown: int | None = field(default=None, repr=False)
    _workload: Workload | None = field(default=None, repr=False)

    @property
    def training(self) -> bool:
        return self.base.task != "inference"

    @property
    def workload(self) -> Workload:
        if self._workload is None:
            if self.training:
                self._workload = self.base.model_copy(update={
                    "micro_batch_size": self.batch, "global_batch_size": self.global_batch,
                    "gradient_checkpointing": self.gradient_checkpointing})
            else:
                self._workload = self.base.model_copy(update={"batch_size": self.batch})
        return self._workload

    @property
    def key(self) -> tuple[int, int, int, int, str, bool, int]:
        lay = self.layout
        return (self.n, lay.zero, lay.tp, lay.pp, lay.offload, self.gradient_checkpointing, self.batch)


class LayoutGroup:
    """One training layout on n GPUs (tensor, pipeline and data parallel degrees, ZeRO stage, recomputation or not),
    whose configurations are its micro-batches: made once per search (it holds none of them: each configuration
    names its group, and no reference cycle keeps a search alive after it). A plain class: made at import faster
    than a dataclass."""

    __slots__ = ("grown", "layout", "n", "workload")

    def __init__(self, n: int, layout: Layout, workload: Workload) -> None:
        self.n, self.layout = n, layout
        #: the search's workload with this recomputation choice
        self.workload = workload
        #: by the model's factor, once asked (core/search/training.py): the memory kernel of the layout with the
        #: model grown, and the peak bytes per GPU of its micro-batches asked so far
        self.grown: dict[float, tuple[LayoutMemory, dict[int, int]]] | None = None


def pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


@functools.lru_cache(maxsize=256)
def layout_of(zero: int, tp: int, pp: int) -> Layout:
    """The Layout of (zero, tp, pp), built once (frozen: the search's configurations share them)."""
    return Layout(zero=zero, tp=tp, pp=pp)


def inference_configs(arch: ModelArch, p: ParamCount, w: Workload, n: int, per_server: int,
                      table: ActivationTable, oh: Overheads, engine: EngineDefaults | None = None,
                      start_bytes: Callable[[Config], int] | None = None) -> list[Config]:
    """Every tensor-parallel degree (a power of two inside a server) on n GPUs, the rest replicas, each holding
    its share of batch_size; memory as the serving engine allocates it when `engine` is given: what it needs to
    start and hold one request (core/sizing/engine_memory.py), as a load beyond its KV cache queues rather than
    failing, and the latency and capacity objectives judge it. `start_bytes`: that, from a caller that keeps it
    by layout (one request: the same on every GPU count)."""
    out: list[Config] = []
    tps = [tp for tp in pow2_upto(min(per_server, 8)) if not n % tp and (tp == 1 or not arch.num_heads % tp)]
    layers = arch.num_layers + arch.num_decoder_layers
    for tp in tps:
        # pipeline stages only at the largest tensor-parallel degree, across servers (a replica too big for one)
        for pp in (1, 2, 4, 8) if tp == tps[-1] and arch.kind == "decoder" else (1,):
            if n % (tp * pp) or (pp > 1 and (layers < 2 * pp or tp * pp <= per_server)):
                continue
            replicas = n // (tp * pp)
            batch = max(math.ceil(w.batch_size / replicas), 1)
            lay = Layout(tp=tp, pp=pp)
            c = Config(n=n, layout=lay, base=w, gradient_checkpointing=w.gradient_checkpointing, batch=batch,
                       global_batch=0, device_bytes=0,
                       order=order_key(w.gradient_checkpointing, tp * pp, lay.zero, w.micro_batch_size))
            c.device_bytes = ((start_bytes(c) if start_bytes is not None else serving_start_bytes(
                arch, p, c.workload, lay, tp * pp, oh, engine)) if engine is not None
                else estimate_memory(arch, p, c.workload, lay, tp * pp, table, oh).device_bytes)
            out.append(c)
    return out


def proxy(c: Config) -> int:
    """Order to time layouts in: no recomputation, little model parallelism, low ZeRO, big micro-batches
    (training's micro-batch; serving's workload micro_batch_size, the same for all). Made with the configuration
    (`Config.order`), as this reads it."""
    return c.order


#: micro-batches (and serving's micro_batch_size) below this, in `order_key`
_BATCHES = 1 << 21


def order_key(ckpt: bool, mp: int, zero: int, batch: int) -> int:
    """`proxy`'s order of a layout as one integer (sorted faster than a tuple): recomputation, then the model-parallel
    degree, then the micro-batch (under 2**21, the larger first), then the ZeRO stage. The micro-batch comes before
    the stage: the search times a shape's first few layouts that fit, and stage 0 at four small micro-batches hid
    stage 1 or 2 at the large one that runs faster (a 3B pre-training on 32 L40S: 657 h planned where 457 h fit)."""
    return (((1 if ckpt else 0) << 8 | mp) * _BATCHES + _BATCHES - 1 - batch) << 2 | zero


#: a platform as max_gpus_per_server reads it: (most W per GPU, the GPU ids it is built for (None: any), the widest
#: card in slots (None: any), GPU slots)
SlotRow = tuple[int, frozenset[str] | None, float | None, int]


def slots_by_form(catalog: Catalog) -> dict[str, list[SlotRow]]:
    """The catalog's platforms by the GPU form factors they take (what max_gpus_per_server scans; a search makes it
    once for all its GPU types)."""
    out: dict[str, list[SlotRow]] = {}
    for pl in catalog.platforms.rows.values():
        row = (pl.gpu_max_tdp_w, frozenset(pl.compatible_gpu_ids) if pl.compatible_gpu_ids else None,
               pl.gpu_max_slot_width, pl.gpu_slots)
        for form in pl.gpu_form_factors:  # each once (a platform that lists one twice does not validate)
            out.setdefault(form, []).append(row)
    return out


def max_gpus_per_server(gpu: Gpu, catalog: Catalog, by_form: dict[str, list[SlotRow]] | None = None) -> int:
    """The most GPUs of this type any platform of the catalog holds (0: none takes it); `by_form`: the catalog's
    slots_by_form, when the caller keeps it."""
    best = 0
    rows = (slots_by_form(catalog) if by_form is None else by_form).get(gpu.form_factor, ())
    tdp, gid, width = gpu.tdp_w, gpu.id, gpu.slot_width
    for max_tdp, ids, max_width, slots in rows:
        if tdp > max_tdp or (ids is not None and gid not in ids):
            continue
        if width and max_width and width > max_width:
            continue
        if slots > best:
            best = slots
    return best


def allowed_gpus(project: Project, catalog: Catalog, rejected: list[Rejected]) -> list[Gpu]:
    """The GPU types the constraints allow, in catalog order; the ones they exclude for a reason are `rejected`."""
    cons = project.constraints
    table = catalog.gpus
    rows: Iterable[Gpu]
    if cons.gpus:
        rows = [table.find(name, ["constraints", "gpus", i]) for i, name in enumerate(cons.gpus)]
    else:
        rows = table.rows.values()
    excluded = {table.find(name, ["constraints", "exclude_gpus", i]).id for i, name in enumerate(cons.exclude_gpus)}
    out = []
    production = project.goals.purpose == "production"
    for g in rows:
        if g.id in excluded:
            continue
        if cons.datacenter_only and g.market_class != "datacenter":
            rejected.append(Rejected(gpu_id=g.id, gpus_per_server=0, servers=0, code="datacenter-only",
                                     reason=f"{g.market_class} card: constraints.datacenter_only"))
            continue
        if production and g.market_class == "consumer":
            rejected.append(Rejected(gpu_id=g.id, gpus_per_server=0, servers=0, code="consumer-in-production",
                                     reason="consumer card in production: the GeForce driver licence excludes "
                                            "datacenter deployment, no ECC, no 24/7 support"))
            continue
        out.append(g)
    return out


__all__ = ["PER_SERVER", "SERVER_COUNTS", "Config", "LayoutGroup", "SlotRow", "allowed_gpus", "inference_configs",
           "layout_of", "max_gpus_per_server", "order_key", "pow2_upto", "proxy", "slots_by_form"]
