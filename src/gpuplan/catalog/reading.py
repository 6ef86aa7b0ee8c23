"""Bytes -> plain data, safely: the one place gpuplan reads a user's YAML, JSON or TOML file (a project, a
`--catalog` or `--prices` file, a config.json). Whatever the bytes, it returns data or raises `Unreadable` (which
the loaders turn into gpuplan's InputError or CatalogError, naming the file): never a RecursionError, a
UnicodeDecodeError or the 4300-digit integer ValueError.

Refused: files larger than the limit, text that is not UTF-8, nesting deeper than MAX_DEPTH, more than
MAX_VALUES values (YAML aliases can multiply them), a key given twice in one mapping, NaN and infinity, integers
beyond MAX_INT. Each refusal names the field path where it has one."""

from __future__ import annotations

import json
import math
import tomllib

try:  # the fast parser for the built-in data files (a dependency; tomllib when it cannot be had)
    import rtoml
except ImportError:  # pragma: no cover
    rtoml = None  # type: ignore[assignment]
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gpuplan.errors import clip

#: the largest file read (a project, a catalog or price file, a config.json), bytes
MAX_FILE_BYTES = 5_000_000
#: nesting levels of mappings and lists
MAX_DEPTH = 64
#: values in one file, counting each use of a YAML alias
MAX_VALUES = 200_000
#: the largest integer magnitude anywhere in a file (a field's own bound is usually far smaller)
MAX_INT = 10**18
#: rows in one `--catalog` or `--prices` file (the built-in GPU catalog has a few dozen)
MAX_ROWS = 2000


