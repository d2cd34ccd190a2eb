"""The run's own Python code, shipped to every worker by source: the modules of a folder the run names (an lm-eval
task folder, ``-B include_path``; the folder of a ``--solution module:function`` that is no installed package).

Ray sends a function or class by reference: a worker imports its module by name. A module of the user's folder,
which the driver imports from its working directory or ``PYTHONPATH``, is not there on a worker of another node (nor
on one whose Python path lacks the folder), and neither are the modules it imports: cloudpickle takes one module's
objects by value, but a module they import is still imported by name on the worker (lm-eval#2713: a task's
``utils.py`` that imports a sibling ``normalizer.py``).

A :class:`LocalCode` holds the source of the folders' Python modules: those the driver imported from them, and the
others a worker may import later (each ``*.py`` at a folder's top and in its packages, up to :data:`SPARE_BYTES`).
Unpickled in another process, it puts two import hooks on ``sys.meta_path`` there, which serve those modules by name
from their source, as the driver imported them: the modules the driver imported from the folders ahead of any
other finder, the others only where nothing else has a module of that name. Then it imports its entry modules (the
solution's module, lm-eval's task files), so that a module that still cannot be imported there (a package installed
on the driver only, a module of another folder) is one line naming it (:class:`CodeImportError`), raised while the
worker is built, before any item runs. Data files beside the modules do not travel (a task's datasets are read on
the driver only).

What is never shipped: the runner itself, and whatever lies in an installed location (the standard library,
``site-packages`` of the interpreter and of its virtual environment): every worker has its own.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import site
import socket
import sys
import sysconfig
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from runner.core.errors import CodeImportError, exception_line

OWN_PACKAGE = "runner"
"""The runner's own package, which every worker has installed (shipping it would replace the worker's own)."""

SPARE_BYTES = 4 * 1024 * 1024
"""At most this much source of the modules the driver did not import travels (the ones a worker may import later);
the modules the driver imported always do."""
SPARE_FILES = 1000
"""At most this many files of the modules the driver did not import travel."""

_PROCESS = uuid.uuid4().hex
"""This process's mark: a :class:`LocalCode` unpickled in the process that collected it installs nothing."""
_INSTALLED: set[str] = set()
"""The digests of the :class:`LocalCode` s installed in this process."""


@dataclass(frozen=True)
class Source:
    """One module's source.

    Args:
        name: the module's name as the driver imported it (lm-eval's task files: their path without ``.py``).
        path: its file on the driver (the ``__file__`` it gets on a worker, for tracebacks).
        text: its source.
        package: whether it is a package (its ``__init__.py``).
    """

    name: str
    path: str
    text: str
    package: bool = False


class LocalCode:
    """The source of the Python modules of a run's own folders, which travels with the object that needs it (see the
    module's docstring).

    Args:
        imported: the modules the driver imported from the folders (served ahead of any other finder on a worker).
        spare: the folders' other modules (served where no other finder has a module of that name).
        entries: the modules a worker imports as soon as it gets this object (the solution's module, lm-eval's task
            files), by name.
        folders: the folders, as the driver has them (for messages).

    Build one with :func:`collect`.
    """

    def __init__(self, imported: Iterable[Source], spare: Iterable[Source], entries: Iterable[str],
                 folders: Iterable[str]) -> None:
        self.imported = {source.name: source for source in imported}
        self.spare = {source.name: source for source in spare if source.name not in self.imported}
        self.entries = tuple(entries)
        self.folders = tuple(folders)
        self._origin = _PROCESS

    @property
    def digest(self) -> str:
        """A digest of every module's name, path and source (two equal digests install once)."""
        digest = hashlib.sha256()
        for group in (self.imported, self.spare):
            for name in sorted(group):
                source = group[name]
                digest.update(f"{name}\0{source.path}\0{source.package}\0".encode())
                digest.update(source.text.encode("utf-8", "surrogatepass"))
        digest.update("\0".join(self.entries).encode())
        return digest.hexdigest()

    def __getstate__(self) -> dict[str, Any]:
        return {"imported": list(self.imported.values()), "spare": list(self.spare.values()),
                "entries": self.entries, "folders": self.folders, "origin": self._origin}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["imported"], state["spare"], state["entries"], state["folders"])  # type: ignore[misc]
        self._origin = state["origin"]
        if self._origin != _PROCESS:
            self.install()
            self.check()

    def install(self) -> None:
        """Put this code's import hooks on ``sys.meta_path`` (once per process for the same code)."""
        digest = self.digest
        if digest in _INSTALLED:
            return
        namespaces = _parents(self.imported) | _parents(self.spare)
        sys.meta_path.insert(0, _SourceFinder(self.imported, namespaces - set(self.imported)))
        sys.meta_path.append(_SourceFinder(self.spare, set()))
        _INSTALLED.add(digest)

    def check(self) -> None:
        """Import every entry module (each runs its own imports), as the worker will when it first needs them.

        Raises:
            CodeImportError: one of them, or a module it imports, cannot be imported here: one line naming it, the
                entry that imports it, and the way out.
        """
        for name in self.entries:
            source = self.imported.get(name)
            shown = source.path if source is not None else name
            try:
                _import(name, source)
            except ModuleNotFoundError as exc:
                missing = exc.name or str(exc)
                raise CodeImportError(
                    f"{shown} imports {missing!r}, which cannot be imported on the worker on {socket.gethostname()} "
                    f"({exception_line(exc)}): it is no module of {', '.join(self.folders)}, which the run sends to "
                    f"its workers; install it where the workers run (their image, or the cluster's runtime_env), "
                    "or run with --sequential") from None
            except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while it is imported
                raise CodeImportError(
                    f"{shown} cannot be imported on the worker on {socket.gethostname()} ({exception_line(exc)}); "
                    "make it importable there (what it reads or imports when it is imported), or run with "
                    "--sequential") from None


