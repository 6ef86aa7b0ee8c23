"""A Hypothesis strategy for documents valid under a JSON schema, for the subset pydantic writes (object with
properties and additionalProperties, $ref, anyOf, enum, type, minimum / maximum and their exclusive forms, items,
pattern). Written by hand: hypothesis-jsonschema 0.23 does not run on the Hypothesis this project tests with.

Optional properties are left out half the time; numbers without a maximum are drawn on a log scale up to 1e6 with
the odd huge one, so that most documents are projects a person could write and some are extreme."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

Schema = dict[str, Any]


def from_schema(schema: Schema) -> st.SearchStrategy[Any]:
    return _strategy(schema, schema.get("$defs", {}))


def _strategy(s: Schema, defs: dict[str, Schema]) -> st.SearchStrategy[Any]:
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: _strategy(defs[name], defs))
    if "anyOf" in s:
        return st.one_of([_strategy(x, defs) for x in s["anyOf"]])
    if "enum" in s:
        return st.sampled_from(s["enum"])
    if "const" in s:
        return st.just(s["const"])
    kind = s.get("type")
    if kind == "object":
        return _object(s, defs)
    if kind == "array":
        return st.lists(_strategy(s.get("items", {}), defs), max_size=4)
    if kind == "integer":
        return _number(s, integer=True)
    if kind == "number":
        return _number(s, integer=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "string":
        if "pattern" in s:
            return st.from_regex(s["pattern"], fullmatch=True).filter(lambda x: len(x) < 60)
        return st.text(max_size=30)
    return st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.text(max_size=8))


def _object(s: Schema, defs: dict[str, Schema]) -> st.SearchStrategy[dict[str, Any]]:
    props = s.get("properties")
    if not props:
        return st.dictionaries(st.text(max_size=10), st.one_of(st.integers(), st.text(max_size=10)), max_size=4)
    required = set(s.get("required", []))
    req = {k: _strategy(v, defs) for k, v in props.items() if k in required}
    opt = {k: _strategy(v, defs) for k, v in props.items() if k not in required}
    return st.fixed_dictionaries(req, optional=opt)


def _number(s: Schema, *, integer: bool) -> st.SearchStrategy[Any]:
    lo = s.get("minimum", s.get("exclusiveMinimum"))
    hi = s.get("maximum", s.get("exclusiveMaximum"))
    lo_open, hi_open = "exclusiveMinimum" in s, "exclusiveMaximum" in s
    top = hi if hi is not None else 1e6
    bottom = lo if lo is not None else -1e6
    if integer:
        a = int(bottom) + (1 if lo_open and bottom == int(bottom) else 0)
        b = int(top) - (1 if hi_open and top == int(top) else 0)
        small = st.integers(max(a, min(b, 0)), max(a, min(b, 64)))
        return st.one_of(small, st.integers(a, b)) if a <= b else st.just(a)
    floats = st.floats(bottom, top, exclude_min=lo_open, exclude_max=hi_open, allow_nan=False)
    if hi is None:
        floats = st.one_of(floats, st.floats(bottom, 1e12, exclude_min=lo_open), st.just(1e300))
    return floats
