"""The shape of the code, checked: the core is pure (every module of gpuplan.core, TYPE_CHECKING blocks and
function bodies included), nothing under src/ imports in a cycle, modules stay under 400 lines and functions
under about 80 (the few longer ones are listed with their reason)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "gpuplan"
CORE = PKG / "core"

#: what the pure core may import: itself, the typed data, units and errors, pydantic for its models, and standard
#: modules that do no I/O and read no clock
CORE_ALLOWED = ("gpuplan.core", "gpuplan.schema", "gpuplan.units", "gpuplan.errors", "pydantic", "__future__",
                "math", "dataclasses", "typing", "functools", "itertools", "enum", "collections", "statistics",
                "bisect", "heapq", "operator",
                # pure text and data helpers the launch-config export and the GPU-name matching use
                "re", "json", "textwrap",
                # dates as values (price ages against a `today` that is passed in); no clock is read
                "datetime")
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "__import__", "breakpoint"}
#: the clock and today are passed in: these attribute calls read them
FORBIDDEN_ATTRS = {("datetime", "now"), ("date", "today"), ("datetime", "today"), ("datetime", "utcnow")}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
#: functions allowed to be longer, and why
LONG_FUNCTIONS: dict[str, str] = {
    "gpuplan.core.sizing.serving.estimate_inference_speed":
        "the steady-batch serving model; it is replaced by the continuous-batching model of the serving issue (#14), "
        "which splits it by phase",
    "gpuplan.trace.custom.trace_factory": "one traced step: the parts share the FakeTensorMode and allocator contexts",
}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(path: Path, module: str) -> list[str]:
    """Every module `path` imports, anywhere in it (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            out.append(base)
            out += [f"{base}.{a.name}" for a in node.names]  # `from pkg import submodule`
    return out


def test_every_core_module_imports_only_the_pure_allow_list() -> None:
    mods = {m: p for m, p in modules().items() if m.startswith("gpuplan.core")}
    assert len(mods) > 30  # the walk found the core
    bad = []
    for mod, path in mods.items():
        for name in imports(path, mod):
            top_ok = name.startswith(CORE_ALLOWED) and (name in CORE_ALLOWED or name.startswith(
                tuple(a + "." for a in CORE_ALLOWED)))
            # `from gpuplan.core.x import name` also yields "gpuplan.core.x.name": still inside the core
            if not top_ok:
                bad.append(f"{mod}: {name}")
    assert not bad, "impure imports in gpuplan.core:\n" + "\n".join(bad)


def clock_reads(path: Path) -> list[int]:
    """The lines of `path` that read the clock or the calendar (date.today(), datetime.now(), ...)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value  # `date` in date.today(), datetime.date.today() and dt.date.today()
        name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
        if (name, node.func.attr) in FORBIDDEN_ATTRS:
            out.append(node.lineno)
    return out


def test_no_core_module_calls_io_or_reads_the_clock() -> None:
    bad = []
    for mod, path in modules().items():
        if not mod.startswith("gpuplan.core"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                bad.append(f"{mod}:{node.lineno} {node.func.id}()")
        bad += [f"{mod}:{line} reads the clock" for line in clock_reads(path)]
    assert not bad, "\n".join(bad)


def test_the_catalogs_take_the_date_and_the_clock_is_read_in_one_place() -> None:
    # a plan is made for a date the caller gives (issue #26): the catalogs check the user's rows against it, and
    # only gpuplan.clock.plan_date (the shells' default) and the web's record of when a scenario was saved read it
    readers = {mod for mod, path in modules().items() if clock_reads(path)}
    assert readers == {"gpuplan.clock", "gpuplan.cli.probe", "gpuplan.web.scenarios"}, readers


def test_the_clock_check_sees_a_call(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import datetime\nx = datetime.date.today()\ny = date.today()\nz = datetime.datetime.now(tz)\n"
                   "w = datetime.date.fromisoformat('2026-12-01')\n")
    assert clock_reads(src) == [2, 3, 4]


def test_the_purity_check_catches_a_type_checking_import(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuplan.catalog.hardware import X\n")
    names = imports(src, "gpuplan.core.m")
    assert "gpuplan.catalog.hardware" in names


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {}
    for mod, path in mods.items():
        targets = set()
        for name in imports(path, mod):
            if name in mods and name != mod:
                targets.add(name)
        edges[mod] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_in_src() -> None:
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("mod", sorted(modules()))
def test_module_is_under_400_lines(mod: str) -> None:
    n = len(modules()[mod].read_text(encoding="utf-8").splitlines())
    assert n < MAX_MODULE_LINES, f"{mod} has {n} lines: split it by subject"


def test_functions_are_short() -> None:
    long = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{mod}.{node.name}"
                if n > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS:
                    long.append(f"{name}: {n} lines")
    assert not long, "functions over 80 lines (split them, or list them with a reason):\n" + "\n".join(long)
