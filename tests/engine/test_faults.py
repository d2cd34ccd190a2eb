"""Nothing a solution does stops the run (issue 11, item 1), sequentially and on a local Ray: every way out of a
solution but a return, an event loop blocked for a while or for good, a worker over its memory limit; and the
heartbeat that keeps a run from being silent."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from tests.engine import ray_solutions

from runner import FileEvaluatorStorage, GeneralEvaluator, ResultStore, SolutionSpec
from runner.benchmarks.toy import ToyBenchmark
from runner.engine import progress as progress_module
from runner.engine.progress import Progress

EXPECTED = {
    1: ("error", "SystemExit"),
    2: ("error", "SystemExit"),
    3: ("error", "GeneratorExit"),
    4: ("error", "CancelledError"),
    5: ("error", "Quit"),
    6: ("timeout", "EventLoopBlocked"),
    7: ("timeout", "EventLoopBlocked"),
}
"""What ``ray_solutions.misbehaving`` leaves in the record of each task index (the others are ok)."""


def outcome(store: ResultStore) -> dict[int, tuple[str, str | None]]:
    """(status, error type) of every record, by task index."""
    return {ray_solutions.task_index_of(r.task_id): (r.status, r.error.type if r.error else None)
            for r in store.iter_records()}


def expected(n_tasks: int) -> dict[int, tuple[str, str | None]]:
    return {index: EXPECTED.get(index, ("ok", None)) for index in range(n_tasks)}


def test_sequential_cli_records_every_way_out_of_a_solution_and_ends_with_a_report(cli_process, tmp_path: Path):
    """The issue: ``--sequential`` ended with exit status 0 after 3 of 10 records and no report when a solution
    called sys.exit(); a blocked loop was recorded ok after 15 s, and one blocked for good hung the run."""
    run = tmp_path / "run"
    started = time.monotonic()
    done = cli_process("-b", "toy", "-B", "n_tasks=10", "-s", "tests.engine.ray_solutions:misbehaving",
                       "-S", "block_s=15", "--sequential", "--timeout", "1", "--storage", str(run),
                       "--log-format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 60
    store = ResultStore(str(run))
    assert outcome(store) == expected(10)
    blocked = next(r for r in store.iter_records() if r.task_id == "toy-006")
    assert "the event loop was blocked for" in blocked.error.message
    assert "by task 'toy-006' (repeat 0) in its solution (at solve, ray_solutions.py:" in blocked.error.message
    assert "past its 1 s limit" in blocked.error.message
    assert (run / "summary.json").is_file()
    assert done.event("run.finished")["errors"] == 7


async def test_an_item_that_blocks_the_loop_is_abandoned_and_the_next_ones_run_on_a_fresh_loop(tmp_path: Path):
    """In process: the blocked item is a timeout once past its limit (plus the grace), not when it unblocks."""
    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=9), show=False, timeout=0.5,
                                 solution_func=SolutionSpec(ray_solutions.misbehaving, {"block_s": 20}),
                                 storage=FileEvaluatorStorage(str(tmp_path / "run")))
    started = time.monotonic()
    await evaluator.run()
    assert time.monotonic() - started < 15
    assert outcome(evaluator.storage) == expected(9)


def test_the_heartbeat_names_the_items_in_flight_and_the_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    with structlog.testing.capture_logs() as logs:
        progress = Progress(3, bar=False, heartbeat_s=0.05)
        progress.sent(("a", 0))
        time.sleep(0.02)
        progress.sent(("b", 1))
        time.sleep(0.2)
        progress.advance("error", item=("a", 0))
        time.sleep(0.1)
        progress.close()
        time.sleep(0.1)
        count = len(logs)
    beats = [entry for entry in logs if entry["event"] == "run.heartbeat"]
    assert len(beats) == count and len(beats) >= 4
    assert beats[0]["in_flight"] == 2 and beats[0]["oldest_task_id"] == "a" and beats[0]["oldest_repeat"] == 0
    assert beats[0]["oldest_s"] >= 0.04
    last = beats[-1]
    assert (last["in_flight"], last["done"], last["errors"], last["oldest_task_id"]) == (1, 1, 1, "b")
    assert len([entry for entry in logs if entry["event"] == "run.heartbeat"]) == len(beats)   # none after close


async def test_a_run_whose_item_hangs_is_not_silent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With no timeout, an item that hangs holds the run; the driver still says every heartbeat what it waits
    for."""
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.2)

    async def hangs(task: Any) -> int:
        await asyncio.sleep(1.0 if task.id == "toy-001" else 0)
        return 0

    with structlog.testing.capture_logs() as logs:
        await GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=hangs, show=False,
                               storage=FileEvaluatorStorage(str(tmp_path / "run"))).run()
    beats = [entry for entry in logs if entry["event"] == "run.heartbeat"]
    assert len(beats) >= 3
    assert {(beat["in_flight"], beat["oldest_task_id"]) for beat in beats[:3]} == {(1, "toy-001")}
    assert beats[-1]["oldest_s"] >= 0.4
