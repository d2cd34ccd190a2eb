"""The package's layers (docs/architecture.md): every import between runner's packages points down, the engine's
packages (item, pool, ray) import each other downwards only, only ``runner.engine.ray`` imports Ray, and the modules
import each other without a cycle.

The walk reads the source (``ast``), so it sees imports inside functions and under ``TYPE_CHECKING`` too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runner"

# What each part of runner may import from runner (itself always). Plug-ins (benchmarks, solutions, models and the
# metric integrations) import core, and models where they call or judge with a model; never the engine, storage,
# the registry or a face. A benchmark's own agent may import the benchmark's formats (ACEBench's call syntax and
# tool schemas, HotpotQA's tool names), never the reverse. The engine imports no plug-in: it gets them by name from
# the registry.
ALLOWED: dict[str, set[str]] = {
    "_version": set(),
    "_lazy": set(),
    "log": set(),
    "core": set(),
    "models": {"core"},
    "integrations": {"core", "models"},
    "benchmarks": {"core", "models", "integrations"},
    "solutions": {"core", "models", "benchmarks"},
    "storage": {"core"},
    "traffic": {"core", "storage"},
    "registry": {"core"},
    "serving": {"core"},
    "engine": {"core", "storage", "traffic", "registry", "serving", "log", "_version"},
    "report": {"core", "storage", "registry", "_version"},
    "kuberay": {"core", "storage", "registry", "models", "_version"},
    "evaluators": {"core", "storage", "registry", "engine", "serving", "report", "log", "_version"},
    # The CLI reads no storage itself: a run's reports, status and comparisons are report/'s, what an interrupted
    # run kept is the engine's (the Python API has them too).
    "cli": {"core", "models", "registry", "engine", "serving", "report", "kuberay", "evaluators", "log", "_version"},
    "__main__": {"cli"},
}
SHARED = {"_lazy"}
"""Parts every layer may import: the one helper of the package-face convention (``runner/_lazy.py``)."""
FACES = {"__init__"}
"""``runner/__init__.py`` re-exports the public API from every layer."""

ENGINE_ROOMS: dict[str, set[str]] = {
    "item": {"item"},
    "pool": {"pool", "item"},
    "ray": {"ray", "pool", "item"},
}
"""Within the engine: what each of its packages may import of the engine's other packages (all of them may import
the run-level modules at the engine's top). One item's path knows no pool and no Ray; the pool knows no Ray."""

RAY_PACKAGE = "runner.engine.ray"
"""The only package that imports ``ray``."""


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def third_party(path: Path) -> list[tuple[str, int]]:
    """``(top-level package, line)`` of every import of a package outside runner in ``path``, those inside functions
    and ``TYPE_CHECKING`` blocks included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name.split(".")[0], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return [(package, line) for package, line in found if package != "runner"]


def imports(name: str, path: Path) -> list[tuple[str, int, bool]]:
    """``(imported runner module, line, imported at run time)`` for every import in ``path``; those under
    ``if TYPE_CHECKING:`` are for type checkers only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    known = modules()
    found = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, False)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, top) for alias in child.names if alias.name.startswith("runner"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    module = f"{base}.{child.module}" if child.module else base
                else:
                    module = child.module or ""
                if module.startswith("runner"):
                    # ``from runner.x import y`` imports the module runner.x.y if there is one, else a name of runner.x.
                    found.extend((f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module,
                                  child.lineno, top) for alias in child.names)
            visit(child, top)

    visit(tree, True)
    return [(module, line, top) for module, line, top in found if module in known]


def part(module: str) -> str:
    """The layer of ``runner.<part>...``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_import_points_down() -> None:
    upward = []
    for name, path in modules().items():
        source = part(name)
        if source in FACES:
            continue
        assert source in ALLOWED, f"{name}: add its package to the layer table in this test and docs/architecture.md"
        for module, line, _ in imports(name, path):
            target = part(module)
            if target != source and target not in ALLOWED[source] and target not in SHARED:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module} ({source} -> {target})")
    assert upward == []


def engine_room(module: str) -> str | None:
    """The engine package of ``runner.engine.<room>...`` (``None``: a run-level module at the engine's top)."""
    parts = module.split(".")
    if len(parts) > 3 and parts[1] == "engine" and parts[2] in ENGINE_ROOMS:
        return parts[2]
    return None


def test_the_engine_packages_import_each_other_downwards_only() -> None:
    upward = []
    for name, path in modules().items():
        room = engine_room(name)
        if room is None:
            continue
        for module, line, _ in imports(name, path):
            target = engine_room(module)
            if target is not None and target not in ENGINE_ROOMS[room]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module} ({room} -> {target})")
    assert upward == []


def test_only_the_engines_ray_package_imports_ray() -> None:
    outside = [f"{path.relative_to(PACKAGE.parent)}:{line}" for name, path in modules().items()
               if not (name == RAY_PACKAGE or name.startswith(RAY_PACKAGE + "."))
               for package, line in third_party(path) if package == "ray"]
    assert outside == []


def test_modules_import_without_a_cycle() -> None:
    """Run-time imports, those inside functions included (a lazy import that closes a cycle is still one)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules().items():
        for module, _, runtime in imports(name, path):
            # A package imports its own modules in its __init__; the reverse direction is what a cycle needs.
            if runtime and module != name and not name.startswith(module + "."):
                graph[name].add(module)
    cycles = _cycles(graph)
    assert cycles == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def connect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            connect(node)
    return found


def test_the_rules_catch_ray_elsewhere_an_upward_room_and_a_cycle(tmp_path: Path) -> None:
    """Each rule fails on its kind of import (the walks read these files as they read runner's)."""
    module = tmp_path / "pool.py"
    module.write_text("def f():\n    import ray.util\n    from runner.engine.ray import worker\n")
    assert ("ray", 2) in third_party(module)
    assert engine_room("runner.engine.ray.worker") not in ENGINE_ROOMS["pool"]
    assert "engine" not in ALLOWED["traffic"] | ALLOWED["storage"] | ALLOWED["core"] | ALLOWED["models"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    source = tmp_path / "runner" / "engine" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from runner.cli import build_parser\n"
                      "def f():\n    from runner.registry import resolve\n")
    found = imports("runner.engine.x", source)
    assert ("runner.cli", 3, False) in found and ("runner.registry", 5, True) in found


def test_a_package_face_defines_nothing_and_loads_names_one_way() -> None:
    """docs/architecture.md, "Package faces": an ``__init__.py`` holds a docstring, imports of its public names and
    ``__all__``; names loaded on first use go through ``runner._lazy.lazy_exports``, and nothing else."""
    found = []
    for path in sorted(PACKAGE.rglob("__init__.py")):
        if "vendor" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE.parent)
        if ast.get_docstring(tree) is None:
            found.append(f"{where}: no docstring")
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(f"{where}:{node.lineno} defines {node.name} (move it to a module of the package)")
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and "_EXPORTS" in ast.unparse(node):
                found.append(f"{where}:{node.lineno} has an _EXPORTS table (use _LAZY and lazy_exports)")
    assert found == []


def test_a_private_module_is_imported_by_its_own_package_only() -> None:
    """A module whose name starts with ``_`` (``runner/models/_openai.py``) belongs to its package: other packages
    use the names its face exports."""
    found = []
    for name, path in modules().items():
        for module, line, _ in imports(name, path):
            leaf = module.rsplit(".", 1)[-1]
            owner = module.rsplit(".", 1)[0]
            if leaf.startswith("_") and leaf not in ("__init__", "_version", "_lazy") and \
                    not (name == owner or name.startswith(owner + ".")):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert found == []
