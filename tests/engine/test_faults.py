"""Nothing a solution does stops the run (issue 11, item 1), sequentially and on a local Ray: every way out of a
solution but a return, an event loop blocked for a while or for good, a worker over its memory limit, values that
JSON, Parquet or a mean cannot take as they are (issue 27, item 1); and the heartbeat that keeps a run from being
silent."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from tests.engine import ray_solutions

from runner import (FileEvaluatorStorage, GeneralEvaluator, MetricBase, MetricType, RayEvaluator, ResultStore,
                    SolutionSpec)
from runner.benchmarks.toy import ToyBenchmark
from runner.solutions.calculator import calculator
from runner.engine import progress as progress_module
from tests.support.cli import REPO
from runner.engine.progress import Progress
from runner.models import ChatRequest, MockReply, MockToolCall

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


def test_ctrl_c_still_stops_a_sequential_run_with_exit_130(tmp_path: Path) -> None:
    """A real interrupt is not the solution's: SIGINT ends the run (items run on a loop of their own, --timeout),
    finished records stay, and the same command resumes."""
    run, log = tmp_path / "run", tmp_path / "executions.txt"
    command = [sys.executable, "-m", "runner", "-b", "toy", "-B", "n_tasks=200", "-s",
               "tests.engine.ray_solutions:slow_counted", "-S", f"log={log}", "--sequential", "--timeout", "30",
               "--storage", str(run), "--log-format", "json"]
    # A Ctrl-C reaches a command run from a terminal; tests started in the background (`pytest &` from a script)
    # hand their children SIGINT ignored, so the child gets the default disposition back first.
    driver = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (run / "records").is_dir() or len(list((run / "records").iterdir())) < 5:
        assert driver.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    driver.send_signal(signal.SIGINT)
    _, stderr = driver.communicate(timeout=60)
    assert driver.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == ("interrupted: finished records are kept; run the same command again "
                                               "to resume")
    assert 5 <= len(list((run / "records").iterdir())) < 200


async def test_an_item_that_blocks_the_loop_is_abandoned_and_the_next_ones_run_on_a_fresh_loop(tmp_path: Path):
    """In process: the blocked item is a timeout once past its limit (plus the grace), not when it unblocks."""
    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=9), show=False, timeout=0.5,
                                 solution_func=SolutionSpec(ray_solutions.misbehaving, {"block_s": 20}),
                                 storage=FileEvaluatorStorage(str(tmp_path / "run")))
    started = time.monotonic()
    await evaluator.run()
    assert time.monotonic() - started < 15
    assert outcome(evaluator.storage) == expected(9)


class BlockingMetric(MetricBase):
    """An async metric that blocks its event loop (a synchronous HTTP client, here ``time.sleep``)."""

    def __init__(self) -> None:
        super().__init__(name="judge", metric_type=MetricType.NUMERICAL)

    async def __call__(self, solution: Any) -> float:
        time.sleep(30)
        return 1.0


async def test_a_metric_that_blocks_the_loop_past_its_limit_is_a_timeout(tmp_path: Path) -> None:
    class Judged(ToyBenchmark):
        def __iter__(self):
            for task in super().__iter__():
                yield dataclasses.replace(task, metrics=[BlockingMetric()]) if task.id == "toy-001" else task

    evaluator = GeneralEvaluator(benchmark=Judged(n_tasks=3), solution_func=calculator, show=False,
                                 metric_timeout=0.3, storage=FileEvaluatorStorage(str(tmp_path / "run")))
    started = time.monotonic()
    await evaluator.run()
    assert time.monotonic() - started < 10
    records = {r.task_id: r for r in evaluator.storage.iter_records()}
    assert {task: r.status for task, r in records.items()} == {"toy-000": "ok", "toy-001": "timeout", "toy-002": "ok"}
    assert "by task 'toy-001' (repeat 0) in its metric 'judge'" in records["toy-001"].error.message
    assert "past its 0.3 s limit" in records["toy-001"].error.message


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
    # The oldest item's age grows from beat to beat (rounded to 0.1 s; the first beat may come early on a busy host).
    ages = [beat["oldest_s"] for beat in beats if beat["in_flight"] == 2]
    assert ages == sorted(ages) and ages[-1] >= 0.1
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
    waiting = [beat for beat in logs if beat["event"] == "run.heartbeat" and beat["in_flight"]]
    assert len(waiting) >= 3
    # In flight: the hanging item, and once it ends the next one too while its record is written.
    assert {(beat["oldest_task_id"], beat["done"]) for beat in waiting} == {("toy-001", 1)}
    assert {beat["in_flight"] for beat in waiting} <= {1, 2}
    assert max(beat["oldest_s"] for beat in waiting) >= 0.6


pytestmark_ray = pytest.mark.usefixtures("ray_session")


@pytestmark_ray
def test_ray_records_every_way_out_and_replaces_a_worker_whose_loop_is_blocked(tmp_path: Path) -> None:
    """Two workers, four items in flight each. Items 6 and 7 block their worker's loop: each is a timeout record,
    its worker is replaced, and the items in flight with it run again without an attempt charged."""
    evaluator = RayEvaluator(benchmark=ToyBenchmark(n_tasks=16), show=False, timeout=1.0, max_workers=2,
                             max_concurrency=4, solution_func=SolutionSpec(ray_solutions.misbehaving, {"block_s": 20}),
                             storage=FileEvaluatorStorage(str(tmp_path / "run")))
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        asyncio.run(evaluator.run())
    assert time.monotonic() - started < 90
    store = evaluator.storage
    assert outcome(store) == expected(16)
    assert all(r.attempt == 1 for r in store.iter_records())
    blocked = {r.task_id: r for r in store.iter_records() if r.status == "timeout"}
    for task_id, record in blocked.items():
        assert f"by task {task_id!r} (repeat 0) in its solution (at solve, ray_solutions.py:" in record.error.message
        assert record.worker["actor_id"] and record.worker["node_id"]
    alarms = [entry for entry in logs if entry["event"] == "worker.alarm"]
    assert sorted(entry["kind"] for entry in alarms) == ["blocked", "blocked"]
    assert evaluator.executor.deaths == 2


@pytestmark_ray
def test_ray_memory_limit_makes_the_overrun_an_error_record_and_replaces_the_worker(tmp_path: Path) -> None:
    log = tmp_path / "executions.txt"
    evaluator = RayEvaluator(benchmark=ToyBenchmark(n_tasks=6), show=False, max_workers=1,
                             memory_limit="700MiB", storage=FileEvaluatorStorage(str(tmp_path / "run")),
                             solution_func=SolutionSpec(ray_solutions.memory_hog, {"log": str(log)}))
    asyncio.run(evaluator.run())
    records = {r.task_id: r for r in evaluator.storage.iter_records()}
    assert {task_id: r.status for task_id, r in records.items()} == {
        **{f"toy-{i:03d}": "ok" for i in range(6)}, "toy-002": "error"}
    hog = records["toy-002"]
    assert hog.error.type == "MemoryLimitExceeded" and hog.attempt == 1
    assert "over the 700 MiB --memory-limit while task 'toy-002' (repeat 0) ran its solution" in hog.error.message
    assert Counter(line.split()[0] for line in log.read_text().splitlines())["toy-002"] == 1
    assert evaluator.executor.deaths == 1


async def test_processes_a_sequential_solution_leaves_behind_end_with_the_run(tmp_path: Path) -> None:
    """Each item starts ``sleep`` and never waits for it (12 items: 12 children, which used to outlive the run under
    PID 1); a neighbour: a child that starts a grandchild in a session of its own. The run ends them all and says
    so; a process the solution's constructor started is the solution's own and stays."""
    import subprocess

    import psutil

    started: list[int] = []

    class Leaky:
        def __init__(self) -> None:
            self.own = subprocess.Popen(["sleep", "60"])

        def __call__(self, task: Any) -> int:
            child = subprocess.Popen(["sleep", "60"])
            started.append(child.pid)
            if task.id == "toy-000":
                spawner = subprocess.Popen([sys.executable, "-c", "import subprocess, time; print(subprocess.Popen("
                                            "['sleep', '60'], start_new_session=True).pid, flush=True); "
                                            "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
                assert spawner.stdout is not None
                started.extend([spawner.pid, int(spawner.stdout.readline())])
            return 0

    solution = Leaky()
    with structlog.testing.capture_logs() as logs:
        await GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=12), solution_func=solution,
                               show=False, storage=FileEvaluatorStorage(str(tmp_path / "run"))).run()
    alive = [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert alive == [] and len(started) == 14
    [ended] = [entry for entry in logs if entry["event"] == "run.child_processes"]
    assert ended["ended"] == 14 and set(ended["names"]) == {"sleep", Path(sys.executable).name}  # the grandchild too
    assert solution.own.poll() is None
    solution.own.kill()
    solution.own.wait()


NINES = "9" * 400
"""The answer of 400 nines that ``abs(int(answer) - gold)`` met (traceroot-py PR #161)."""


def _half_pairs(request: ChatRequest) -> MockReply:
    """The scripted model of issue 27's values: on a task's first turn a call of ``echo`` whose arguments hold half
    of a surrogate pair as the model wrote it (the JSON escape); once the tool answered, ``"\\ud835<number>"`` (as
    inspect_ai PR #2316 met it): the right number, or 400 nines on tasks d1 and d4."""
    task = int(re.search(r"What is (\d+)", str(request.messages[0]["content"])).group(1))
    if not request.count("tool"):
        return MockReply(tool_calls=[MockToolCall(name="echo", arguments='{"text": "\\ud835 bold"}')])
    return MockReply(content="\ud835" + (NINES if task in (1, 4) else str(task * task)))


@pytest.mark.parametrize("executor", ["sequential", "ray"])
def test_values_json_parquet_or_a_mean_cannot_take_are_stored_and_the_run_and_its_resume_finish(
        executor: str, cli: Any, model_server: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Issue 27, item 1, through the command line on both executors: a model's reply of ``"\\ud835<number>"`` and
    a metric's ``abs(int(answer) - gold)`` for 400 nines stopped the run (2 of 6 records, no summary.json; every
    resume crashed on the same item; ``report`` exited 1). Their neighbours ride along: half a pair in a tool call's
    arguments (as the model wrote them) and in a tool's result sent back to the model, and the 400 nines in a
    ``CORPUS`` metric's per-item pair. Every record is written, shards included; the text is well-formed (U+FFFD
    for each lone surrogate); the integers are exact and left out of the mean, counted ``too_large``."""
    mode = ["--sequential"] if executor == "sequential" else []
    if executor == "ray":
        request.getfixturevalue("ray_session")
    model_server.set_policy(_half_pairs)
    storage = tmp_path / "run"
    args = ["-b", "tests.support.solutions:DistanceBenchmark", "-s", "tests.support.solutions:echo_agent",
            "--model", "vllm:scripted", "--model-base-url", model_server.url, "--storage", str(storage),
            "--shards", "on", "--html", *mode]
    first = cli(*args, env={"RAY_ADDRESS": ""})
    assert first.returncode == 0, first.stderr[-3000:]
    assert (first.event("run.finished")["executed"], first.event("run.finished")["errors"]) == (6, 0)

    summary = json.loads((storage / "summary.json").read_text())
    distance = summary["metrics"]["distance"]
    assert (distance["n"], distance["mean"], distance["unusable"]["too_large"]) == (4, 0.0, 2)
    assert summary["metrics"]["answer_and_gold"]["n"] == 6 and summary["score"] == pytest.approx(4 / 6)
    assert "metric 'distance': 2 of 6 results could not be used and are left out of its mean (2 too_large)" \
        in summary["notes"]
    assert list(storage.glob("shards/*.parquet"))
    records = {r.task_id: r for r in ResultStore(str(storage)).iter_records()}
    nines = int(NINES)
    four = records["d4"]
    assert (four.status, four.output) == ("ok", "\ufffd" + NINES)
    assert [(m.name, m.result) for m in four.metrics] == [("distance", nines - 16), ("answer_and_gold", [nines, 16])]
    assert four.solution_meta == {"tool_arguments": [{"text": "\ufffd bold"}]}
    assert json.loads(four.trajectory[2]["content"]) == {"echoed": "\ufffd bold", "api": "\ufffd from the API"}
    assert records["d3"].output == "\ufffd9"
    sent = [json.dumps(r.body, ensure_ascii=False) for r in model_server.requests if r.path.endswith("/completions")]
    assert sum("\ufffd from the API" in body for body in sent) == 6
    assert str(nines - 16) in (storage / "results.csv").read_text()
    assert str(nines - 16) in (storage / "report.html").read_text()

    again = cli(*args, env={"RAY_ADDRESS": ""})
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.event("run.finished")["executed"] == 0
    report = cli("report", str(storage))
    assert report.returncode == 0, report.stderr[-3000:]
    assert "2 too_large" in report.stdout
    status = cli("status", str(storage), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["done"] == 6
