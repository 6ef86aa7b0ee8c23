"""How the server the team has can run the job (`plan --have`): every way tried (core/owned/tries.py) re-estimated
and timed on its GPUs with the same estimator as `gpuplan estimate`, its CPU offload checked against the machine's
RAM, and the ways ranked: runs, meets the deadline (or latency target), keeps the recipe, fastest. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.core import estimate as core_estimate
from gpuplan.core.audit.machine import MachineGpu, MachineSpec, on_machine
from gpuplan.core.layout_text import estimate_layout_text
from gpuplan.core.owned.tries import Try
from gpuplan.errors import GpuplanError
from gpuplan.schema.bundle import Bundle
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.owned import HaveWay
from gpuplan.schema.project import Layout, Project
from gpuplan.schema.result import EstimateResult
from gpuplan.units import fmt_ram_gb

#: the share of a machine's RAM a CPU offload may take: the OS, the data loaders, pinned transfer buffers and the
#: page cache keep the rest (DeepSpeed's ZeRO-Offload keeps fp32 optimizer states and gradients in pinned host
#: memory, so it must fit without swapping)
RAM_USABLE_FRACTION = 0.8


@dataclass(frozen=True)
class Job:
    """What every way is estimated against: the project, its model, the machine and the GPUs it runs on."""

    project: Project
    arch: ModelArch
    model_name: str
    machine: MachineSpec
    bundle: Bundle
    gpus: tuple[MachineGpu, ...]
    #: the catalog row of those GPUs (None: not in the catalog, memory only)
    row: Gpu | None
    headroom: float

    @property
    def n(self) -> int:
        return len(self.gpus)

    @property
    def usable(self) -> int:
        return int(min(g.memory_bytes for g in self.gpus) * (1 - self.headroom)) if self.gpus else 0

    @property
    def serving(self) -> bool:
        return self.project.workload.task == "inference"

    @property
    def target_hours(self) -> float | None:
        d = self.project.goals.deadline_days
        return None if d is None or self.serving else d * 24


def estimate_on(job: Job, project: Project, gpus: int, layout: Layout, row: Gpu | None = None) -> EstimateResult | None:
    """The estimate of `project` on `gpus` x the job's GPU (or `row`) with `layout`; None when the layout does not
    apply to the model (a tensor-parallel degree its heads do not divide, say)."""
    gpu = row or job.row
    proj = on_machine(project, gpu.id if gpu else None, gpus, layout)
    try:
        return core_estimate.estimate(proj, job.arch, proj.hardware, gpu, model_name=job.model_name, origin="",  # type: ignore[arg-type]
                                      source=None, as_of=None, speed=job.bundle.speed, table=job.bundle.table,
                                      overheads=job.bundle.overheads, notes=[], serving=job.bundle.serving)
    except GpuplanError:
        return None


def offload_host_bytes(ref: EstimateResult, offload: str, mixed: bool = False) -> int:
    """Host RAM a CPU offload holds, from the estimate of the same layout without it: the optimizer states and
    gradients of the whole model (every GPU's shard); with mixed precision (`mixed`: bf16-mixed, fp16-mixed
    full training) the fp32 master weights, which go with the optimizer; with offload=params the 16-bit weights
    too. DeepSpeed's own count (deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs): 16
    bytes per parameter with offload_optimizer, 18 with offload_param, before its 1.5 buffer factor."""
    m = ref.memory
    per_gpu: float = m.optimizer_bytes + m.gradients_bytes
    if mixed:
        per_gpu += m.weights_bytes  # the fp32 master (what a mixed-precision estimate counts as the weights)
    if offload == "params":
        per_gpu += m.weights_bytes / 2 if mixed else m.weights_bytes
    return int(per_gpu * ref.hardware.gpus)


def mixed_full(project: Project) -> bool:
    """Whether the project trains every parameter in mixed precision (fp32 master weights beside a 16-bit copy)."""
    w = project.workload
    return w.task not in ("lora", "qlora", "inference") and w.precision in ("bf16-mixed", "fp16-mixed")


def _host_ram(job: Job, t: Try) -> tuple[int, list[str]]:
    """Host RAM the try's CPU offload holds: the optimizer states and gradients of the whole model (and the
    parameters with offload=params), from the same layout without offload."""
    if t.layout.offload == "none":
        return 0, []
    ref = estimate_on(job, t.project, t.gpus, t.layout.model_copy(update={"offload": "none"}))
    if ref is None:
        return 0, []
    need = offload_host_bytes(ref, t.layout.offload, mixed_full(t.project))
    have = job.machine.ram_bytes * RAM_USABLE_FRACTION
    what = "optimizer states, gradients and parameters" if t.layout.offload == "params" else \
        "optimizer states and gradients"
    verdict = "fits" if need <= have else "does not fit"
    return need, [f"CPU offload holds the {what} in host RAM: {fmt_ram_gb(need)} of the machine's "
                  f"{fmt_ram_gb(job.machine.ram_bytes)} ({RAM_USABLE_FRACTION:.0%} usable: the OS, data loaders and "
                  f"pinned buffers keep the rest): {verdict}"]


def _meets(job: Job, est: EstimateResult) -> bool | None:
    if job.serving:
        target = job.project.workload.target_latency_s
        if target is None or est.inference is None:
            return None
        return est.inference.request_latency_s <= target
    hours = job.target_hours
    if hours is None or est.time is None or est.time.wall_hours is None:
        return None
    return est.time.wall_hours <= hours


def way(job: Job, t: Try) -> HaveWay | None:
    """The try on the machine: memory, host RAM, time, and whether it meets the target; None when it does not
    apply."""
    est = estimate_on(job, t.project, t.gpus, t.layout)
    if est is None:
        return None
    host, notes = _host_ram(job, t)
    notes += [n.message for n in est.notes if "offload" in n.code]
    changes = {k: v for k, v in t.workload_changes.items() if isinstance(v, (str, int, float, bool))}
    time = est.time
    return HaveWay(code=t.code, change=t.change, gpus=t.gpus, layout=dict(est.hardware.layout),
                   workload_changes=changes, changes_recipe=t.changes_recipe, device_bytes=est.memory.device_bytes,
                   usable_bytes=job.usable, fits=est.memory.device_bytes <= job.usable, host_ram_bytes=host,
                   ram_ok=host <= job.machine.ram_bytes * RAM_USABLE_FRACTION,
                   time_hours=time.wall_hours if time is not None else None,
                   tokens_per_s=time.tokens_per_s if time is not None else None,
                   request_latency_s=est.inference.request_latency_s if est.inference is not None else None,
                   meets_target=_meets(job, est), notes=notes)


#: less CPU offload first when two ways are as fast (PCIe traffic the step time may not show)
OFFLOAD_ORDER = {"none": 0, "optimizer": 1, "params": 2}


def rank_key(w: HaveWay) -> tuple[bool, bool, bool, bool, float, int, int]:
    """Runs first, then meets the target, then keeps the recipe (a layout or offload changes where the bytes
    live, not what is trained), then keeps the method (QLoRA instead of a full fine-tune last), then the fastest,
    then the least offload, then the least memory."""
    speed = w.time_hours if w.time_hours is not None else w.request_latency_s
    return (not w.runs, w.meets_target is False, w.changes_recipe, "task" in w.workload_changes,
            math.inf if speed is None else speed, OFFLOAD_ORDER.get(str(w.layout.get("offload", "none")), 0),
            w.device_bytes)


def as_written(job: Job, layout: Layout) -> Try:
    """The project as written on the machine's GPUs, with the layout it would run with there."""
    training = not job.serving
    text = estimate_layout_text({"zero": layout.zero, "tp": layout.tp, "pp": layout.pp, "offload": layout.offload,
                                 "dp": max(job.n // (layout.tp * layout.pp), 1)}, training)
    return Try(code="as-written", change=f"as written ({text})", project=job.project, gpus=job.n, layout=layout)


__all__ = ["OFFLOAD_ORDER", "RAM_USABLE_FRACTION", "Job", "as_written", "estimate_on", "offload_host_bytes", "rank_key",
           "way"]
