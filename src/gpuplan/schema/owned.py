"""What `gpuplan plan --have SERVER.yaml` / `--this-machine` adds to a plan: whether the server the team already has
can do the job and how, and what to add, rent or buy for the rest (core/owned.py). JSON keys carry their units."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)


class HaveWay(_Out):
    """One way to run the job on the server the team has (`plan --have`): a layout, an offload, a training-stack
    setting (8-bit optimizer, pure bf16, shorter sequence ...), each re-estimated and timed on its GPUs
    (core/owned.py)."""

    #: a stable id for programs ("as-written", "zero-3-offload-optimizer", "adamw-8bit", ...)
    code: str
    #: the change, for people
    change: str
    gpus: int
    layout: dict[str, int | str]
    #: workload keys that differ from the project as written (new values)
    workload_changes: dict[str, str | int | float | bool] = Field(default_factory=dict)
    #: the change alters what is trained or how (numerics, method, sequence): the result may differ
    changes_recipe: bool = False
    device_bytes: int
    #: the GPU's memory less the headroom (PlanResult.headroom)
    usable_bytes: int
    fits: bool
    #: host RAM the CPU offload needs on this machine (0 without offload), and whether the machine has it
    host_ram_bytes: int = 0
    ram_ok: bool = True
    #: training: wall hours of the run and tokens/s; serving: seconds per request
    time_hours: float | None = None
    tokens_per_s: float | None = None
    request_latency_s: float | None = None
    #: the project's deadline (goals.deadline_days) or latency target is met; None when it sets none
    meets_target: bool | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def runs(self) -> bool:
        """The job runs this way on the machine: it fits its GPUs and, with offload, its RAM."""
        return self.fits and self.ram_ok


HaveKind = Literal["keep", "rent-rest", "add", "rent", "replace"]


class HaveOption(_Out):
    """What to do about the job given the server the team has: run it there (keep), run it there and rent the part
    the deadline leaves over (rent-rest), add GPUs or RAM to it (add), rent the whole job (rent), or buy the plan's
    recommendation instead (replace). Costs are in PlanResult.currency."""

    kind: HaveKind
    what: str
    #: None: no price in the lists (the reasons say which)
    cost: float | None
    #: "per run" (training) or "over N months" (serving)
    cost_basis: str
    time_hours: float | None = None
    meets_target: bool | None = None
    #: the cheapest option that meets the target (the one the verdict names)
    best: bool = False
    reasons: list[str] = Field(default_factory=list)


class HaveResult(_Out):
    """`plan --have SERVER.yaml` / `--this-machine`: can the server the team has do the job, how, and what to add,
    rent or buy for the rest (core/owned.py)."""

    #: the server file's path (and name) or "this machine (HOST), probed ..."
    machine: str
    #: the GPUs the job runs on: catalog id (else the driver's name) and count; None and 0 without a GPU
    gpu: str | None
    gpus: int
    gpu_memory_bytes: int | None = None
    ram_bytes: int
    cpu_cores: int
    #: some way runs the job on this machine and meets the deadline (or latency target)
    can_do: bool
    #: one line: the answer, then the cheapest option
    verdict: str
    #: the way to run it there (the best of `ways`): meets the target, keeps the recipe, fastest; None when none runs
    how: HaveWay | None = None
    #: every way tried on this machine, those that run first
    ways: list[HaveWay] = Field(default_factory=list)
    #: what to do, cheapest first (those without a price last)
    options: list[HaveOption] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


__all__ = ["HaveKind", "HaveOption", "HaveResult", "HaveWay"]