class Unreadable(Exception):
    """Why a file cannot be read: a message and, when the problem is in one value, its field path."""

    def __init__(self, message: str, loc: Sequence[str | int] = (), reason: str | None = None) -> None:
        super().__init__(message)
        self.message, self.loc = message, tuple(loc)
        #: why the file could not be opened or read, in the OS's words (None: it was read, its content is wrong)
        self.reason = reason


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The file's text: UTF-8 (a byte-order mark is dropped), at most `limit` bytes."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError as exc:
        raise Unreadable(f"no such file: {path}", reason=f"cannot read: {exc.strerror}") from None
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror or exc}", reason=f"cannot read: {exc.strerror or exc}") \
            from None
    if len(data) > limit:
        raise Unreadable(f"the file is larger than {limit / 1e6:g} MB, the most gpuplan reads")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise Unreadable(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (save the file as UTF-8)") \
            from None


class _NoDuplicateKeys(yaml.constructor.SafeConstructor):
    """A YAML loader's constructor that refuses a key given twice in one mapping (SafeLoader keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeLoader says so
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"the key {clip(key)} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


class _Loader(_NoDuplicateKeys, yaml.SafeLoader):
    """yaml.SafeLoader, refusing duplicate keys: what names a YAML error (its messages are PyYAML's own)."""


#: the same constructor over libyaml's parser, when PyYAML has it (its wheels do): several times faster
_FastLoader: type | None = (type("_FastLoader", (_NoDuplicateKeys, yaml.CSafeLoader), {})
                            if getattr(yaml, "__with_libyaml__", False) else None)


def _yaml(text: str) -> Any:
    """YAML text -> data: a text that reads as JSON (YAML's subset) with Python's JSON parser, some forty times
    faster than PyYAML's constructor on a large catalog; else with libyaml when it is there; a text it refuses is
    read again by the pure-Python parser, so that the error (or the data) is that parser's."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text, object_pairs_hook=_duplicate_json_keys)
        except ValueError:  # not JSON after all (a flow mapping of YAML, a duplicate key): YAML says why
            pass
    if _FastLoader is not None:
        try:
            return yaml.load(text, Loader=_FastLoader)  # a yaml.CSafeLoader
        except yaml.YAMLError:
            pass
    return yaml.load(text, Loader=_Loader)  # _Loader is a yaml.SafeLoader


def _duplicate_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise Unreadable(f"the key {clip(k)} is given twice")
        out[k] = v
    return out


def builtin_toml(text: str) -> Any:
    """The text of one of gpuplan's own data files (src/gpuplan/data/*.toml) -> data: with rtoml, a Rust TOML
    parser about 8x faster than tomllib (the same data on every built-in file: tests/data), else tomllib. Files
    the user writes always go through `parse`, whose errors are tomllib's."""
    if rtoml is not None:
        try:
            return rtoml.loads(text)
        except Exception:  # noqa: BLE001 - let tomllib read it and name the error
            pass
    return tomllib.loads(text)


def kind_of(path: str) -> str:
    """The format of a data file the user gives, by its name: "yaml" (.yaml, .yml), "json" (.json), else "toml"."""
    name = path.lower()
    return "yaml" if name.endswith((".yaml", ".yml")) else "json" if name.endswith(".json") else "toml"


def parse(text: str, kind: str, *, check: bool = True) -> Any:
    """YAML, JSON or TOML text -> data, checked by `check_values` (unless `check` is False: the caller checks,
    to name a row). `kind`: "yaml", "json" or "toml". TOML is read as gpuplan's own files are (`builtin_toml`:
    rtoml, and tomllib to name an error)."""
    try:
        if kind == "json":
            data = json.loads(text, object_pairs_hook=_duplicate_json_keys)
        elif kind == "toml":
            data = builtin_toml(text)
        else:
            data = _yaml(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"not valid TOML: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or exc
        raise Unreadable(f"not valid YAML{where}: {str(problem)[:200]}") from None
    except RecursionError:
        raise Unreadable(f"nested too deeply (gpuplan reads at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # Python's limit on integer digits, or a bad date
        if "digits" in str(exc):
            raise Unreadable(f"a number has more digits than any value gpuplan reads (at most {MAX_INT:.0e})") \
                from None
        raise Unreadable(f"not valid {kind.upper()}: {clip(str(exc))}") from None
    if check:
        check_values(data)
    return data


def check_values(data: Any, loc: Sequence[str | int] = ()) -> None:
    """Refuse nesting beyond MAX_DEPTH, more than MAX_VALUES values, NaN, infinity and integers beyond MAX_INT,
    naming the field path (for data that did not come through `parse`, such as a web request's JSON)."""
    count = [0]

    def walk(value: Any, path: tuple[str | int, ...]) -> None:
        count[0] += 1
        if count[0] > MAX_VALUES:
            raise Unreadable(f"more than {MAX_VALUES:,} values (YAML aliases count each time they are used)")
        if isinstance(value, dict):
            if len(path) >= MAX_DEPTH:
                raise Unreadable(f"nested more than {MAX_DEPTH} levels deep", path)
            for k, v in value.items():
                walk(v, (*path, k if isinstance(k, (str, int)) else str(k)))
        elif isinstance(value, (list, tuple)):
            if len(path) >= MAX_DEPTH:
                raise Unreadable(f"nested more than {MAX_DEPTH} levels deep", path)
            for i, v in enumerate(value):
                walk(v, (*path, i))
        elif isinstance(value, float) and not math.isfinite(value):
            raise Unreadable(f"must be a finite number, not {value}", path)
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise Unreadable(f"{clip(value)} is out of range (numbers are at most {MAX_INT:.0e})", path)

    try:
        walk(data, tuple(loc))
    except RecursionError:  # a structure built in Python, deeper than any file could be
        raise Unreadable(f"nested more than {MAX_DEPTH} levels deep", loc) from None


def row_error_at(data: Any, loc: Sequence[str | int]) -> tuple[str | int | None, str | None]:
    """(row, field) of a table file's value at `loc` (table, index, field...): the row's id when it has one."""
    if len(loc) < 2 or not isinstance(loc[1], int):
        return None, ".".join(map(str, loc)) or None
    table, index = loc[0], loc[1]
    row = data.get(table, [])[index] if isinstance(data, dict) else None
    ident = row.get("id") if isinstance(row, dict) and isinstance(row.get("id"), str) else None
    return ident or index + 1, ".".join(map(str, loc[2:])) or None


def check_rows(data: Any, tables: Sequence[str]) -> None:
    """At most MAX_ROWS rows in the file's tables."""
    if isinstance(data, dict):
        n = sum(len(v) for k, v in data.items() if k in tables and isinstance(v, list))
        if n > MAX_ROWS:
            raise Unreadable(f"{n:,} rows: a catalog or price file has at most {MAX_ROWS:,} (split it into several "
                             "files, each given with its own option)")


def load(path: Path, kind: str | None = None, limit: int = MAX_FILE_BYTES) -> Any:
    """A file's data: read_text, then parse as `kind` (from the suffix when None: .json, .toml, else YAML)."""
    if kind is None:
        suffix = path.suffix.lower()
        kind = "json" if suffix == ".json" else "toml" if suffix == ".toml" else "yaml"
    return parse(read_text(path, limit), kind)


__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_INT", "MAX_ROWS", "MAX_VALUES", "Unreadable", "check_values", "kind_of",
           "load", "parse", "read_text"]
