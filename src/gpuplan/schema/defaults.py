"""The defaults and choices that several parts of gpuplan share, each written once: the project schema, the core,
the CLI's options and the web API read them from here. Plain Python (no pydantic), so `gpuplan --help` can read
the choices without building the schema."""

from typing import Literal, get_args

#: how `gpuplan plan` ranks: cheapest, fastest, or the geometric mean of the two ratios
Objective = Literal["cost", "time", "balanced"]
OBJECTIVES: tuple[str, ...] = get_args(Objective)
DEFAULT_OBJECTIVE: Objective = "balanced"
#: candidates a plan returns unless told otherwise (`gpuplan plan --top`, `POST /api/plan?top=`)
PLAN_TOP = 8
#: months the costs and the growth plan look ahead (growth.horizon_months)
HORIZON_MONTHS = 36
#: fraction of each GPU's memory kept free (constraints.memory_headroom)
MEMORY_HEADROOM = 0.10

__all__ = ["DEFAULT_OBJECTIVE", "HORIZON_MONTHS", "MEMORY_HEADROOM", "OBJECTIVES", "PLAN_TOP", "Objective"]
