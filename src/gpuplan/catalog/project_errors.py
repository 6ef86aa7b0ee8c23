"""A pydantic validation error of a project (or a server file) as an InputError a user can act on: the field path,
what is wrong, what is allowed, and a "did you mean" that also knows the names other tools give a key (a prompt's
`input_tokens` is `workload.context_length` here) and the keys that live in another section (`data.tokens` is
`workload.tokens`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from gpuplan.errors import InputError, clip, suggest
from gpuplan.schema.project import Project

#: names other tools and papers use for a key, by section: (the key here, what it means here)
SYNONYMS: dict[str, dict[str, tuple[str, str]]] = {
    "workload": {
        "input_tokens": ("context_length", "a request's mean prompt length"),
        "prompt_tokens": ("context_length", "a request's mean prompt length"),
        "prompt_length": ("context_length", "a request's mean prompt length"),
        "input_length": ("context_length", "a request's mean prompt length"),
        "input_len": ("context_length", "a request's mean prompt length"),
        "max_model_len": ("context_length", "the tokens held in the KV cache per sequence"),
        "max_tokens": ("output_tokens", "a request's mean output tokens"),
        "output_length": ("output_tokens", "a request's mean output tokens"),
        "output_len": ("output_tokens", "a request's mean output tokens"),
        "max_new_tokens": ("output_tokens", "a request's mean output tokens"),
        "qps": ("arrival_rate", "requests per second"),
        "rps": ("arrival_rate", "requests per second"),
        "request_rate": ("arrival_rate", "requests per second"),
        "concurrency": ("users", "a closed population of users (with think_time_s), or batch_size for a fixed batch"),
        "seq_len": ("sequence_length", "training tokens per sample"),
        "max_seq_length": ("sequence_length", "training tokens per sample"),
        "max_length": ("sequence_length", "training tokens per sample"),
        "batch_size_per_device": ("micro_batch_size", "samples per GPU per step"),
        "per_device_train_batch_size": ("micro_batch_size", "samples per GPU per step"),
        "num_train_epochs": ("epochs", "passes over the data"),
        "dtype": ("precision", "the training precision (inference: weights_dtype)"),
    },
}


def _field_names(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _sub_model(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The pydantic model at a field path, to list the keys allowed there."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return current if isinstance(current, type) else None


def elsewhere(root: type[BaseModel], name: str, section: Sequence[str | int]) -> list[str]:
    """The dotted paths of the root's top-level sections (other than `section`) that have a key `name`."""
    out = []
    for key in root.model_fields:
        sub = _sub_model(root, [key])
        if sub is not None and [key] != list(section) and name in sub.model_fields:
            out.append(f"{key}.{name}")
    return out


def _unknown_key(root: type[BaseModel], loc: list[str | int], source: str) -> InputError:
    parent = _sub_model(root, loc[:-1])
    known = _field_names(parent) if parent else []
    name = str(loc[-1])
    section = [str(p) for p in loc[:-1] if isinstance(p, str)]
    synonym = SYNONYMS.get(section[-1] if section else "", {}).get(name.lower()) if root is Project else None
    hint = suggest(name, known)
    msg = f"unknown key {clip(name)}"
    if synonym is not None and synonym[0] in known:
        hint = [synonym[0], *(h for h in hint if h != synonym[0])]
        msg += f"; {synonym[1]} is {'.'.join([*section, synonym[0]])!r} here"
    else:
        other = elsewhere(root, name, section) if len(section) == 1 else []
        if other:
            msg += f"; {' and '.join(map(repr, other))} {'is' if len(other) == 1 else 'are'} where it goes"
        elif hint:
            msg += f"; did you mean {' or '.join(map(repr, hint))}?"
    error = InputError(loc, msg, ", ".join(known) or None, source=source)
    error.suggestions = hint  # type: ignore[attr-defined]
    return error


def translate_validation_error(exc: ValidationError, source: str, root: type[BaseModel] = Project) -> InputError:
    """The first pydantic error as an InputError: field path, what is wrong, what is allowed, did you mean."""
    err = exc.errors()[0]
    kind = err["type"]
    raw = list(err["loc"])
    last = raw[-1:] if kind == "extra_forbidden" else []  # the unknown key itself, whatever its spelling
    loc = [p for p in raw[:len(raw) - len(last)]
           if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))] + last
    if kind == "extra_forbidden":
        return _unknown_key(root, loc, source)
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        allowed = [a.strip().strip("'") for a in expected.replace(" or ", ", ").split(",") if a.strip()]
        hint = suggest(str(err.get("input")), allowed)
        msg = f"{clip(err.get('input'))} is not allowed" + (
            f"; did you mean {' or '.join(map(repr, hint))}?" if hint else "")
        return InputError(loc, msg, ", ".join(allowed), source=source)
    if kind == "missing":
        return InputError(loc, "is required", source=source)
    msg = err["msg"].removeprefix("Value error, ")
    if "input" in err and not isinstance(err["input"], (dict, list)):
        msg += f" (got {clip(err['input'])})"
    return InputError(loc, msg, source=source)


__all__ = ["SYNONYMS", "elsewhere", "translate_validation_error"]
