"""Hypothesis strategies for generated input files: project files (mutations of the built-in examples and projects
generated from the project's JSON schema), `--catalog` files (mutated rows of data/gpus.toml) and `--prices` files
(mutated rows of data/prices.toml). Each strategy draws a `Doc`: the file's bytes and its suffix.

Values that YAML and JSON writers cannot produce (5,000-digit integers, `.nan`, deep nesting written as text) are
put in as placeholders and replaced in the written text (`Raw`)."""

from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from gpuplan.catalog.loader import example_names, load_presets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf-configs"


@dataclass(frozen=True)
class Doc:
    data: bytes
    suffix: str  # ".yaml", ".json", ".toml", ".csv"

    def write(self, folder: Path, stem: str = "input") -> Path:
        path = folder / f"{stem}{self.suffix}"
        path.write_bytes(self.data)
        return path


@dataclass(frozen=True)
class Raw:
    """Text written as is in place of a value: the YAML, JSON or TOML spelling of something their writers refuse."""

    yaml: str
    json: str
    toml: str | None = None


def _examples() -> dict[str, dict[str, Any]]:
    out = {}
    for name in example_names():
        text = resources.files("gpuplan.examples").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
        out[name] = yaml.safe_load(text)
    return out


EXAMPLES = _examples()
HF_CONFIGS = {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}
GPU_ROWS = tomllib.loads(resources.files("gpuplan.data").joinpath("gpus.toml").read_text(encoding="utf-8"))["gpu"]
_PRICES = tomllib.loads(resources.files("gpuplan.data").joinpath("prices.toml").read_text(encoding="utf-8"))
CLOUD_ROWS, HOSTING_ROWS = _PRICES["cloud"], _PRICES["hosting"]
PRESETS = sorted(load_presets())

_HUGE = [Raw("9" * n, "9" * n, "9" * n) for n in (30, 400, 5000)]
_NONFINITE = [Raw(".nan", "NaN", "nan"), Raw(".inf", "Infinity", "inf"), Raw("-.inf", "-Infinity", "-inf")]
_DEEP = [Raw("[" * n + "]" * n, "[" * n + "]" * n, None) for n in (50, 3000)] + [
    Raw("{a: " * 1200 + "1" + "}" * 1200, '{"a": ' * 1200 + "1" + "}" * 1200, None)]

