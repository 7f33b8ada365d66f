"""The source tree's shape: small modules, no import circle, and measuring code that does not judge.

`watch/` measures and returns measurements; `diagnose/` turns them into verdicts; `trainspeed.doctor`
joins the two. An import from `watch/` into `diagnose/` (or into the doctor that composes them) would
let verdicts leak into measuring, so it is checked here, with the line counts and the import graph.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules `path` imports, at module level, inside functions or under TYPE_CHECKING (an import
    for types only is a dependency all the same: a circle of them is two modules that cannot be read apart).
    `from package import module` names the module, not the package's __init__."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                for alias in child.names:
                    sub = f"{child.module}.{alias.name}"
                    found.add(sub if sub in modules else child.module)
            visit(child)

    visit(ast.parse(path.read_text()))
    return {name for name in found if name in modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def test_no_source_file_is_over_500_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_no_import_circle() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    assert _cycles(graph) == []


def test_watch_does_not_import_the_verdicts() -> None:
    modules = _modules()
    judging = ("trainspeed.diagnose", "trainspeed.doctor")
    leaks = {name: sorted(d for d in _imports(path, modules) if d.startswith(judging))
             for name, path in modules.items() if name.startswith("trainspeed.watch")}
    assert not any(leaks.values()), leaks


def _bound_from_outside(path: Path) -> list[str]:
    """Module-level functions of `path` written as methods (a first parameter named `self`): functions bound onto a
    class of another module, whose state they write from outside it."""
    tree = ast.parse(path.read_text())
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.args.args and node.args.args[0].arg == "self"]


def test_no_function_is_a_method_of_a_class_elsewhere() -> None:
    bound = {str(p.relative_to(SRC)): names for p in SRC.rglob("*.py") if (names := _bound_from_outside(p))}
    assert not bound, bound


def test_the_checks_find_a_circle_and_a_leak() -> None:
    # the checks above can fail: a two-module circle is found, and so is an import that leaks
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    tree = {"trainspeed.watch.x": SRC / "trainspeed" / "doctor.py", "trainspeed.diagnose.report": Path()}
    assert "trainspeed.diagnose.report" in _imports(tree["trainspeed.watch.x"], {**_modules(), **tree})
    # an import for types only counts, and a function written as another class's method is found
    scratch = SRC.parent / "tests" / "_layout_scratch.py"
    try:
        scratch.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainspeed.doctor import Doctor\n"
                           "def step(self: 'Doctor') -> None: ...\n")
        assert "trainspeed.doctor" in _imports(scratch, _modules())
        assert _bound_from_outside(scratch) == ["step"]
    finally:
        scratch.unlink()


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [e for t in target.elts for e in _flat(t)]
    return [target.value] if isinstance(target, ast.Starred) else [target]


def _written(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return [e for t in node.targets for e in _flat(t)]
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return _flat(node.target)
    if isinstance(node, ast.Delete):
        return [e for t in node.targets for e in _flat(t)]
    return []


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _writes_elsewhere(path: Path) -> list[str]:
    """Attribute writes into an object the writing code does not own: through another object held by `self`
    (`self.counts.syncs += 1`), on a parameter (`record.device_ms = ...`), or on a local bound to either
    (`counts = self.counts; counts.syncs = 0`). A class's own attributes (`self.x = ...`) and the attributes of an
    object the function itself just made are its own; Python's dunder attributes (a module's `__class__`) are the
    language's. A patch of a library goes through `setattr`, its original kept to put back."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = fn.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self", "cls"}
        owners = {"self", "cls"}
        held: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Name):
                root = _root(node.value)
                if isinstance(node.value, ast.Attribute) or (
                        isinstance(root, ast.Name) and (root.id in owners or root.id in params)):
                    held.update(n.id for t in node.targets for n in _flat(t) if isinstance(n, ast.Name))
            for target in _written(node):
                if not isinstance(target, ast.Attribute) or target.attr.startswith("__"):
                    continue
                base = target.value
                if isinstance(base, ast.Name):
                    bad = base.id in params or base.id in held
                else:
                    root = _root(base)
                    bad = isinstance(root, ast.Name) and (root.id in owners or root.id in params or root.id in held)
                if bad:
                    found.append(f"{path.relative_to(SRC.parent)}:{target.lineno}: {ast.unparse(target)}")
    return sorted(set(found))


def test_no_object_writes_another_objects_attributes() -> None:
    writes = [w for p in SRC.rglob("*.py") for w in _writes_elsewhere(p)]
    assert not writes, writes


def test_the_write_check_finds_writes_into_another_object() -> None:
    scratch = SRC.parent / "tests" / "_writes_scratch.py"
    try:
        scratch.write_text("class A:\n    def f(self, record, n):\n        self.counts.syncs += 1\n"
                           "        record.device_ms = n\n        counts = self.counts\n        counts.cells = 0\n"
                           "        self.mine = n\n        made = dict()\n        made.x = 1\n"
                           "        setattr(record, 'patched', n)\n")
        found = [w.split(": ", 1)[1] for w in _writes_elsewhere(scratch)]
        assert found == ["self.counts.syncs", "record.device_ms", "counts.cells"]  # by line
    finally:
        scratch.unlink()


def test_the_rules_import_no_torch() -> None:
    """diagnose/ is pure: measurements in, verdicts out. Imported in a fresh interpreter, it and the load's view of
    a run (each of their modules) leave torch unimported."""
    import subprocess
    import sys

    code = ("import importlib, pkgutil, sys\n"
            "import trainspeed.diagnose, trainspeed.load\n"
            "for package in (trainspeed.diagnose, trainspeed.load):\n"
            "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
            "        importlib.import_module(info.name)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.stdout.strip() == "False"
