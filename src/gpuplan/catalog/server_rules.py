"""The server builder's rules (data/server_rules.toml) -> `ServerRules`, one typed field per rule id.

Every rule row has `id`, `value`, `source` and `as_of`; `ServerRules.sources` keeps each rule's source so a
report can cite it. A bad file is a `CatalogError` naming the file, the rule id and, for a table, the key.
"""

from __future__ import annotations

import datetime
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import ValidationError

from gpuplan.errors import CatalogError, suggest
from gpuplan.schema.rules import ServerRules

PATH = "gpuplan/data/server_rules.toml"
RULE_IDS: tuple[str, ...] = tuple(f for f in ServerRules.model_fields if f not in ("sources", "as_of"))


def parse_server_rules(text: str, path: str = PATH) -> ServerRules:
    """Rules from the text of a server_rules.toml; CatalogError naming the file, rule and key otherwise."""
    from gpuplan.catalog.loader import read_toml

    data = read_toml(text, path)
    rows = data.get("rule", [])
    if not isinstance(rows, list):
        raise CatalogError(path, "rule must be a list of rows ([[rule]] in TOML)", field="rule")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    dates: dict[str, datetime.date] = {}
    for i, row in enumerate(rows):
        rid = row.get("id", i + 1) if isinstance(row, dict) else i + 1
        if not isinstance(row, dict):
            raise CatalogError(path, "a rule must be a table of fields", row=rid)
        for key in ("id", "value", "source", "as_of"):
            if key not in row:
                raise CatalogError(path, f"missing {key}", row=rid, field=key)
        unknown = sorted(set(row) - {"id", "value", "source", "as_of", "notes"})
        if unknown:
            raise CatalogError(path, "unknown field (allowed: id, value, source, as_of, notes)", row=rid,
                               field=unknown[0])
        if rid not in RULE_IDS:
            hint = suggest(str(rid), RULE_IDS)
            raise CatalogError(path, "unknown rule id" + (f"; did you mean {hint[0]!r}?" if hint else ""), row=rid,
                               field="id")
        if rid in values:
            raise CatalogError(path, f"rule {rid!r} appears twice", row=rid, field="id")
        if not isinstance(row["source"], str) or not row["source"].strip():
            raise CatalogError(path, "source must be a non-empty string", row=rid, field="source")
        if not isinstance(row["as_of"], datetime.date) or isinstance(row["as_of"], datetime.datetime):
            raise CatalogError(path, "as_of must be a date (YYYY-MM-DD)", row=rid, field="as_of")
        values[rid] = row["value"]
        sources[rid] = row["source"]
        dates[rid] = row["as_of"]
    try:
        return ServerRules(**values, sources=sources, as_of=dates)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            raise CatalogError(path, f"no rule {loc[0]!r}", row=loc[0]) from None
        raise CatalogError(path, msg, row=loc[0], field=".".join(["value", *loc[1:]])) from None


@lru_cache(maxsize=1)
def load_server_rules() -> ServerRules:
    """The built-in server rules (data/server_rules.toml)."""
    text = resources.files("gpuplan.data").joinpath("server_rules.toml").read_text(encoding="utf-8")
    return parse_server_rules(text, PATH)


__all__ = ["ServerRules", "load_server_rules", "parse_server_rules"]
