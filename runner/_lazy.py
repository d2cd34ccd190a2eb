"""Names a package's face loads on first use (the package-face convention of docs/architecture.md, "Package faces").

A package whose public names live in modules that are costly to import (Ray, pyarrow, torch, the OpenAI client)
lists them in ``_LAZY = {name: module}`` and ends its ``__init__.py`` with::

    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

so that ``import runner.engine`` loads none of them and ``runner.engine.RayExecutor`` loads its module once.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, table: dict[str, str],
                 names: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for the package ``package`` (its ``__name__``).

    Args:
        package: the package's dotted name, for the error of an unknown name.
        table: each lazily loaded name -> the dotted name of the module that defines it.
        names: the package's ``globals()``: a loaded name is kept there, so it is looked up once.

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises ``AttributeError`` for a name neither the package nor
        ``table`` has, as Python's own lookup does.
    """

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(table[name]), name)
        names[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*names, *table})

    return __getattr__, __dir__
