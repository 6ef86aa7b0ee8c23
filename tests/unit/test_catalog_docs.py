"""docs/catalog.md stays true: its field tables list exactly the fields of the hardware row models (with their
allowed values and whether they are required), its row counts match the built-in data, its YAML examples load,
and the commands and error messages it shows are what gpuplan prints."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpuplan.catalog.hardware import KINDS, load_catalog
from gpuplan.errors import CatalogError
from gpuplan.schema.hardware import CatalogRow, Price

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"
DOC = DOC_PATH.read_text(encoding="utf-8")

#: sections of "## Fields" whose rows every kind has
SHARED = {"Every row": CatalogRow, "price": Price}


# --- reading the doc ----------------------------------------------------------------------------------------

def _section(heading: str) -> str:
    """The text under a `## ` heading, up to the next one."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", DOC, re.M | re.S)
    assert m, f"docs/catalog.md has no '## {heading}' section"
    return m.group(1)


def _table_rows(text: str) -> list[list[str]]:
    """Body rows of the Markdown tables in `text`, as stripped cells (header and rule rows left out)."""
    rows: list[list[str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        if i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: ") and lines[i + 1].startswith("|"):
            continue  # a header row
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _field_tables() -> dict[str, list[list[str]]]:
    """'### ' sections of "## Fields": the backticked name in the heading (or the heading) -> table rows."""
    out: dict[str, list[list[str]]] = {}
    for m in re.finditer(r"^### ([^\n]+)\n(.*?)(?=^### |\Z)", _section("Fields"), re.M | re.S):
        tick = re.search(r"`([a-z_]+)`", m.group(1))
        out[tick.group(1) if tick else m.group(1).strip()] = _table_rows(m.group(2))
    return out


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC, re.M | re.S)


def _yaml_name(block: str) -> str:
    m = re.match(r"# ([\w.\-]+\.ya?ml):", block)
    assert m, "a YAML example starts with a '# NAME.yaml: ...' comment naming its file"
    return m.group(1)


# --- reading the models -------------------------------------------------------------------------------------

def _submodel(annotation: Any) -> type[BaseModel] | None:
    return next((a for a in typing.get_args(annotation) or (annotation,)
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _leaf_fields(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    """Dotted field name -> field, nested models (tflops, interconnect, price) expanded into their fields."""
    out: dict[str, FieldInfo] = {}
    for name, f in model.model_fields.items():
        sub = _submodel(f.annotation)
        out.update(_leaf_fields(sub, f"{prefix}{name}.") if sub else {prefix + name: f})
    return out


def _literal_values(annotation: Any) -> list[Any]:
    """Allowed values of a Literal field, also inside `X | None` and `list[X]`."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for a in typing.get_args(annotation) for v in _literal_values(a)]


def _doc_rows_for(kind: str) -> dict[str, list[str]]:
    tables = _field_tables()
    rows = [*tables["Every row"], *tables["price"], *tables[kind]]
    names = [re.fullmatch(r"`([a-z0-9_.]+)`", r[0]) for r in rows]
    assert all(names), [r[0] for r, n in zip(rows, names) if not n]
    out = {n.group(1): r for n, r in zip(names, rows) if n}
    assert len(out) == len(rows), f"a field is listed twice for {kind}"
    return out


# --- the tests ----------------------------------------------------------------------------------------------

def test_sections_cover_every_kind() -> None:
    assert set(_field_tables()) == set(SHARED) | set(KINDS)


@pytest.mark.parametrize("kind", list(KINDS))
def test_field_tables_list_exactly_the_model_fields(kind: str) -> None:
    model = KINDS[kind][0]
    documented = set(_doc_rows_for(kind))
    fields = set(_leaf_fields(model))
    assert not fields - documented, f"undocumented {kind} fields"
    assert not documented - fields, f"docs/catalog.md lists {kind} fields the model does not have"
    for shared, shared_model in SHARED.items():  # the shared tables hold only fields every kind has
        prefix = "" if shared_model is CatalogRow else "price."
        assert {prefix + n for n in _leaf_fields(shared_model)} <= fields, shared


@pytest.mark.parametrize("kind", list(KINDS))
def test_types_and_requiredness_match(kind: str) -> None:
    rows = _doc_rows_for(kind)
    for name, f in _leaf_fields(KINDS[kind][0]).items():
        _, type_cell, req_cell, *_ = rows[name]
        for value in _literal_values(f.annotation):
            assert f"`{value}`" in type_cell, f"{kind}.{name}: allowed value {value!r} not in {type_cell!r}"
        if f.is_required():
            assert req_cell == "required", f"{kind}.{name} is required"
            continue
        default = f.get_default(call_default_factory=True)
        if default is None:
            assert req_cell == "optional", f"{kind}.{name} may be left out"
        else:
            shown = default if isinstance(default, str) else json.dumps(default)
            assert req_cell == f"default `{shown}`", f"{kind}.{name} defaults to {default!r}"


def test_row_counts_match_the_data() -> None:
    catalog = load_catalog()
    rows = _table_rows(_section("What is in it"))
    assert {r[0].strip("`") for r in rows} == set(KINDS)
    for table, file, count, priced, command in rows:
        kind = table.strip("`")
        _, fname, plural = KINDS[kind]
        data = list(catalog.table(kind).rows.values())
        assert file == f"`{fname}`"
        assert int(count) == len(data), f"{kind}: the doc says {count} rows, the data has {len(data)}"
        assert int(priced) == sum(r.price is not None for r in data), f"{kind}: rows with a price"
        assert command == f"`gpuplan catalog {plural}`"


def test_memory_ranges_by_market_class() -> None:
    m = re.search(r"consumer cards have (\d+)-(\d+) GB, against (\d+)-(\d+) GB on workstation cards and up to\s+"
                  r"(\d+) GB on datacenter parts", DOC)
    assert m, "the market-class paragraph states the VRAM ranges"
    gb: dict[str, list[float]] = {}
    for g in load_catalog().gpus.rows.values():
        gb.setdefault(g.market_class, []).append(g.memory_gb)
    stated = [int(x) for x in m.groups()]
    assert stated == [min(gb["consumer"]), max(gb["consumer"]), min(gb["workstation"]), max(gb["workstation"]),
                      max(gb["datacenter"])]


def test_yaml_examples_load(tmp_path: Path) -> None:
    blocks = _blocks("yaml")
    assert blocks, "docs/catalog.md has a YAML example"
    for block in blocks:
        path = tmp_path / _yaml_name(block)
        path.write_text(block, encoding="utf-8")
        catalog = load_catalog([path])
        builtin = load_catalog()
        for kind in KINDS:
            table, ids = catalog.table(kind), re.findall(rf"(?ms)^{kind}:\n(.*?)(?=^\S|\Z)", block)
            for row_id in re.findall(r"^  - id: (\S+)$", "".join(ids), re.M):
                assert table.origins[row_id].file == str(path)
                assert table.origins[row_id].overrides_builtin == (row_id in builtin.table(kind).rows)


def test_error_table_shows_the_real_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = _blocks("yaml")[0]
    name = _yaml_name(example)
    cases = [(re.fullmatch(r"`(.+)` → `(.+)`", r[0]), r[1]) for r in _table_rows(_section("Adding your own rows"))]
    cases = [(m.groups(), msg) for m, msg in cases if m]
    assert len(cases) >= 5
    monkeypatch.chdir(tmp_path)
    for (old, new), message in cases:
        assert example.count(old) == 1, f"{old!r} must occur once in the example"
        Path(name).write_text(example.replace(old, new), encoding="utf-8")
        with pytest.raises(CatalogError) as exc:
            load_catalog([name])
        assert f"`{exc.value}`" == message, f"{old} -> {new}"


def _console_steps() -> list[tuple[str, list[str]]]:
    """(command, output lines shown) for every `$ ` line of the ```console blocks, in order."""
    steps: list[tuple[str, list[str]]] = []
    for block in _blocks("console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif line.strip() and line.strip() != "…":
                steps[-1][1].append(line.strip())
    return steps


def test_console_examples_print_what_the_doc_shows(tmp_path: Path) -> None:
    for block in _blocks("yaml"):
        (tmp_path / _yaml_name(block)).write_text(block, encoding="utf-8")
    steps = _console_steps()
    assert any(cmd.startswith("gpuplan estimate") for cmd, _ in steps)
    python = f"{shlex.quote(sys.executable)} -m gpuplan "
    for cmd, shown in steps:
        run = python + cmd[len("gpuplan "):] if cmd.startswith("gpuplan ") else cmd
        r = subprocess.run(run, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
        expected_rc = 2 if any(s.startswith("error:") for s in shown) else 0
        assert r.returncode == expected_rc, f"{cmd}\n{r.stdout}\n{r.stderr}"
        printed = {line.strip() for line in (r.stdout + r.stderr).splitlines()}
        for line in shown:
            assert line in printed, f"{cmd}: the doc shows {line!r}; gpuplan printed:\n{r.stdout}{r.stderr}"
