"""The lines gpuplan's core writes (reasons, checklist lines, FAQ answers, assumptions, notes, rejected GPUs'
reasons), in the report's language. The core stays language-free: it writes English, already formatted; a report in
another language passes each such line through that language's translation memory (data/i18n_fr.toml), the way
gettext keys a translation on the English source text. Ours are pre-formatted, so the key is a template:

    [[line]]
    en = "{mem:n} GiB per GPU of {vram:n} ({usable:n} usable)"
    fr = "{mem} Gio par GPU sur {vram} ({usable} utilisables)"

A `{name}` field matches any text and is copied as it is (a GPU id, a provider, a source citation); `{name:n}`
matches a number as the core writes it ("1,234.5", "12%", "$1,234", "1,234 EUR") and is written in the language's
notation (report/numbers.py); `{name:i}` matches an id ("h100-sxm-80gb") and is copied; `{name:t}` matches any
text and is itself translated (a reason inside a reason); `{name:s}` a list of phrases separated by "; ", each
translated. The
`[[line]]` rows are tried in order against the whole line, the first that matches wins; then the `[[fragment]]`
rows translate the recurring sub-phrases left ("(rule psu_headroom)") anywhere in it. A line no row matches stays
English, and tests/unit/test_french.py names it (`english_words`, below, is its detector)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from gpuplan.errors import CatalogError
from gpuplan.report.numbers import FR_CURRENCY, NBSP, NNBSP

#: the data file of each language's translation memory
FILES = {"fr": "i18n_fr.toml"}
_FIELD = re.compile(r"\{(\w+)(?::(\w))?\}")
#: a number as the core writes it: "$1,234.5", "12%", "1,234 EUR"
_NUMBER = r"\$?-?\d{1,3}(?:,\d{3})*(?:\.\d+)?(?:%| (?:EUR|USD|GBP))?|\$?-?\d+(?:\.\d+)?(?:%| (?:EUR|USD|GBP))?"
#: what each kind of field matches: a number, an id ("h100-sxm-80gb"), else any text
_KINDS = {"n": _NUMBER, "i": r"[a-z0-9][a-z0-9._-]*"}
_NUMBER_PARTS = re.compile(r"(\$?)(-?)(\d[\d,]*)(\.\d+)?(%| EUR| USD| GBP)?")


@dataclass(frozen=True)
class Row:
    en: str
    fr: str
    regex: re.Pattern[str]
    kinds: dict[str, str]


def _compile(en: str, whole: bool) -> tuple[re.Pattern[str], dict[str, str]]:
    parts, kinds, pos = [], {}, 0
    for m in _FIELD.finditer(en):
        parts.append(re.escape(en[pos:m.start()]))
        name, kind = m.group(1), m.group(2) or ""
        if name in kinds:
            parts.append(f"(?P={name})")
        else:
            kinds[name] = kind
            parts.append(f"(?P<{name}>{_KINDS.get(kind, '.*?')})")
        pos = m.end()
    parts.append(re.escape(en[pos:]))
    body = "".join(parts)
    return re.compile(f"^{body}$" if whole else body), kinds


def _rows(data: dict[str, Any], key: str, whole: bool, where: str) -> list[Row]:
    out = []
    for i, row in enumerate(data.get(key, [])):
        en, fr = row.get("en"), row.get("fr")
        if not isinstance(en, str) or not isinstance(fr, str):
            raise CatalogError(where, "needs `en` and `fr` strings", row=f"{key} {i + 1}")
        regex, kinds = _compile(en, whole)
        missing = {m.group(1) for m in _FIELD.finditer(fr)} - set(kinds)
        if missing:
            raise CatalogError(where, f"the French uses fields the English has not: {', '.join(sorted(missing))} "
                               f"(English fields: {', '.join(kinds) or 'none'})", row=f"{key} {i + 1}", field="fr")
        out.append(Row(en, fr, regex, kinds))
    return out


@cache
def memory(lang: str) -> tuple[tuple[Row, ...], tuple[Row, ...]]:
    """The (whole-line rows, fragment rows) of `lang`'s translation memory, compiled once."""
    where = f"gpuplan/data/{FILES[lang]}"
    data = tomllib.loads(resources.files("gpuplan.data").joinpath(FILES[lang]).read_text(encoding="utf-8"))
    return tuple(_rows(data, "line", True, where)), tuple(_rows(data, "fragment", False, where))


