"""The Python API: one sorted public surface; estimate() takes a dict, a Project or a file path alike."""

from __future__ import annotations

import re
from pathlib import Path

import gpuplan
from gpuplan.catalog.loader import example_path


def test_all_is_sorted_and_importable() -> None:
    assert gpuplan.__all__ == sorted(gpuplan.__all__)
    for name in gpuplan.__all__:
        assert getattr(gpuplan, name) is not None


def test_estimate_same_from_dict_project_and_file(tmp_path: Path) -> None:
    path = example_path("llama3-8b-qlora")
    project, _ = gpuplan.load_project(path)
    a = gpuplan.estimate(path)
    b = gpuplan.estimate(project)
    c = gpuplan.estimate(project.model_dump(exclude_none=True))
    assert a.model_dump() == b.model_dump() == c.model_dump()


PUBLIC = {"Catalog", "CatalogError", "EstimateResult", "FitResult", "GpuplanError", "HubUnavailableError",
          "InfeasibleError", "InputError", "PlanResult", "Project", "UnknownNameError", "builtin_catalog",
          "check_machine", "estimate", "fit", "load_bundle", "load_catalog", "load_project", "plan", "plan_date",
          "probe_machine", "read_server_file"}


def test_the_public_surface_is_exactly_the_documented_one() -> None:
    # issue #26: the main verbs and their types are gpuplan's own names; the README's Python API section lists them
    assert set(gpuplan.__all__) == PUBLIC
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(?:gpuplan\.)?(\w+)", section))
    assert PUBLIC - {"CatalogError", "HubUnavailableError", "InputError", "UnknownNameError"} <= named, \
        PUBLIC - named


def test_plan_fit_and_the_catalog_from_the_package() -> None:
    import datetime

    when = datetime.date(2026, 12, 1)
    result = gpuplan.plan(example_path("llama3-8b-qlora"), top=3, as_of=when)
    assert isinstance(result, gpuplan.PlanResult) and result.as_of == when and len(result.candidates) == 3
    limits = gpuplan.fit(example_path("llama3-8b-qlora"), gpu="l40s-48gb")
    assert isinstance(limits, gpuplan.FitResult) and limits.gpu_id == "l40s-48gb"
    catalog = gpuplan.load_catalog()
    assert isinstance(catalog, gpuplan.Catalog) and "h100-sxm-80gb" in catalog.gpus.rows
    assert gpuplan.plan_date(when) == when
