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
    "gpuplan.validation_cases.cases": "a table of validation cases: data, one row per case",
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


def test_no_core_module_calls_io_or_reads_the_clock() -> None:
    bad = []
    for mod, path in modules().items():
        if not mod.startswith("gpuplan.core"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_CALLS:
                bad.append(f"{mod}:{node.lineno} {f.id}()")
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in FORBIDDEN_ATTRS:
                bad.append(f"{mod}:{node.lineno} {f.value.id}.{f.attr}()")
    assert not bad, "\n".join(bad)


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