def french_number(text: str) -> str:
    """A number as the core writes it ("$1,234.5", "12%", "1,234 EUR") in French notation ("1 234,5 $US",
    "12 %", "1 234 €")."""
    m = _NUMBER_PARTS.fullmatch(text)
    if m is None:
        return text
    dollar, sign, whole, frac, unit = m.groups()
    out = sign + whole.replace(",", NNBSP) + (frac or "").replace(".", ",")
    if unit == "%":
        return out + NNBSP + "%"
    if dollar:
        return out + NBSP + FR_CURRENCY["USD"]
    if unit:
        return out + NBSP + FR_CURRENCY.get(unit.strip(), unit.strip())
    return out


def _fill(row: Row, m: re.Match[str], lang: str) -> str:
    values = {}
    for name, kind in row.kinds.items():
        v = m.group(name)
        if kind == "n":
            v = french_number(v)
        elif kind == "t":
            v = tr(v, lang)
        elif kind == "s":
            v = " ; ".join(tr(part, lang) for part in v.split("; "))
        values[name] = v
    return row.fr.format(**values)


def tr(text: str, lang: str) -> str:
    """`text`, a line gpuplan's core wrote in English, in `lang`: the first whole-line row of the language's
    memory that matches it, then its fragments; English as it is when lang is "en"."""
    if lang == "en" or not text:
        return text
    lines, fragments = memory(lang)
    for row in lines:
        m = row.regex.match(text)
        if m is not None:
            return _fill(row, m, lang)
    for row in fragments:
        text = row.regex.sub(lambda m, row=row: _fill(row, m, lang), text)  # type: ignore[misc]
    return text


def tr_all(lines: Iterable[str], lang: str) -> list[str]:
    return [tr(x, lang) for x in lines]


# ---------------------------------------------------------------- the detector of English left in a French text

#: words that are English and never French (the function words first): one of them outside a citation, an id or
#: code says a line was left in English. Words both languages write ("on", "a", "an", "as", "but", "or", "plus",
#: "total", "budget", "serveur"'s "server"...) are not in it.
ENGLISH_WORDS = frozenset("""
the of and with for to is are was be been from by than this that these those not which when what where who how why
its it has have does do into only more less after before over under against below above each per at their there
must should would will can could any all one both either neither some such same other than then
fits fit needs needed usable required free still running cheaper cheapest dearer buying renting rent buy
price prices cost costs month months days day hours servers server cores network power cooling storage shipped
planned growth rule rules largest peak held billed work median group run runs training reason reasons warning
""".split())
_WORD = re.compile(r"[A-Za-zÀ-ÿœŒ']+")
#: what is not prose: URLs, `code`, ids and file names (a word with a digit, -, _, / or .)
_NOT_PROSE = re.compile(r"https?://\S+|`[^`]*`|--\w[\w-]*|\S*(?:[\d_/]|\.[\w*])\S*")
#: French words that an English word list holds, in the case French writes them: "To" (téraoctet)
_FRENCH_TOO = frozenset({"To"})


def english_words(line: str, citations: Iterable[str] = ()) -> list[str]:
    """The English words of `line` (a line of a report in another language), once the `citations` it quotes
    (source texts, proper names: they stay as written) and its URLs, code and ids are taken out."""
    for c in sorted(citations, key=len, reverse=True):
        if c and c in line:
            line = line.replace(c, " ")
    line = _NOT_PROSE.sub(" ", line)
    return [w for w in _WORD.findall(line) if w.lower() in ENGLISH_WORDS and w not in _FRENCH_TOO]


def _strings(node: Any, keys: frozenset[str]) -> Iterable[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in keys and isinstance(v, str):
                yield v
            else:
                yield from _strings(v, keys)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v, keys)


#: the data files' keys whose text a report quotes as written: sources, the kind of a quote, names, units
CITED_KEYS = frozenset({"source", "no_price", "kind", "name", "provider", "model", "offer", "title", "basis", "unit"})


@lru_cache(maxsize=1)
def data_citations() -> frozenset[str]:
    """Every text the built-in data files give as a source or a name (their `source`, `kind`, `name`, ... values):
    the lines that quote one quote it as written, in any language."""
    out: set[str] = set()
    pkg = resources.files("gpuplan.data")
    for entry in pkg.iterdir():
        if entry.name.endswith(".toml") and entry.name not in FILES.values():
            out.update(_strings(tomllib.loads(entry.read_text(encoding="utf-8")), CITED_KEYS))
    return frozenset(s for s in out if len(s) > 3)


__all__ = ["CITED_KEYS", "ENGLISH_WORDS", "FILES", "data_citations", "english_words", "french_number", "memory",
           "tr", "tr_all"]
