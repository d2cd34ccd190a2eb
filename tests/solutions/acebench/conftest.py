"""Fixtures for the ACEBench agent's tests: real ACEBench tasks from the shared data, and a second scripted model
server for the simulated user.

The scripted servers stand in for model servers (vLLM, OpenAI) because no language model can run on the test
machines: everything on our side of the HTTP connection is the real code, only the model's words are scripted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.benchmarks.acebench import ACEBenchmark
from runner.core.task import Task
from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def ace_task(acebench_dir: Path) -> Callable[..., Task]:
    """``ace_task(task_id, language="en", scoring="official")``: that task, fresh, from the shared data."""

    def load(task_id: str, language: str = "en", scoring: str = "official") -> Task:
        category = task_id.rsplit("_", 2 if "normal_multi_turn" in task_id else 1)[0]
        benchmark = ACEBenchmark(data_dir=str(acebench_dir), language=language, categories=category,
                                 scoring=scoring)
        return next(task for task in benchmark if task.id == task_id)

    return load


@pytest.fixture
def user_server() -> Iterator[ScriptedModelServer]:
    """A second scripted server on 127.0.0.1, serving the model ``user`` (the simulated user's)."""
    with ScriptedModelServer(models=["user"]) as server:
        yield server
