"""gpuplan: which GPU server to get for an AI project, and why. Public API: `plan` (which server to get), `estimate`
(memory, FLOPs and speed of one configuration), `fit` (the largest batch, sequence and model a GPU holds),
`check_machine` (a project on a machine you have: `probe_machine`, or `read_server_file` for an offer), the catalog
(`load_catalog`, `builtin_catalog`, `load_bundle`: catalogs, prices and assumptions) and the date a plan is made for
(`plan_date`), with their result types and errors.

The names are imported on first use (PEP 562), so that `import gpuplan` (and the `gpuplan` command, whose
modules live in this package) does not load the API, the catalogs and the pydantic schema until needed."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuplan.api import check_machine, estimate, fit, load_bundle, plan
    from gpuplan.catalog.hardware import builtin_catalog, load_catalog
    from gpuplan.catalog.loader import load_project
    from gpuplan.catalog.server_file import read_server_file
    from gpuplan.cli.probe import probe_machine
    from gpuplan.clock import plan_date
    from gpuplan.errors import (
        CatalogError,
        GpuplanError,
        HubUnavailableError,
        InfeasibleError,
        InputError,
        UnknownNameError,
    )
    from gpuplan.schema.catalog import Catalog
    from gpuplan.schema.fit import FitResult
    from gpuplan.schema.plan import PlanResult
    from gpuplan.schema.project import Project
    from gpuplan.schema.result import EstimateResult

_SOURCES = {
    "Catalog": "gpuplan.schema.catalog",
    "CatalogError": "gpuplan.errors",
    "EstimateResult": "gpuplan.schema.result",
    "FitResult": "gpuplan.schema.fit",
    "GpuplanError": "gpuplan.errors",
    "HubUnavailableError": "gpuplan.errors",
    "InfeasibleError": "gpuplan.errors",
    "InputError": "gpuplan.errors",
    "PlanResult": "gpuplan.schema.plan",
    "Project": "gpuplan.schema.project",
    "UnknownNameError": "gpuplan.errors",
    "builtin_catalog": "gpuplan.catalog.hardware",
    "check_machine": "gpuplan.api",
    "estimate": "gpuplan.api",
    "fit": "gpuplan.api",
    "load_bundle": "gpuplan.api",
    "load_catalog": "gpuplan.catalog.hardware",
    "load_project": "gpuplan.catalog.loader",
    "plan": "gpuplan.api",
    "plan_date": "gpuplan.clock",
    "probe_machine": "gpuplan.cli.probe",
    "read_server_file": "gpuplan.catalog.server_file",
}

__all__ = [
    "Catalog",
    "CatalogError",
    "EstimateResult",
    "FitResult",
    "GpuplanError",
    "HubUnavailableError",
    "InfeasibleError",
    "InputError",
    "PlanResult",
    "Project",
    "UnknownNameError",
    "builtin_catalog",
    "check_machine",
    "estimate",
    "fit",
    "load_bundle",
    "load_catalog",
    "load_project",
    "plan",
    "plan_date",
    "probe_machine",
    "read_server_file",
]


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