#: values that are wrong somewhere: wrong types, bounds, unicode, huge and non-finite numbers, deep nesting
WEIRD = st.one_of(
    st.sampled_from([None, True, False, "yes", "", "abc", [], {}, [1, 2], {"a": 1}, 0, -1, -0.5, 0.0, 1, 2.5,
                     1e12, 1e30, 1e300, 1e307, -1e308, 10**20, 10**300, "1e3", "inf", "NaN", "é🙂\u202e", "x" * 10_000,
                     "../../etc/passwd", "%s%n{0}", "\x00", "all-linear", "llama-3.1-8b", "a10g-24gb", [[[]]]]),
    st.sampled_from(_HUGE + _NONFINITE + _DEEP),
    st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.lists(st.integers(-5, 5), max_size=3),
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any, *, drop: bool = False) -> None:
    for part in path[:-1]:
        obj = obj[part]
    if drop:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any], extra_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """`base` with one to three changes: a key dropped, a value replaced, a key added (unknown or known)."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        what = draw(st.sampled_from(["drop", "replace", "replace", "replace", "add"]))
        if not paths or what == "add":
            parents = [p for p in paths if isinstance(_get(doc, p), dict)] + [()]
            parent = draw(st.sampled_from(parents))
            key = draw(st.sampled_from(["unknown_key", "Name", "modle", "lora", "batch_size", "tokens", "hardware",
                                        "growth", "gpus", *extra_keys]))
            target = _get(doc, parent)
            target[key] = copy.deepcopy(draw(WEIRD))
            continue
        path = draw(st.sampled_from(paths))
        if what == "drop":
            _set(doc, path, None, drop=True)
        else:
            _set(doc, path, copy.deepcopy(draw(WEIRD)))
    return doc


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _dump(doc: Any, fmt: str) -> str:
    """`doc` as YAML, JSON or TOML text, Raw values written as is."""
    raws: dict[str, Raw] = {}

    def swap(o: Any) -> Any:
        if isinstance(o, Raw):
            key = f"RAWVALUE{len(raws)}X"
            raws[key] = o
            return key
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, list):
            return [swap(v) for v in o]
        if isinstance(o, int) and not isinstance(o, bool) and abs(o) > 10**4000:
            return swap(Raw(str(o)[:4000], str(o)[:4000]))
        return o

    clean = swap(doc)
    if fmt == "json":
        text = json.dumps(clean, ensure_ascii=False)
        for key, raw in raws.items():
            text = text.replace(f'"{key}"', raw.json)
    elif fmt == "toml":
        text = _toml(clean)
        for key, raw in raws.items():
            text = text.replace(f'"{key}"', raw.toml if raw.toml is not None else raw.json)
    else:
        text = yaml.safe_dump(clean, allow_unicode=True, sort_keys=False, width=10**6)
        for key, raw in raws.items():
            text = text.replace(key, raw.yaml)
    return text


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return json.dumps(str(v), ensure_ascii=False)


def _toml(doc: dict[str, Any]) -> str:
    lines = []
    for k, v in doc.items():
        if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
            continue
        if v is not None:
            lines.append(f"{json.dumps(str(k))} = {_toml_value(v)}")
    for k, v in doc.items():
        if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
            for row in v:
                lines.append(f"\n[[{k}]]")
                lines += [f"{json.dumps(str(f))} = {_toml_value(x)}" for f, x in row.items() if x is not None]
    return "\n".join(lines) + "\n"


#: damage to the written text: bytes that are not UTF-8, a cut, YAML-level tricks
_TEXT_DAMAGE = ["\xff\xfe", "\x00", "\t", "&a [1] *a *a", "!!python/object/apply:os.system ['true']", "{{{", "]]]",
                "name: dup\nname: again\n", "? [a]\n: 1\n", "%YAML 9.9\n---\n", "key: 'unterminated", "\ufeff",
                "<<: *nowhere", "- - - -", "--- !!binary AAAA\n"]


@st.composite
def damaged(draw: st.DrawFn, text: str) -> bytes:
    """The text, sometimes damaged: bytes flipped, cut short, something inserted, invalid UTF-8."""
    data = text.encode("utf-8")
    how = draw(st.sampled_from(["none"] * 6 + ["flip", "cut", "insert", "latin1", "bom"]))
    if how == "none" or not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    if how == "flip":
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    if how == "cut":
        return data[:i]
    if how == "insert":
        return data[:i] + draw(st.sampled_from(_TEXT_DAMAGE)).encode("utf-8", "surrogatepass") + data[i:]
    if how == "latin1":
        return data[:i] + b"\xe9\xff" + data[i:]
    return b"\xef\xbb\xbf" + data


def _with_model_config(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """The project with its model given inline as a (mutated) real config.json."""
    name = draw(st.sampled_from(sorted(HF_CONFIGS)))
    config = HF_CONFIGS[name]
    if draw(st.booleans()):
        config = draw(mutated(config, ("num_attention_heads", "model_type", "depths", "attention_dropout",
                                       "head_dim", "n_inner", "sliding_window", "mlp_only_layers")))
    out = copy.deepcopy(doc)
    out["model"] = {"config": config}
    return out


@st.composite
def project_docs(draw: st.DrawFn) -> Doc:
    """A project file: a built-in example, mutated (sometimes with an inline config.json), as YAML or JSON,
    sometimes damaged as text."""
    base = EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))]
    if draw(st.integers(0, 4)) == 0:
        base = _with_model_config(draw, base)
    doc = draw(mutated(base)) if draw(st.integers(0, 5)) else copy.deepcopy(base)
    fmt = draw(st.sampled_from(["yaml", "yaml", "json"]))
    return Doc(draw(damaged(_dump(doc, fmt))), "." + fmt)


def _schema_strategy() -> st.SearchStrategy[dict[str, Any]]:
    from gpuplan.schema.project import Project
    from tests.fuzz.schema_strategy import from_schema

    return from_schema(Project.model_json_schema())


@st.composite
def schema_docs(draw: st.DrawFn) -> Doc:
    """A project generated from the project's JSON schema (its model often set to a preset, so that the file
    gets past the model and into the search)."""
    doc = draw(_schema_strategy())
    # a preset or an inline config: never a Hub id (the network), a local path or a trace factory (runs code)
    if draw(st.integers(0, 3)):
        doc["model"] = {"preset": draw(st.sampled_from(PRESETS))}
    else:
        doc["model"] = {"config": HF_CONFIGS[draw(st.sampled_from(sorted(HF_CONFIGS)))]}
    return Doc(_dump(doc, "yaml").encode("utf-8"), ".yaml")


@st.composite
def catalog_docs(draw: st.DrawFn) -> Doc:
    """A `--catalog` file: a few rows of data/gpus.toml, one or more of them mutated, as TOML or YAML."""
    rows = [copy.deepcopy(r) for r in draw(st.lists(st.sampled_from(GPU_ROWS), min_size=1, max_size=3))]
    for i, row in enumerate(rows):
        row["id"] = f"{row['id']}-mine{i}"
        row["aliases"] = []
    k = draw(st.integers(0, len(rows) - 1))
    rows[k] = draw(mutated(rows[k], ("memory_gib", "tflops", "price", "schema_version")))
    doc: dict[str, Any] = {"schema_version": 1, "gpu": rows}
    if draw(st.integers(0, 9)) == 0:
        doc = draw(mutated(doc, ("cpu", "gpus", "gpu")))
    fmt = draw(st.sampled_from(["toml", "toml", "yaml"]))
    return Doc(draw(damaged(_dump(doc, fmt))), "." + fmt)


def _csv(rows: list[tuple[str, dict[str, Any]]], extra: str | None) -> str:
    fields = ["table"] + sorted({k for _, r in rows for k in r})
    if extra:
        fields.append(extra)
    lines = [",".join(fields)]
    for table, r in rows:
        cells = [table] + [_csv_cell(r.get(f)) for f in fields[1:]]
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        v = ";".join(map(str, v))
    if isinstance(v, Raw):
        v = v.json
    s = str(v)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\n') else s


@st.composite
def price_docs(draw: st.DrawFn) -> Doc:
    """A `--prices` file: cloud and hosting rows of data/prices.toml, one mutated, as CSV, YAML or TOML."""
    cloud = [copy.deepcopy(r) for r in draw(st.lists(st.sampled_from(CLOUD_ROWS), max_size=2))]
    hosting = [copy.deepcopy(r) for r in draw(st.lists(st.sampled_from(HOSTING_ROWS), max_size=2))]
    for i, r in enumerate(hosting):
        r["id"] = f"{r['id']}-mine{i}"
    rows = [("cloud", r) for r in cloud] + [("hosting", r) for r in hosting]
    if rows:
        k = draw(st.integers(0, len(rows) - 1))
        rows[k] = (rows[k][0], draw(mutated(rows[k][1], ("price_per_gpu_hour", "monthly", "gpus"))))
    fmt = draw(st.sampled_from(["csv", "csv", "yaml", "toml"]))
    if fmt == "csv":
        extra = draw(st.sampled_from([None, None, None, "price_per_gpu_hr", "colour"]))
        text = _csv(rows, extra)
    else:
        doc = {"schema_version": 1, "cloud": [r for t, r in rows if t == "cloud"],
               "hosting": [r for t, r in rows if t == "hosting"]}
        text = _dump({k: v for k, v in doc.items() if v != []}, fmt)
    return Doc(draw(damaged(text)), "." + fmt)


__all__ = ["Doc", "catalog_docs", "price_docs", "project_docs", "schema_docs"]
