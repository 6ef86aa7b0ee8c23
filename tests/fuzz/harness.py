"""The fuzz property, as a function: a generated file, run through the code path the CLI uses (load the project,
estimate, plan, render JSON), ends in gpuplan's own error or in a result whose JSON has only finite numbers, and
non-negative ones where a quantity cannot be negative. `classify` says which, and how it broke when it did."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuplan import api
from gpuplan.errors import GpuplanError

#: result keys whose numbers may be negative (a shortfall, a difference)
NEGATIVE_OK = ("headroom", "margin", "gap", "delta", "saving", "difference", "change", "slack", "vs_")
#: the longest run of one user-given character an error message may echo back (inputs are cut at ~200)
MAX_ECHO = 201


class PropertyBroken(AssertionError):
    """A result that breaks the property: a non-finite or negative number, or an over-long error message."""


def check_numbers(data: Any, path: str = "") -> None:
    """Every number in `data` (a parsed JSON result) finite; non-negative unless its key allows it."""
    if isinstance(data, dict):
        for k, v in data.items():
            check_numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            check_numbers(v, f"{path}[{i}]")
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        if not math.isfinite(data):
            raise PropertyBroken(f"non-finite number at {path}: {data}")
        key = path.rsplit(".", 1)[-1]
        if data < 0 and not any(w in key for w in NEGATIVE_OK):
            raise PropertyBroken(f"negative number at {path}: {data}")


def _reject_constant(name: str) -> None:
    raise PropertyBroken(f"{name} in the JSON output")


def check_result(result: Any) -> None:
    """The result as the CLI prints it (`--format json`): strict JSON, finite and non-negative numbers."""
    from gpuplan.report.plan import render_json

    text = render_json(result)
    check_numbers(json.loads(text, parse_constant=_reject_constant))


def check_error(exc: GpuplanError) -> str:
    if exc.code == "internal":
        raise PropertyBroken(f"internal error: {exc}")
    text = str(exc)
    if "x" * MAX_ECHO in text or len(text) > 4000:
        raise PropertyBroken(f"error message echoes too much ({len(text)} characters)")
    return f"error:{exc.code}"


def run_files(project: Path, catalog_files: Sequence[Path] = (), price_files: Sequence[Path] = ()) -> str:
    """Estimate and plan a project file as `gpuplan estimate/plan --format json` do: "ok" or "error:<code>".
    Raises PropertyBroken, or whatever escaped gpuplan's error layer."""
    try:
        check_result(api.estimate(project, catalog_files=catalog_files))
    except GpuplanError as exc:
        return check_error(exc)
    try:
        check_result(api.plan(project, catalog_files=catalog_files, price_files=price_files))
    except GpuplanError as exc:
        return check_error(exc)
    return "ok"


def classify(project: bytes | Path, suffix: str = ".yaml", *, catalog: tuple[bytes, str] | None = None,
             prices: tuple[bytes, str] | None = None) -> tuple[str, str]:
    """("ok" | "error:<code>" | "broken" | "uncaught", detail) for generated files (written to a temporary
    folder first)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if isinstance(project, bytes):
            path = folder / f"project{suffix}"
            path.write_bytes(project)
        else:
            path = project
        cats, prs = [], []
        if catalog is not None:
            cats.append(folder / f"catalog{catalog[1]}")
            cats[0].write_bytes(catalog[0])
        if prices is not None:
            prs.append(folder / f"prices{prices[1]}")
            prs[0].write_bytes(prices[0])
        try:
            return run_files(path, cats, prs), ""
        except PropertyBroken as exc:
            return "broken", str(exc)[:300]
        except Exception as exc:  # noqa: BLE001 - what the fuzz run counts
            import traceback

            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            return "uncaught", f"{type(exc).__name__} at {where}: {str(exc)[:200]}"


def _example() -> Path:
    from gpuplan.catalog.loader import example_path

    return example_path("llama3-8b-qlora")


#: the project the catalog and price fuzzing plans (a quick one that rents and buys GPUs)
EXAMPLE = _example()
