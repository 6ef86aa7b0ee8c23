"""The Python API of `gpuplan check`: a project's audit on a machine the user has (probed, gpuplan.probe) or is
offered (a server file): the estimate on its GPUs, the changes that would make the project fit, the checklist."""

from pathlib import Path
from typing import Optional, Union

from gpuplan import api
from gpuplan.catalog.hardware import Catalog
from gpuplan.catalog.loader import load_project, resolve_model
from gpuplan.catalog.server_rules import load_server_rules
from gpuplan.core.audit.checks import Alternative, AuditResult, MachineSpec, audit, job_gpus, layout_for, on_machine
from gpuplan.core.owned.tries import memory_tries
from gpuplan.core.owned.ways import RAM_USABLE_FRACTION, offload_host_bytes
from gpuplan.core.sizing.speed import tokens_per_sample
from gpuplan.errors import GpuplanError
from gpuplan.schema.project import Layout, Project
from gpuplan.schema.result import EstimateResult
from gpuplan.units import fmt_ram_gb


def check_machine(project_path: Union[str, Path], machine: MachineSpec, catalog: Catalog) -> AuditResult:
    """The project's estimate on the machine's GPUs (the layout it would run with), the changes that would
    make it fit when it does not, and the audit of the whole machine."""
    project, base = load_project(project_path)
    arch = resolve_model(project.model, base).arch
    rules = load_server_rules()
    tok = tokens_per_sample(arch, project.workload)
    job = job_gpus(machine)
    if not job:  # what a GPU would need: the project on its own hardware section (one GPU without one)
        est = api.estimate(project, base_dir=base, catalog=catalog)
        return audit(project, machine, est, rules, catalog, tokens_per_sample=tok)
    gpu_id, n = job[0].catalog_id, len(job)
    usable = min(g.memory_bytes for g in job) * (1 - project.constraints.memory_headroom)
    layout = layout_for(project, n)
    if layout is None:  # inference without a layout: the smallest tensor-parallel degree that fits
        est, layout = _smallest_tp(project, base, catalog, gpu_id, n, usable)
    else:
        est = api.estimate(on_machine(project, gpu_id, n, layout), base_dir=base, catalog=catalog)
    alts = [] if est.memory.device_bytes <= usable else \
        _alternatives(project, base, catalog, gpu_id, n, layout, arch.kind, machine.ram_bytes)
    return audit(project, machine, est, rules, catalog, job=job, tokens_per_sample=tok, alternatives=alts)


def _smallest_tp(project: Project, base: Optional[Path], catalog: Catalog, gpu_id: Optional[str], n: int,
                 usable: float) -> tuple[EstimateResult, Layout]:
    found: Optional[tuple[EstimateResult, Layout]] = None
    for tp in (1, 2, 4, 8):
        if n % tp:
            continue
        try:
            est = api.estimate(on_machine(project, gpu_id, n, Layout(tp=tp)), base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # tp does not divide the model's heads
        found = (est, Layout(tp=tp))
        if est.memory.device_bytes <= usable:
            break
    if found is None:
        return api.estimate(on_machine(project, gpu_id, n, Layout()), base_dir=base, catalog=catalog), Layout()
    return found


def _alternatives(project: Project, base: Optional[Path], catalog: Catalog, gpu_id: Optional[str], n: int,
                  layout: Layout, kind: str, ram_bytes: int) -> list[Alternative]:
    """Every change core/owned/tries.py knows that lowers the memory per GPU (the workload's settings, the
    training stack's savers, layouts and CPU offload, then more GPUs of the same kind), each estimated on this
    machine's GPU (issue #13: every fix the estimator confirms, not a fixed list). A CPU offload the machine's RAM
    cannot hold is marked as needing hardware (more RAM), with what it needs."""
    out = []
    for t in memory_tries(project, n, layout, kind):
        try:
            est = api.estimate(on_machine(t.project, gpu_id, t.gpus, t.layout), base_dir=base, catalog=catalog)
            ref = est if t.layout.offload == "none" else api.estimate(
                on_machine(t.project, gpu_id, t.gpus, t.layout.model_copy(update={"offload": "none"})),
                base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # the change does not apply to this model (a layout its heads do not divide)
        change, hardware = t.change, t.needs_hardware
        host = offload_host_bytes(ref, t.layout.offload) if t.layout.offload != "none" else 0
        if host > ram_bytes * RAM_USABLE_FRACTION:
            change += f" (needs {fmt_ram_gb(host)} of host RAM; this machine has {fmt_ram_gb(ram_bytes)})"
            hardware = True
        out.append(Alternative(change=change, needs_hardware=hardware, gpus=t.gpus,
                               device_bytes=est.memory.device_bytes))
    return out


__all__ = ["check_machine"]