def collect(folders: Iterable[str | os.PathLike[str] | None], entries: Iterable[str]) -> LocalCode | None:
    """The code of ``folders`` as the driver has it now: every module of ``sys.modules`` whose file lies in one of
    them, and the folders' other modules (their top-level ``*.py`` and regular packages, named as if the folder
    were on the Python path), outside installed locations and the runner itself.

    Args:
        folders: the folders (``None`` and folders that do not exist, or lie in an installed location, are left out).
        entries: the names of the modules a worker imports at once (see :class:`LocalCode`); those not collected
            are left out.

    Returns:
        the code, or ``None`` when the folders hold no module of either kind.
    """
    roots = list(dict.fromkeys(Path(folder).resolve() for folder in folders
                               if folder is not None and Path(folder).is_dir()))
    installed = _installed_locations()
    roots = [root for root in roots if not _inside(root, installed)]
    if not roots:
        return None
    imported: dict[str, Source] = {}
    for name, module in list(sys.modules.items()):
        if name == "__main__" or name.partition(".")[0] == OWN_PACKAGE or not _may_be_in(module, roots):
            continue
        path = _module_file(module)
        if path is not None and _inside(path, roots) and not _inside(path, installed):
            imported[name] = Source(name, str(path), _read(path), package=hasattr(module, "__path__"))
    spare: dict[str, Source] = {}
    size = 0
    for root in roots:
        for name, path, package in _tree(root):
            if name in imported or name in spare or name.partition(".")[0] == OWN_PACKAGE or _inside(path, installed):
                continue
            text = _read(path)
            size += len(text)
            if size > SPARE_BYTES or len(spare) >= SPARE_FILES:
                break
            spare[name] = Source(name, str(path), text, package)
    if not imported and not spare:
        return None
    return LocalCode(imported.values(), spare.values(), [name for name in entries if name in imported],
                     [str(root) for root in roots])


def with_code(reduced: str | tuple[Any, ...], code: LocalCode | None) -> str | tuple[Any, ...]:
    """An object's ``__reduce_ex__`` answer (``reduced``) that unpickles ``code`` before anything else of the object:
    its class, its arguments and its state may then name the modules of ``code``. With no code, ``reduced`` as
    it is."""
    if code is None or not isinstance(reduced, tuple):
        return reduced
    rebuild, arguments, *rest = reduced
    return (_rebuilt, (code, rebuild, arguments), *rest)


def _rebuilt(code: LocalCode, rebuild: Any, arguments: tuple[Any, ...]) -> Any:
    """The object ``rebuild(*arguments)``, once ``code`` (unpickled first) has installed its modules."""
    return rebuild(*arguments)


def code_of_module(module_name: Any) -> LocalCode | None:
    """The code of the folder of ``module_name``'s top-level package (see :func:`collect` and
    :func:`module_folder`), that module the entry a worker imports at once; ``None`` for a module of the runner,
    of an installed package, or without a file (``__main__``: cloudpickle sends what it defines by value)."""
    if not isinstance(module_name, str) or module_name.partition(".")[0] == OWN_PACKAGE:
        return None
    return collect([module_folder(module_name)], [module_name])


def module_folder(module_name: str) -> Path | None:
    """The folder that holds the top-level package (or module) of ``module_name``, as imported in this process: the
    folder a worker needs on its Python path to import it; ``None`` for a module without a file (built in, a
    namespace package, ``__main__``) or not imported."""
    top = module_name.partition(".")[0]
    module = sys.modules.get(top)
    path = _module_file(module) if module is not None and top != "__main__" else None
    if path is None:
        return None
    return path.parent.parent if hasattr(module, "__path__") else path.parent


