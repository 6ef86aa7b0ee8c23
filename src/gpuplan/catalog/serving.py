"""Loads data/serving.toml (the serving engine's defaults, the tensor-parallel all-reduce costs, the use-case
templates) into ServingData, validating every row; errors name the file, row and field."""

from __future__ import annotations

from functools import lru_cache

from gpuplan.catalog.loader import _data_text, param_rows, read_toml, table_rows
from gpuplan.core.sizing.engines import serving_for
from gpuplan.errors import CatalogError
from gpuplan.schema.project import Workload
from gpuplan.schema.serving import AllReduceCost, EngineDefaults, EngineRow, ServingData, UseCaseTemplate

PATH = "gpuplan/data/serving.toml"


def parse_serving(text: str, path: str = PATH) -> ServingData:
    data = read_toml(text, path)
    engine, sources = param_rows(data, path, EngineDefaults)
    links = table_rows(data, path, "allreduce", AllReduceCost)
    cases = table_rows(data, path, "use_case", UseCaseTemplate)
    engines = table_rows(data, path, "engine", EngineRow)
    for need in ("nvlink", "pcie"):
        if need not in links:
            raise CatalogError(path, f"no [[allreduce]] row for {need}", row=need)
    return ServingData(engine=engine, allreduce=links, use_cases=cases, sources=sources, engines=engines)


@lru_cache(maxsize=1)
def load_serving() -> ServingData:
    """The built-in serving facts (data/serving.toml), loaded once."""
    return parse_serving(_data_text("serving.toml"))


def load_serving_for(w: Workload) -> ServingData:
    """The built-in serving facts with the workload's engine in place of vLLM's (core/sizing/engines.serving_for)."""
    return serving_for(load_serving(), w)


__all__ = ["load_serving", "load_serving_for", "parse_serving"]
