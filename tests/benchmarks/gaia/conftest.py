"""The GAIA-shaped sample of ``tests/support/gaia_sample.py``, written in the hub's layout for each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gaia_sample import write_sample


@pytest.fixture
def gaia_root(tmp_path: Path) -> Path:
    """The sample's validation split (answers public), with ``metadata.jsonl``."""
    return write_sample(tmp_path / "gaia")


@pytest.fixture
def gaia_test_root(tmp_path: Path) -> Path:
    """The sample's test split (every answer ``"?"``), with ``metadata.parquet`` as the hub has it since October
    2025."""
    return write_sample(tmp_path / "gaia-test", split="test", metadata="parquet")


@pytest.fixture(autouse=True)
def runner_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$RUNNER_CACHE_DIR`` in the test's folder: downloads and fetched attachments never touch the user's cache."""
    path = tmp_path / "runner-cache"
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(path))
    return path
