"""GRPO's placement for a plan's candidate (issue #31): the search sizes the colocated placement (core/search/
training.py); for each shown candidate's GPUs this tries separate pools too, every split of its GPUs between the
engine and the trainer (the engine's pool a power of two, whole engine replicas, the trainer a multiple of the
candidate's tensor x pipeline group, else ZeRO-3 alone), each pool within the usable memory, and says which placement
is faster and where its step's time goes. The engine alone on its GPUs takes vLLM's own share (data/serving.toml,
0.9), no more than the plan's headroom leaves: the two are not stacked, as for a serving replica. Pure: the data
come in as arguments."""

from __future__ import annotations

from typing import NamedTuple

from gpuplan.core.search.explore import trainable_parameters
from gpuplan.core.sizing.grpo import policy_project, policy_workload, with_rollout
from gpuplan.core.sizing.memory import estimate_memory
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.speed import estimate_training_speed
from gpuplan.schema.catalog import Table
from gpuplan.schema.estimate import ActivationTable, Note, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Layout, Project, Workload
from gpuplan.schema.serving import ServingData
from gpuplan.schema.speed import SpeedModel

#: the parts of a step's breakdown a placement line names, in this order
PARTS = (("rollout", ("rollout_prefill", "rollout_decode")), ("weight sync", ("weight_sync",)),
         ("log-probs", ("log_probs",)))


class Placement(NamedTuple):
    """One way to run the step on the candidate's GPUs: the engine's GPUs (0: colocated), the step's seconds and
    where they go."""

    engine_gpus: int
    step_s: float
    parts: dict[str, float]


def breakdown_of(parts: dict[str, float]) -> dict[str, float]:
    """A step's breakdown as a placement line names it: rollout, weight sync, log-probs, training (the rest)."""
    out = {name: sum(parts.get(k, 0.0) for k in keys) for name, keys in PARTS}
    out["training"] = sum(parts.values()) - sum(out.values())
    return {k: v for k, v in out.items() if v > 0}


def separate_options(arch: ModelArch, p: ParamCount, w: Workload, gpu: Gpu, n: int, node: int, lay: Layout,
                     usable: int, headroom: float, sm: SpeedModel, table: ActivationTable, oh: Overheads,
                     serving: ServingData, trainable: int) -> list[Placement]:
    """Every split of `n` GPUs into separate pools that fits `usable` bytes per GPU, timed."""
    spec = w.grpo
    assert spec is not None
    share = min(serving.engine.gpu_memory_utilization, 1 - headroom)
    g = int(gpu.memory_gib * (1 << 30))
    out = []
    engine = 1
    while engine < n:
        trainer = n - engine
        tp = min(spec.rollout_tp or lay.tp, engine)
        mp = lay.tp * lay.pp
        t_lay = lay if trainer % mp == 0 and trainer >= mp else Layout(zero=3 if trainer > 1 else 0)
        if engine % tp == 0 and arch.num_heads % tp == 0:
            ws = w.model_copy(update={"grpo": spec.model_copy(update={
                "placement": "separate", "rollout_gpus": engine, "rollout_tp": tp, "gpu_memory_utilization": share})})
            m = estimate_memory(arch, p, ws, t_lay, trainer, table, oh)
            both = with_rollout(m, arch, p, ws, t_lay, trainer, oh, serving.engine, g)
            starts = not any(x.code == "grpo-engine-cannot-start" for x in both.notes)
            if starts and max(m.device_bytes, both.device_bytes) <= usable:
                sp = estimate_training_speed(arch, p, ws, t_lay, trainer, gpu, sm, table, trainable=trainable,
                                             gpus_per_node=min(trainer, node), serving=serving)
                assert sp.time is not None
                out.append(Placement(engine, sp.time.step_seconds, breakdown_of(sp.time.step_breakdown_s)))
        engine *= 2
    return out


def placement_note(gpu_id: str, n: int, colocated: Placement, options: list[Placement]) -> Note:
    """Which placement is faster on the candidate's `n` x `gpu_id`, and where each one's step goes."""
    def line(pl: Placement) -> str:
        parts = ", ".join(f"{k} {v:,.0f}" if v >= 10 else f"{k} {v:.2g}" for k, v in pl.parts.items())
        return f"{pl.step_s:,.0f} s per step ({parts})"

    head = f"GRPO placement on {n} x {gpu_id}: colocated {line(colocated)}"
    if not options:
        return Note(code="grpo-placement", message=f"{head}; no split into separate pools fits: colocated")
    best = min(options, key=lambda o: o.step_s)
    sep = (f"separate pools, best split {best.engine_gpus} engine + {n - best.engine_gpus} trainer GPU(s) of "
           f"{len(options)} that fit: {line(best)}")
    if best.step_s < colocated.step_s:
        return Note(code="grpo-placement", message=f"{head}; {sep}: separate pools are faster here (set "
                    f"grpo.placement: separate, grpo.rollout_gpus: {best.engine_gpus}; the plan's time and cost are "
                    "the colocated ones)")
    return Note(code="grpo-placement", message=f"{head}; {sep}: colocated is faster, kept")


def placement_of(rec: Candidate | None, project: Project, arch: ModelArch, gpus: Table[Gpu], sm: SpeedModel,
                 table: ActivationTable, oh: Overheads, serving: ServingData | None, headroom: float) -> list[Note]:
    """The placement note of a GRPO project's recommendation `rec` (none for other projects)."""
    w = project.workload
    if rec is None or rec.time is None or w.grpo is None or serving is None:
        return []
    gpu = gpus.find(rec.gpu_id, ["gpu"])
    p = count_params(arch)
    pw = policy_workload(w).model_copy(update={
        "gradient_checkpointing": bool(rec.layout.gradient_checkpointing),
        "micro_batch_size": rec.layout.micro_batch_size or 1})
    n = rec.gpus_per_server * rec.servers
    lay = Layout(zero=rec.layout.zero, tp=rec.layout.tp, pp=rec.layout.pp)
    usable = int(int(gpu.memory_gib * (1 << 30)) * (1 - headroom))
    colocated = Placement(0, rec.time.step_seconds, breakdown_of(rec.time.step_breakdown_s))
    options = separate_options(arch, p, pw, gpu, n, rec.gpus_per_server, lay, usable, headroom, sm, table, oh,
                               serving, trainable_parameters(arch, p, policy_project(project)))
    return [placement_note(rec.gpu_id, n, colocated, options)]


__all__ = ["Placement", "breakdown_of", "placement_note", "placement_of", "separate_options"]
