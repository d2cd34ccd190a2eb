"""Fixtures for the ACEBench tests: a writable copy of some shared data files, a loopback HTTP server over a
folder, and a run of the reference solution."""

from __future__ import annotations

import asyncio
import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.solutions.reference import reference
from runner.benchmarks.acebench import ACEBenchmark
from runner.evaluators import GeneralEvaluator
from runner.report import Summary
from runner.storage.store import ResultStore


@pytest.fixture
def data_copy(acebench_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the English normal_atom_bool and special_irrelevant files (to break in tests)."""
    root = tmp_path / "data"
    for relative in ("data_en/data_normal_atom_bool.json", "data_en/possible_answer/data_normal_atom_bool.json",
                     "data_en/data_special_irrelevant.json", "data_en/possible_answer/data_special_irrelevant.json"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(acebench_dir / relative, root / relative)
    return root


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """An HTTP server on 127.0.0.1 serving a folder; yields (folder, base URL). Stopped after the test."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        """Keep test output clean."""


@pytest.fixture
def run_reference() -> Any:
    """A function running a benchmark with the built-in reference solution through the sequential evaluator."""

    def run(benchmark: ACEBenchmark, storage: Path) -> Summary:
        evaluator = GeneralEvaluator(name="acebench", benchmark=benchmark, storage=ResultStore(str(storage)),
                                     solution_func=reference, show=False, progress_bar=False)
        return asyncio.run(evaluator.run())

    return run
