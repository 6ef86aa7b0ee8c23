"""The Python API of `gpuplan check`: a project's audit on a machine the user has (probed, gpuplan.probe) or is
offered (a server file): the estimate on its GPUs, the changes that would make the project fit, the checklist."""

import math
from pathlib import Path
from typing import Optional, Union

from gpuplan import api
from gpuplan.catalog.hardware import Catalog
from gpuplan.catalog.loader import load_project, resolve_model
from gpuplan.catalog.server_rules import load_server_rules
from gpuplan.core.audit.checks import Alternative, AuditResult, MachineSpec, audit, job_gpus, layout_for, on_machine
from gpuplan.core.sizing.speed import tokens_per_sample
from gpuplan.errors import GpuplanError
from gpuplan.schema.project import Layout, Project
from gpuplan.schema.result import EstimateResult


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
        _alternatives(project, base, catalog, gpu_id, n, layout, arch.kind)
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


def _stack_tries(project: Project, n: int, layout: Layout) -> list[tuple[str, Project, int, Layout, bool]]:
    """The training stack's own memory savers on this machine (issue #13: every fix the estimator confirms, not
    a fixed list): an 8-bit optimizer, pure bf16, both, CPU offload of the optimizer states or of the parameters
    too, and half the sequence."""
    w = project.workload

    def with_w(**update: object) -> Project:
        return project.model_copy(update={"workload": w.model_copy(update=update)})

    out: list[tuple[str, Project, int, Layout, bool]] = []
    eight_bit = w.optimizer == "adamw"
    pure = w.task == "full-finetune" or w.task == "pretrain"
    pure = pure and w.precision in ("bf16-mixed", "fp16-mixed", "fp32")
    if eight_bit:
        out.append(("8-bit AdamW (bitsandbytes)", with_w(optimizer="adamw-8bit"), n, layout, False))
    if pure:
        out.append(("pure bf16: bf16 weights, gradients and optimizer states", with_w(precision="bf16"), n, layout,
                    False))
    if eight_bit and pure:
        out.append(("pure bf16 with 8-bit AdamW", with_w(precision="bf16", optimizer="adamw-8bit"), n, layout,
                    False))
    if layout.offload == "none" and layout.tp * layout.pp == 1:
        note = " (the PCIe traffic is not in the step time)"
        out.append(("ZeRO-3 with the optimizer states offloaded to CPU RAM" + note, project, n,
                    Layout(zero=3, offload="optimizer"), False))
        out.append(("ZeRO-3 with parameters and optimizer states offloaded to CPU RAM" + note, project, n,
                    Layout(zero=3, offload="params"), False))
    if w.sequence_length and w.sequence_length >= 512:
        out.append((f"sequences of {w.sequence_length // 2} tokens instead of {w.sequence_length}",
                    with_w(sequence_length=w.sequence_length // 2), n, layout, False))
    return out


def _alternatives(project: Project, base: Optional[Path], catalog: Catalog, gpu_id: Optional[str], n: int,
                  layout: Layout, kind: str) -> list[Alternative]:
    """Single changes that lower the memory per GPU, each estimated on this machine's GPU: the workload's
    settings first, then more GPUs of the same kind."""
    w = project.workload

    def with_w(**update: object) -> Project:
        return project.model_copy(update={"workload": w.model_copy(update=update)})

    tries: list[tuple[str, Project, int, Layout, bool]] = []
    if w.task != "inference":
        if not w.gradient_checkpointing and kind != "cnn":
            tries.append(("turn on gradient checkpointing", with_w(gradient_checkpointing=True), n, layout, False))
        if w.micro_batch_size > 1:
            tries.append(("micro-batch 1 (gradient accumulation keeps the global batch)",
                          with_w(micro_batch_size=1, global_batch_size=w.global_batch_size or w.micro_batch_size * n),
                          n, layout, False))
        if n > 1 and layout.zero < 3 and layout.tp * layout.pp == 1:
            tries.append((f"ZeRO-3 (FSDP) over the {n} GPUs", project, n, Layout(zero=3), False))
        if w.task in ("lora", "full-finetune") and kind not in ("cnn", "vit"):
            tries.append(("QLoRA: a 4-bit frozen base with adapters", with_w(task="qlora"), n, layout, False))
        tries += _stack_tries(project, n, layout)
        if len(tries) > 1:  # every setting change at once, on this machine
            merged: dict[str, object] = {}
            mine = w.model_dump()
            for _, proj, _, _, _ in tries:
                merged.update({k: v for k, v in proj.workload.model_dump().items() if v != mine[k]})
            lay = Layout(zero=3) if n > 1 and layout.tp * layout.pp == 1 else layout
            try:
                together = type(w).model_validate({**mine, **merged})
            except ValueError:  # the changes do not combine (a task that takes no such precision, say)
                together = None
            if together is not None:
                tries.append(("all of these together", project.model_copy(update={"workload": together}), n, lay,
                              False))
        tries += [(f"{k} GPUs like these with ZeRO-3", project, k, Layout(zero=3), True) for k in (2, 4, 8) if k > n]
    else:
        if w.kv_cache_dtype != "fp8":
            tries.append(("an fp8 KV cache", with_w(kv_cache_dtype="fp8"), n, layout, False))
        if w.weights_dtype in (None, "fp32", "bf16", "fp16"):
            tries.append(("fp8 weights", with_w(weights_dtype="fp8"), n, layout, False))
            tries.append(("int4 weights (AWQ/GPTQ)", with_w(weights_dtype="int4"), n, layout, False))
        if w.batch_size > 1:
            tries.append((f"{math.ceil(w.batch_size / 2)} concurrent requests instead of {w.batch_size}",
                          with_w(batch_size=math.ceil(w.batch_size / 2)), n, layout, False))
        tries += [(f"{k} GPUs like these, tensor parallel {k}", project, k, Layout(tp=k), True)
                  for k in (2, 4, 8) if k > n]
    out = []
    for change, proj, k, lay, hardware in tries:
        try:
            est = api.estimate(on_machine(proj, gpu_id, k, lay), base_dir=base, catalog=catalog)
        except GpuplanError:
            continue  # the change does not apply to this model (a layout its heads do not divide)
        out.append(Alternative(change=change, needs_hardware=hardware, gpus=k, device_bytes=est.memory.device_bytes))
    return out


__all__ = ["check_machine"]