def _may_be_in(module: ModuleType, roots: list[Path]) -> bool:
    """Whether ``module``'s file may lie in one of ``roots``, by its path as written (resolving the path of every
    module of a process costs two system calls each); a file whose written path lies elsewhere counts when it is a
    link."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return False
    written = os.path.abspath(file)
    return any(written.startswith(f"{root}{os.sep}") for root in roots) or os.path.realpath(written) != written


def _module_file(module: ModuleType | None) -> Path | None:
    """The ``.py`` file a module was imported from, resolved; ``None`` for one without (built in, compiled, a
    namespace package)."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return None
    path = Path(file)
    return path.resolve() if path.is_file() else None


def _read(path: Path) -> str:
    """A module's source, decoded as Python decodes it (its encoding declaration, else UTF-8)."""
    return importlib.util.decode_source(path.read_bytes())


def _tree(root: Path) -> Iterator[tuple[str, Path, bool]]:
    """``(name, file, is package)`` of each module importable from ``root`` as a Python path entry: its top-level
    ``*.py`` and its regular packages (folders with an ``__init__.py``), in name order; hidden folders and
    ``__pycache__`` left out."""

    def walk(folder: Path, prefix: str) -> Iterator[tuple[str, Path, bool]]:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.is_file() and entry.suffix == ".py" and entry.stem != "__init__" and entry.stem.isidentifier():
                yield f"{prefix}{entry.stem}", entry.resolve(), False
            elif entry.is_dir() and entry.name.isidentifier() and (entry / "__init__.py").is_file():
                yield f"{prefix}{entry.name}", (entry / "__init__.py").resolve(), True
                yield from walk(entry, f"{prefix}{entry.name}.")

    yield from walk(root, "")


def _installed_locations() -> list[Path]:
    """Where installed code lives: the standard library and ``site-packages`` of this interpreter and of its virtual
    environment, and the user's site folder (not the bare prefixes: an image's code often lies under ``/usr``)."""
    found: set[str] = set()
    for scheme_paths in (sysconfig.get_paths(), sysconfig.get_paths(vars={"base": sys.base_prefix,
                                                                          "platbase": sys.base_exec_prefix})):
        found.update(value for key, value in scheme_paths.items() if key in ("stdlib", "platstdlib", "purelib",
                                                                              "platlib"))
    try:
        found.update(site.getsitepackages())
    except AttributeError:  # a virtual environment's site module may lack it
        pass
    found.add(site.getusersitepackages())
    return [Path(location).resolve() for location in found if location]


def _inside(path: Path, folders: Iterable[Path]) -> bool:
    """Whether ``path`` is one of ``folders`` or lies in one."""
    return any(path == folder or folder in path.parents for folder in folders)


def _parents(sources: dict[str, Source]) -> set[str]:
    """Every parent package name of the dotted names of ``sources`` (``a`` and ``a.b`` for ``a.b.c``)."""
    parents = set()
    for name in sources:
        if name.startswith("/"):
            continue  # lm-eval's task files are named by their path: no parent package
        parts = name.split(".")
        parents.update(".".join(parts[:index]) for index in range(1, len(parts)))
    return parents


def _import(name: str, source: Source | None) -> None:
    """Import the module ``name`` here: by the import system, or, for a module named by its file's path (lm-eval's
    task files, whose names may hold dots), from its source under that name, as lm-eval loads it."""
    if name in sys.modules:
        return
    if source is None or not name.startswith("/"):
        importlib.import_module(name)
        return
    loader = _SourceLoader(source)
    spec = importlib.util.spec_from_file_location(name, source.path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise


class _SourceLoader(importlib.abc.InspectLoader):
    """Executes one :class:`Source` (compiled under the driver's path, so tracebacks name the file, and its source
    served to ``linecache`` and ``inspect``)."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def get_source(self, fullname: str) -> str:
        return self.source.text

    def is_package(self, fullname: str) -> bool:
        return self.source.package

    def get_code(self, fullname: str) -> CodeType:
        return compile(self.source.text, self.source.path, "exec", dont_inherit=True)

    def exec_module(self, module: ModuleType) -> None:
        exec(self.get_code(module.__name__), module.__dict__)  # noqa: S102 - the run's own module, as an import runs it


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of ``sources`` by name, whatever path their parent package has; ``namespaces``: parent
    packages that are no module of the folders, served as empty namespace packages where no other finder has
    them."""

    def __init__(self, sources: dict[str, Source], namespaces: set[str]) -> None:
        self.sources = sources
        self.namespaces = namespaces

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is not None:
            return importlib.util.spec_from_file_location(
                fullname, source.path, loader=_SourceLoader(source),
                submodule_search_locations=[] if source.package else None)
        if fullname in self.namespaces and importlib.machinery.PathFinder.find_spec(fullname, path) is None:
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            return spec
        return None
