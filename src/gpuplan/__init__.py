"""gpuplan: which GPU server to get for an AI project, and why. Public API.

The names are imported on first use (PEP 562), so that `import gpuplan` (and the `gpuplan` command, whose
modules live in this package) does not load the API, the catalogs and the pydantic schema until needed."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuplan.api import estimate
    from gpuplan.catalog.loader import load_project
    from gpuplan.errors import (CatalogError, GpuplanError, HubUnavailableError, InfeasibleError, InputError,
                                UnknownNameError)
    from gpuplan.schema.project import Project
    from gpuplan.schema.result import EstimateResult

_SOURCES = {
    "CatalogError": "gpuplan.errors",
    "EstimateResult": "gpuplan.schema.result",
    "GpuplanError": "gpuplan.errors",
    "HubUnavailableError": "gpuplan.errors",
    "InfeasibleError": "gpuplan.errors",
    "InputError": "gpuplan.errors",
    "Project": "gpuplan.schema.project",
    "UnknownNameError": "gpuplan.errors",
    "estimate": "gpuplan.api",
    "load_project": "gpuplan.catalog.loader",
}

__all__ = [
    "CatalogError",
    "EstimateResult",
    "GpuplanError",
    "HubUnavailableError",
    "InfeasibleError",
    "InputError",
    "Project",
    "UnknownNameError",
    "estimate",
    "load_project",
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
