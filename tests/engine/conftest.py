"""Fixtures of the engine tests: one real local Ray for the whole session (never ``local_mode``).

It declares 2 CPUs (the machine's), and fake accelerators so that worker specs can be checked without hardware: one
GPU, 2 units of a custom resource ``custom`` and the accelerator type ``T4``. Its workers can import the helper module
``tests.engine.ray_solutions`` (the repository root is put on their ``PYTHONPATH``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_RESOURCES = {"custom": 2.0, "accelerator_type:T4": 1.0}


def worker_pythonpath() -> str:
    """``PYTHONPATH`` that lets Ray workers and CLI subprocesses import ``tests.engine.ray_solutions``."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[object]:
    """A local Ray shared by every test that needs one; shut down at the end of the session."""
    import ray

    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        resources=FAKE_RESOURCES,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": worker_pythonpath()}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()
