"""Audit a machine the user has, or is offered, for one project (`gpuplan check`): does the job fit, which
part is the bottleneck, what to change.

Pure: the machine (`gpuplan.cli.probe` probes it, `gpuplan.catalog.server_file` reads a server file), the project's
memory and speed estimate on that machine's GPUs (`gpuplan.api.estimate`, called by the command), the server rules
and the catalog go in; checklist items with the numbers behind them come out. The host checks (core/audit/host.py)
use the same rules as the server builder (core/server/builder.py, data/server_rules.toml), so an audited machine and
a proposed one are judged alike. The machine and its matching to the catalog live in core/audit/machine.py; this
module re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field

from gpuplan.core.audit.host import VERDICT_ORDER, Check, host_checks, worst
from gpuplan.core.audit.machine import (
    Disk,
    MachineGpu,
    MachineSpec,
    _Frozen,
    job_gpus,
    layout_for,
    match_gpu,
    on_machine,
)
from gpuplan.core.layout_text import estimate_layout_text as layout_text
from gpuplan.schema.plan import ChecklistItem, Verdict
from gpuplan.schema.project import Project
from gpuplan.schema.result import EstimateResult
from gpuplan.units import GIB, fmt_gib, fmt_hours

if TYPE_CHECKING:
    from gpuplan.schema.catalog import Catalog
    from gpuplan.schema.rules import ServerRules

CHECKLIST = ("VRAM validated", "System synergy", "Bottleneck", "What to change")


class Alternative(_Frozen):
    """A change to the project or the machine, and the peak memory per GPU it gives (the command estimates it)."""

    change: str
    #: needs hardware the machine lacks (more GPUs of its kind)
    needs_hardware: bool = False
    gpus: int
    device_bytes: int
    #: filled by `audit`: the result fits the machine's GPU with the headroom
    fits: bool | None = None
    #: the change is another task than the project's (QLoRA for a full fine-tune): listed after the project's own
    other_task: bool = False


class AuditResult(_Frozen):
    project: str
    machine: MachineSpec
    #: the GPUs the job runs on: catalog id (else the driver's name) and count; None and 0 without a GPU
    gpu: str | None
    gpus: int
    layout: dict[str, int | str]
    #: peak memory the job needs per GPU, and what the machine's GPU offers after the headroom
    device_bytes: int
    usable_bytes: int | None
    fits: bool
    #: one line: "fits", "fits, with warnings: ...", "does not fit: ..."
    verdict: str
    checklist: list[ChecklistItem]
    alternatives: list[Alternative] = Field(default_factory=list)
    #: the estimate behind the numbers (without a GPU: for the project's own hardware section)
    estimate: EstimateResult
    notes: list[str] = Field(default_factory=list)


# ----------------------------------------------------------------------------------------------- the audit

def audit(project: Project, machine: MachineSpec, est: EstimateResult, rules: ServerRules, catalog: Catalog, *,
          tokens_per_sample: int, job: Sequence[MachineGpu] = (),
          alternatives: Sequence[Alternative] = ()) -> AuditResult:
    """The checklist for `project` on `machine`. `job` is the GPUs the job runs on (`job_gpus`), `est` the
    estimate on them (without a GPU: on the project's own hardware section, to say what a GPU would need);
    `alternatives` are changes the command estimated, marked here as fitting or not."""
    j = _Job(project, machine, est, job)
    vram, usable, alts = _vram(j, alternatives)
    checks, synergy = _synergy(j, rules, catalog, tokens_per_sample)
    bottleneck = _bottleneck(j, vram, checks, usable)
    change, fits = _change(j, vram, synergy, checks, alts, usable, catalog)
    return AuditResult(project=project.name, machine=machine, gpu=j.name, gpus=j.n, layout=est.hardware.layout,
                       device_bytes=j.dev, usable_bytes=usable, fits=fits,
                       verdict=_verdict_line(j, vram, synergy, checks, usable, alts),
                       checklist=[vram, synergy, bottleneck, change], alternatives=alts, estimate=est,
                       notes=_notes(j) + list(machine.notes))


@dataclass(frozen=True)
class _Job:
    """What every step of the audit reads: the project, the machine, the estimate and the GPUs the job runs on."""

    project: Project
    machine: MachineSpec
    est: EstimateResult
    gpus: Sequence[MachineGpu]

    @property
    def headroom(self) -> float:
        return self.project.constraints.memory_headroom

    @property
    def production(self) -> bool:
        return self.project.goals.purpose == "production"

    @property
    def dev(self) -> int:
        """Peak memory per GPU the job needs."""
        return self.est.memory.device_bytes

    @property
    def want(self) -> float:
        """The GPU memory that holds `dev` with the headroom kept free."""
        return self.dev / (1 - self.headroom)

    @property
    def n(self) -> int:
        return len(self.gpus)

    @property
    def name(self) -> str | None:
        return (self.gpus[0].catalog_id or self.gpus[0].name) if self.gpus else None


def _notes(j: _Job) -> list[str]:
    notes: list[str] = []
    if j.gpus and j.n < len(j.machine.gpus):
        notes.append(f"the job runs on the {j.n} x {j.name}; the machine's other {len(j.machine.gpus) - j.n} GPU(s) "
                     "are not counted")
    g = j.project.growth
    if g.model_scale > 1 or g.context_scale > 1 or g.users_scale > 1:
        notes.append("planned growth (growth.*) is not checked here: `gpuplan plan` sizes servers for it")
    return notes


def _vram(j: _Job, alternatives: Sequence[Alternative]) -> tuple[ChecklistItem, int | None, list[Alternative]]:
    """"VRAM validated", the usable memory per GPU after the headroom, and the alternatives marked fitting or not."""
    lay_text = layout_text(j.est.hardware.layout, j.project.workload.task != "inference")
    peak = f"{fmt_gib(j.dev)} per GPU at the peak ({j.est.memory.peak_phase}; largest part {j.est.memory.dominant})"
    if not j.gpus:
        reasons = ["no GPU in this machine",
                   f"the project needs {peak} on {j.est.hardware.gpus} GPU(s) ({lay_text}): a GPU with >= "
                   f"{fmt_gib(j.want)} ({j.headroom:.0%} kept free)"]
        return ChecklistItem(item="VRAM validated", verdict="fail", reasons=reasons), None, []
    cap = min(x.memory_bytes for x in j.gpus)
    usable = int(cap * (1 - j.headroom))
    room = f"{1 - j.dev / cap:.0%} free" if j.dev <= cap else f"{j.dev / cap:.1f}x its memory"
    reasons = [f"{peak} on {j.n} x {j.gpus[0].name} ({fmt_gib(cap)} each, {lay_text}): {room}, "
               f"{j.headroom:.0%} free required (constraints.memory_headroom)"]
    verdict: Verdict = "pass" if j.dev <= usable else "warn" if j.dev <= cap else "fail"
    if verdict == "warn":
        reasons.append("it fits, but with less free than the headroom: fragmentation, another process or a "
                       "longer batch can run it out of memory")
    elif verdict == "fail":
        reasons.append(f"short by {fmt_gib(j.dev - usable)} per GPU")
    ecc, verdict = _ecc(j, verdict)
    vram = ChecklistItem(item="VRAM validated", verdict=verdict, reasons=reasons + ecc)
    return vram, usable, [a.model_copy(update={"fits": a.device_bytes <= usable}) for a in alternatives]


def _ecc(j: _Job, verdict: Verdict) -> tuple[list[str], Verdict]:
    """The ECC reason, and the VRAM verdict with it: ECC off passes only outside production."""
    eccs = [x.ecc for x in j.gpus]
    if False in eccs:
        off = [str(i) for i, e in enumerate(eccs) if e is False]
        reason = (f"ECC off on GPU(s) {', '.join(off)}: memory errors go undetected"
                  + (" (production: ECC expected)" if j.production else ""))
        return [reason], "warn" if j.production and verdict == "pass" else verdict
    return ["ECC: not known" if None in eccs else "ECC on"], verdict


def _synergy(j: _Job, rules: ServerRules, catalog: Catalog, tokens_per_sample: int) -> tuple[list[Check],
                                                                                               ChecklistItem]:
    """The host checks and "System synergy"; without a GPU the host is checked for the GPUs the project plans."""
    if j.gpus:
        vram_total = float(sum(x.memory_bytes for x in j.gpus))
        n_host = j.n
        lead: list[str] = []
    else:
        hw = j.est.hardware
        n_host = hw.gpus
        per_gpu = hw.gpu_memory_bytes or j.want
        vram_total = per_gpu * n_host
        lead = [f"no GPU: the host is checked for the {n_host} x "
                f"{hw.gpu or f'GPU with {fmt_gib(per_gpu)}'} the project plans"]
    checks = host_checks(j.project, j.machine, j.est, j.gpus, n_host, vram_total, rules, catalog, tokens_per_sample)
    return checks, ChecklistItem(item="System synergy", verdict=worst(c.verdict for c in checks),
                                 reasons=lead + [c.text for c in checks])


def _bottleneck(j: _Job, vram: ChecklistItem, checks: list[Check], usable: int | None) -> ChecklistItem:
    """The part that falls furthest short of what the job asks (have / need; unmeasured shortfalls rank midway);
    the GPUs themselves when none does."""
    weak = sorted((c for c in checks if c.verdict in ("warn", "fail")),
                  key=lambda c: 0.5 if c.ratio is None else c.ratio)
    if not j.gpus:
        return ChecklistItem(item="Bottleneck", verdict="fail", reasons=["no GPU: nothing runs the job"])
    if vram.verdict == "fail":
        return ChecklistItem(item="Bottleneck", verdict="fail", reasons=[
            f"GPU memory: the job needs {fmt_gib(j.dev)} per GPU, {j.name} offers {fmt_gib(usable or 0)} after the "
            f"{j.headroom:.0%} headroom"])
    if weak:
        return ChecklistItem(item="Bottleneck", verdict="warn", reasons=[weak[0].text]
                             + [f"then: {c.part}" for c in weak[1:]])
    return ChecklistItem(item="Bottleneck", verdict="pass", reasons=_gpu_bound(j.est, j.name or ""))


def _change(j: _Job, vram: ChecklistItem, synergy: ChecklistItem, checks: list[Check], alts: list[Alternative],
            usable: int | None, catalog: Catalog) -> tuple[ChecklistItem, bool]:
    """"What to change" (memory first, then ECC, then the host parts, worst first), and whether the job fits."""
    fixes: list[str] = []
    if not j.gpus:
        bigger = _bigger_gpus(j.dev, j.headroom, catalog, j.production)
        fixes.append(f"add a GPU with >= {fmt_gib(j.want)} (e.g. {', '.join(bigger)})" if bigger else
                     f"add GPUs: one needs >= {fmt_gib(j.want)}; no catalog GPU holds that alone, so shard the model "
                     "over several (ZeRO-3)")
    else:
        if j.dev > (usable or 0):
            fixes += _memory_fixes(alts, j.dev, j.headroom, catalog, vram.verdict, j.production)
        if j.production and False in (x.ecc for x in j.gpus):
            fixes.append("ECC on (nvidia-smi -e 1, then a reboot) where the GPU has it; GeForce cards have none: "
                         "datacenter GPUs for production")
    fixes += [c.fix for c in sorted(checks, key=lambda c: -VERDICT_ORDER[c.verdict]) if c.fix and c.verdict != "pass"]
    fits = bool(j.gpus) and vram.verdict != "fail" and synergy.verdict != "fail"
    verdict: Verdict = "fail" if not fits else "warn" if fixes else "pass"
    return ChecklistItem(item="What to change", verdict=verdict,
                         reasons=fixes or ["nothing: the machine suits the project as it is"]), fits


def _verdict_line(j: _Job, vram: ChecklistItem, synergy: ChecklistItem, checks: list[Check],
                  usable: int | None, alts: Sequence[Alternative] = ()) -> str:
    """One line: "fits", "fits, with warnings: ...", "does not fit: ..."."""
    if not j.gpus:
        return f"does not fit: no GPU (the project needs {fmt_gib(j.dev)} per GPU)"
    if vram.verdict == "fail":
        line = (f"does not fit: needs {fmt_gib(j.dev)} per GPU as written, {j.name} offers {fmt_gib(usable or 0)} "
                "after the headroom")
        same = next((a for a in alts if a.fits and not a.needs_hardware and not a.other_task), None)
        return line + (f"; fits with {same.change} ({fmt_gib(same.device_bytes)} per GPU), the same task on this "
                       "machine" if same is not None else "")
    if synergy.verdict == "fail":
        return "does not fit: " + "; ".join(c.text for c in checks if c.verdict == "fail")
    warned = [c.part for c in checks if c.verdict == "warn"]
    if vram.verdict == "warn":
        warned.insert(0, "VRAM headroom" if j.dev > (usable or 0) else "ECC")
    return "fits" + (f", with warnings: {', '.join(warned)}" if warned else "")


# ------------------------------------------------------------------------------------------ what to change

def _bigger_gpus(need: float, headroom: float, catalog: Catalog, production: bool) -> list[str]:
    """The three smallest catalog GPUs (by memory; datacenter parts for production) that hold `need` bytes per
    GPU with the headroom."""
    fit = sorted((g for g in catalog.gpus.rows.values() if g.memory_gib * GIB * (1 - headroom) >= need
                  and (g.market_class == "datacenter" or not production)), key=lambda g: (g.memory_gib, g.id))
    out: list[str] = []
    sizes: set[float] = set()
    for g in fit:
        if g.memory_gib not in sizes:
            sizes.add(g.memory_gib)
            out.append(g.id)
    return out[:3]


def _gpu_bound(est: EstimateResult, name: str) -> list[str]:
    """No host part falls short: the GPUs bound the job, as they should; say how, with the numbers."""
    if est.time is not None:
        t = est.time
        parts = sorted(((k, v / t.step_seconds) for k, v in t.step_breakdown_s.items() if v > 0),
                       key=lambda kv: -kv[1])
        out = [f"the GPUs ({name}): {t.tokens_per_s:,.0f} tokens/s, MFU {t.mfu:.0%}"
               + (f", {fmt_hours(t.wall_hours)} for the run" if t.wall_hours is not None else "")]
        out.append(f"a {t.step_seconds:,.2f} s step is " + ", ".join(f"{k} {v:.0%}" for k, v in parts[:4]))
        return out
    if est.inference is not None:
        i = est.inference
        return [f"the GPUs ({name}): decoding is {i.decode_bound}-bound, {i.aggregate_tokens_per_s:,.0f} tokens/s in "
                f"all, {i.request_latency_s:,.1f} s per request"]
    return [f"no host part falls short; speed not estimated: {name} is not in the catalog (`gpuplan catalog gpus`)"]


def _memory_fixes(alts: Sequence[Alternative], dev: int, headroom: float, catalog: Catalog, verdict: Verdict,
                  production: bool) -> list[str]:
    """Changes that bring the job within the GPU's memory: software first, then more GPUs, then a larger GPU."""
    ok = [a for a in alts if a.fits]
    # every software change the estimate confirms (issue #13: not a fixed few), then the fewest more GPUs
    out = [f"{a.change}: {fmt_gib(a.device_bytes)} per GPU, fits" for a in ok if not a.needs_hardware
           and not a.other_task]
    out += [f"{a.change}: {fmt_gib(a.device_bytes)} per GPU, fits" for a in ok if a.needs_hardware][:1]
    if not ok and alts:
        best = min(alts, key=lambda a: a.device_bytes)
        out.append(f"no change tried fits; the closest, {best.change}, still needs {fmt_gib(best.device_bytes)} "
                   "per GPU")
    bigger = _bigger_gpus(dev, headroom, catalog, production)
    if bigger:
        out.append(f"or a GPU with >= {fmt_gib(dev / (1 - headroom))} (e.g. {', '.join(bigger)})")
    elif verdict == "fail":
        out.append(f"no catalog GPU holds {fmt_gib(dev / (1 - headroom))} alone: shard the model over more GPUs "
                   "(ZeRO-3)")
    out += [f"{a.change}: {fmt_gib(a.device_bytes)} per GPU, fits" for a in ok if a.other_task]
    software = [a for a in alts if not a.needs_hardware and not a.fits and a.device_bytes < dev]
    if not any(not a.needs_hardware for a in ok) and software:
        best = min(software, key=lambda a: a.device_bytes)
        bigger = _bigger_gpus(best.device_bytes, headroom, catalog, production)
        if bigger:
            out.append(f"or, with {best.change}, a GPU with >= {fmt_gib(best.device_bytes / (1 - headroom))} "
                       f"(e.g. {', '.join(bigger)})")
    return out



__all__ = ["CHECKLIST", "Alternative", "AuditResult", "Disk", "MachineGpu", "MachineSpec", "audit", "job_gpus",
           "layout_for", "layout_text", "match_gpu", "on_machine"]
