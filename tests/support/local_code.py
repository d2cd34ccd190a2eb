"""Test helpers for the user's own code (a folder of modules a test imports in this process)."""

from __future__ import annotations

import sys
from pathlib import Path


def drop_modules_of(folder: Path) -> None:
    """Forget the modules this process imported from ``folder`` (and lm-eval's task files there), so that a later
    test that imports a module of the same name from its own folder gets its own."""
    root = folder.resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and root in Path(file).resolve().parents:
            del sys.modules[name]
