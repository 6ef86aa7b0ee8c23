"""Docs stay true: every error code has a heading in docs/errors.md; every Project key is in docs/project.md."""

from __future__ import annotations

import typing
from pathlib import Path

from gpuplan.errors import ErrorCode
from gpuplan.schema.project import Project

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_error_codes_are_documented() -> None:
    headings = {line[3:].strip() for line in (DOCS / "errors.md").read_text().splitlines() if line.startswith("## ")}
    assert headings == set(typing.get_args(ErrorCode))


def test_project_keys_are_documented() -> None:
    text = (DOCS / "project.md").read_text()
    for key in Project.model_fields:
        assert f"`{key}" in text, key
    for key in Project.model_fields["workload"].annotation.model_fields:  # type: ignore[union-attr]
        assert f"workload.{key}" in text, key
