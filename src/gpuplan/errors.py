"""gpuplan's errors. Every error the user can cause is one of these, and the CLI turns it into one line.

    GpuplanError                  root; .code names the heading in docs/errors.md
    ├── InputError                the user's project or arguments: .loc (field path), .allowed
    │   └── UnknownNameError      a name that is not in a catalog: .suggestions ("did you mean")
    ├── CatalogError              a data file: .path, .row, .field
    ├── HubUnavailableError       a Hugging Face model that is neither reachable nor cached: .cache_path
    ├── InfeasibleError           nothing satisfies the project: the binding constraint and the gap
    └── InternalError             a bug: an unexpected exception below the CLI (exit code 3), one line, no traceback

A value the user gave is echoed back in a message through `clip` (at most ECHO_CHARS characters of it).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Literal

ErrorCode = Literal[
    "input-invalid",
    "unknown-name",
    "catalog-invalid",
    "hub-unavailable",
    "infeasible",
    "unsupported-model",
    "internal",
]

#: the most characters of a user's value an error message echoes back
ECHO_CHARS = 200


def clip(value: object, limit: int = ECHO_CHARS) -> str:
    """repr(value), cut to about `limit` characters ("... (12,345 characters)" says how long it was)."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * limit:
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class GpuplanError(Exception):
    """Root of gpuplan's errors."""

    code: ErrorCode = "input-invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _join_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            part = str(part)
            out += ("." if out else "") + (part if len(part) <= ECHO_CHARS else part[:ECHO_CHARS] + "...")
    return out


class InputError(GpuplanError):
    """Something in the user's project or command line is wrong: where, what, what is allowed."""

    code: ErrorCode = "input-invalid"

    def __init__(
        self,
        loc: Sequence[str | int],
        message: str,
        allowed: str | None = None,
        *,
        source: str | None = None,
    ) -> None:
        self.loc = tuple(loc)
        self.detail = message  # the message without the field path, for a form that shows it next to the field
        self.allowed = allowed
        self.source = source
        where = _join_loc(self.loc)
        text = f"{where}: {message}" if where else message
        if source:
            text = f"{source}: {text}"
        if allowed:
            text += f" (allowed: {allowed})"
        super().__init__(text)


class UnknownNameError(InputError):
    """A name that is not in the catalog; carries close matches."""

    code: ErrorCode = "unknown-name"

    def __init__(
        self,
        loc: Sequence[str | int],
        kind: str,
        name: str,
        known: Iterable[str],
        *,
        source: str | None = None,
    ) -> None:
        known_list = sorted(set(known))
        self.name = name
        self.suggestions = suggest(name, known_list)
        message = f"unknown {kind} {clip(name)}"
        if self.suggestions:
            message += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        allowed = None
        if len(known_list) <= 12:
            allowed = ", ".join(known_list)
        else:
            message += f" (`gpuplan catalog {kind}s` lists all {len(known_list)})"
        super().__init__(loc, message, allowed, source=source)


class UnsupportedModelError(InputError):
    """A model architecture gpuplan cannot describe exactly."""

    code: ErrorCode = "unsupported-model"


class CatalogError(GpuplanError):
    """A bad row or file in a data catalog: names the file, the row and the field."""

    code: ErrorCode = "catalog-invalid"

    def __init__(self, path: str, message: str, row: str | int | None = None, field: str | None = None):
        if isinstance(row, str) and len(row) > ECHO_CHARS:
            row = row[:ECHO_CHARS] + "..."
        if field and len(field) > ECHO_CHARS:
            field = field[:ECHO_CHARS] + "..."
        self.path, self.row, self.field = path, row, field
        where = path
        if row is not None:
            where += f", row {row}"
        if field:
            where += f", field {field}"
        super().__init__(f"{where}: {message}")


class HubUnavailableError(GpuplanError):
    """A Hub model that could not be fetched and is not in the local cache."""

    code: ErrorCode = "hub-unavailable"

    def __init__(self, hf_id: str, cache_path: str, reason: str):
        self.hf_id, self.cache_path = hf_id, cache_path
        super().__init__(
            f"model.hf_id: {hf_id!r} is not available: {reason}; looked in the cache at "
            f"{cache_path}. To fix: download its config.json and use model.hf_config: PATH, "
            "or use a built-in model.preset (`gpuplan catalog models`)."
        )


class InfeasibleError(GpuplanError):
    """Nothing satisfies the project; says which constraint binds and by how much."""

    code: ErrorCode = "infeasible"


class InternalError(GpuplanError):
    """An unexpected exception: a bug in gpuplan, not in the input. One line; `--debug` shows the traceback."""

    code: ErrorCode = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error: {message} (a bug in gpuplan, please report it; "
                         "`gpuplan --debug ...` shows the traceback)")

    @classmethod
    def wrap(cls, exc: BaseException) -> InternalError:
        """The one-line error for an exception that escaped: its type and the start of its message."""
        text = " ".join(str(exc).split())
        if len(text) > ECHO_CHARS:
            text = text[:ECHO_CHARS] + "..."
        return cls(f"{type(exc).__name__}" + (f": {text}" if text else ""))


def suggest(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Close matches for a mistyped name (case-insensitive); none for a name too long to be a typo."""
    if not isinstance(name, str) or len(name) > 2 * ECHO_CHARS:
        return []
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(k.lower(), k)
    hits = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)
    if not hits:
        hits = [k for k in by_lower if name.lower() in k][:n]
    return [by_lower[h] for h in hits]
