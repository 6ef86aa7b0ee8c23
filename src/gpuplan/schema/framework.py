"""What a training framework can run (data/frameworks.toml, each row's `can` table, loaded by catalog/frameworks.py):
the ZeRO/FSDP stages and how the framework names them, the tasks it runs tensor, pipeline, context and expert
parallelism for, CPU offload, QLoRA and FP8; and the tasks (and model kinds) it is the plan's default for. The search
proposes only the layouts the project's framework can run (core/sizing/frameworks.py). Types only."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuplan.schema.project import Framework, Offload, Task


class FrameworkCaps(BaseModel):
    """One framework's capabilities, with where they are written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Framework
    #: how the plan names the framework ("HF Trainer", "torchtitan")
    name: str
    #: the adapter library it trains LoRA/QLoRA with ("PEFT"), named in the stack after the framework; "" for none
    adapters: str = ""
    #: the ZeRO stages it runs with several data-parallel ranks, and what runs each (0: "DDP", 3: "FSDP2" or
    #: "DeepSpeed ZeRO-3"); a single GPU (no data parallelism) always runs
    zero: dict[int, str]
    #: the tasks it runs tensor / pipeline / context / expert parallelism for (empty: none)
    tp: tuple[Task, ...] = ()
    pp: tuple[Task, ...] = ()
    cp: tuple[Task, ...] = ()
    ep: tuple[Task, ...] = ()
    #: the ZeRO stages it combines with pipeline parallelism (DeepSpeed's pipeline engine: 0 and 1)
    pp_zero: tuple[int, ...] = (0, 1, 2, 3)
    #: CPU offload it runs (layout.offload values other than "none")
    offload: tuple[Offload, ...] = ()
    qlora: bool = False
    fp8: bool = False
    #: the tasks it is the plan's default framework for, and the model kinds (empty: every kind)
    default_for: tuple[Task, ...] = ()
    default_kinds: tuple[str, ...] = ()
    source: str
    as_of: str


class TrainingStack(BaseModel):
    """The training software a plan's candidate is timed on and launched with (Candidate.stack, issue #30)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    #: workload.framework: the project's, or the plan's default for its task (None: the project's own script)
    framework: str | None
    #: the speed model's stack: "eager" (plain PyTorch + transformers, as the HF Trainer runs) or "tuned"
    stack: str
    #: in words: "HF Trainer + PEFT + DeepSpeed ZeRO-3 (eager kernels)"
    text: str


__all__ = ["FrameworkCaps", "TrainingStack"]
