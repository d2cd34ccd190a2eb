"""Every Sphinx-style reference in runner's docstrings and in the docs (``:mod:``, ``:func:``, ``:class:``,
``:meth:``, ``:attr:``, ``:data:``, ``:exc:``) names something that exists, so that a module renamed or a method
moved cannot leave prose pointing at nothing.

A reference resolves the way Sphinx reads it: as a full dotted path (``~`` dropped), else relative to the class it is
written in (innermost first), to its module, to its package, or to ``runner``. An attribute counts when the class
declares it: a class attribute, an annotation, a pydantic or dataclass field, or an assignment to ``self.<name>``
in its source.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import textwrap
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r":(mod|func|class|meth|attr|data|exc|obj):`([^`]+)`")


@cache
def _declared(cls: type) -> frozenset[str]:
    """The attribute names ``cls`` (and its bases) declare without holding them as class attributes."""
    names: set[str] = set()
    for klass in cls.__mro__:
        names |= set(vars(klass).get("__annotations__", {}))
        names |= set(getattr(klass, "model_fields", None) or {})
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        names |= {node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")}
    return frozenset(names)


@cache
def _exists(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or something reached from one by attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        rest = parts[cut:]
        for position, name in enumerate(rest):
            if hasattr(found, name):
                found = getattr(found, name)
            else:
                last = position == len(rest) - 1
                return last and isinstance(found, type) and name in _declared(found)
        return True
    return False


def _resolves(target: str, module: str | None, classes: list[str]) -> bool:
    target = target.lstrip("~").strip().removesuffix("()")
    if "<" in target:  # :class:`text <target>`
        target = target.split("<", 1)[1].rstrip(">")
    if hasattr(builtins, target):
        return True
    relative = target.lstrip(".")
    candidates = [] if target.startswith(".") else [target]
    if module is not None:
        candidates += [f"{module}.{cls}.{relative}" for cls in classes]
        candidates += [f"{module}.{relative}", f"{module.rpartition('.')[0]}.{relative}"]
    candidates.append(f"runner.{relative}")
    return any(_exists(candidate) for candidate in candidates)


def _classes_around(tree: ast.Module, line: int) -> list[str]:
    """The names of the classes whose source holds ``line``, innermost first."""
    around = [node for node in ast.walk(tree)
              if isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return [node.name for node in sorted(around, key=lambda node: node.lineno, reverse=True)]


def _unresolved(path: Path) -> list[str]:
    text = path.read_text()
    relative = path.relative_to(ROOT)
    module, tree = None, None
    if path.suffix == ".py":
        module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(text)
    missing = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, target in REFERENCE.findall(line):
            classes = _classes_around(tree, number) if tree is not None else []
            if not _resolves(target, module, classes):
                missing.append(f"{relative}:{number}: :{kind}:`{target}`")
    return missing


def test_every_reference_in_docstrings_and_docs_names_something_that_exists():
    files = sorted(ROOT.glob("runner/**/*.py")) + sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
    checked = sum(len(REFERENCE.findall(path.read_text())) for path in files)
    missing = [line for path in files for line in _unresolved(path)]
    assert checked > 500, f"only {checked} references found: is the pattern still the docs' own?"
    assert missing == [], "references to nothing:\n" + "\n".join(missing)


def test_a_stale_reference_is_found():
    """The check itself: a renamed module, a moved method and a misspelt attribute are each reported."""
    assert not _resolves("runner.engine.matrix.cells", None, [])
    assert not _resolves("ACEEnvironment.execute", "runner.solutions.acebench.episodes", [])
    assert _resolves("~runner.benchmarks.acebench.environment.ACEEnvironment.execute", None, [])
    assert _resolves(".call_solution", "runner.engine.item", [])
    assert _resolves("calls", "runner.benchmarks.acebench.environment", ["ACEEnvironment"])
    assert not _resolves("callz", "runner.benchmarks.acebench.environment", ["ACEEnvironment"])
