"""JSON output, strict: every `--format json` / `--json` of the CLI is written here. A NaN or an infinity is not
JSON (Python would print `Infinity`); one in a result is a bug, reported as gpuplan's `internal` error naming
where it is, never printed."""

from __future__ import annotations

import json
import math
from typing import Any

from gpuplan.errors import InternalError


def _first_non_finite(data: Any, path: str = "") -> str | None:
    if isinstance(data, float) and not math.isfinite(data):
        return f"{path or 'the result'} is {data}"
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, (list, tuple)):
        items = enumerate(data)
    else:
        return None
    for k, v in items:
        hit = _first_non_finite(v, f"{path}[{k}]" if isinstance(k, int) else f"{path}.{k}" if path else str(k))
        if hit:
            return hit
    return None


def dumps(data: Any, **kwargs: Any) -> str:
    """json.dumps(data, allow_nan=False); a non-finite number raises InternalError naming its path."""
    try:
        return json.dumps(data, allow_nan=False, **kwargs)
    except ValueError:
        where = _first_non_finite(data)
        if where is None:
            raise
        raise InternalError(f"a number of the result is not finite ({where}); gpuplan prints no Infinity or "
                            "NaN") from None


__all__ = ["dumps"]
