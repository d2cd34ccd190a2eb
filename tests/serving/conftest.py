"""Fixtures of the serving tests: the embedded model converted once per machine (it is cached under
``~/.cache/runner/models``, or ``$RUNNER_MODEL_CACHE``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.serving import embedded


@pytest.fixture(scope="session")
def embedded_dir() -> Path:
    """The embedded model as a directory ``transformers serve`` loads: the real SmolLM2-135M-Instruct weights,
    downloaded and converted on the first use on this machine (about two minutes on 2 busy cores), then cached."""
    return embedded.model_dir()
