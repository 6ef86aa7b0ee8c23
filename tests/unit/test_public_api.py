"""The Python API: one sorted public surface; estimate() takes a dict, a Project or a file path alike."""

from __future__ import annotations

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
