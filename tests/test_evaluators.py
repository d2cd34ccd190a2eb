"""The evaluators of the Python API beyond the seed's forms (tests/test_seed_examples.py): the storage given as a
URI, and a script that configured no logging printing only its summary."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog

from runner import GeneralEvaluator, ResultStore
from runner.benchmarks.toy import ToyBenchmark
from runner.core.errors import ConfigError
from runner.solutions.calculator import calculator


@pytest.mark.parametrize("kind", [str, Path])
def test_storage_may_be_given_as_a_uri(tmp_path: Path, kind: type) -> None:
    run = tmp_path / "runs" / "x"
    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=calculator, show=False,
                                 storage=kind(str(run)))
    assert asyncio.run(evaluator.run()).completed == 3
    assert isinstance(evaluator.storage, ResultStore) and evaluator.storage.uri == f"file://{run}"
    assert sorted(p.name for p in (run / "records").iterdir()) == ["toy-000", "toy-001", "toy-002"]


def test_storage_of_another_kind_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"^storage must be a ResultStore \(FileEvaluatorStorage\) or a URI such as "
                       r"'runs/x', got int$"):
        GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=calculator, storage=3)


def test_a_script_without_logging_set_up_prints_only_its_summary(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """structlog unconfigured (a fresh process: see the ``unconfigured_logging`` fixture) printed a debug line per
    item; the evaluator now sets it up at warning level, once."""
    assert not structlog.is_configured()
    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=5), solution_func=calculator,
                                 storage=str(tmp_path / "run"))
    asyncio.run(evaluator.run())
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "5/5 items" in captured.out and "item.done" not in captured.out
    assert structlog.is_configured()


def test_a_script_that_set_up_logging_keeps_its_set_up(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        asyncio.run(GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=2), solution_func=calculator, show=False,
                                     storage=str(tmp_path / "run")).run())
    assert [entry["event"] for entry in logs].count("item.done") == 2
