"""Run ``python -m runner`` as a user would: a real subprocess from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def runner_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m runner ARGS`` with JSON logs, from the repository root (so ``tests.support`` imports)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "runner", *args], cwd=REPO, env=full_env, capture_output=True, text=True,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return runner_cli
