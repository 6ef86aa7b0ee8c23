"""gpuplan: which GPU server to get for an AI project, and why. Public API."""

from gpuplan.api import estimate
from gpuplan.catalog.loader import load_project
from gpuplan.errors import (CatalogError, GpuplanError, HubUnavailableError, InfeasibleError, InputError,
                            UnknownNameError)
from gpuplan.schema.project import Project
from gpuplan.schema.result import EstimateResult

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
