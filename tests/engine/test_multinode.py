"""A head and two worker nodes on 127.0.0.1 (``ray start`` children, :mod:`tests.support.ray_nodes`), shared by the
tests of this module: a node lost while its workers run (issue 11, item 4), and the default storage refused where
records would be scattered or lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import worker_pythonpath
from tests.engine.ray_solutions import NODE_VARIABLE
from tests.support.cli import CliResult, run_process
from tests.support.ray_nodes import REPO, LocalCluster

from runner import ResultStore


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A head without CPUs (no worker lands there), node ``a`` with 8 CPUs and node ``b`` with 2; each worker knows
    its node by ``RUNNER_TEST_NODE``."""
    with LocalCluster(tmp_path_factory.mktemp("nodes"), env={"PYTHONPATH": worker_pythonpath()}) as nodes:
        nodes.add_node("a", 8, env={NODE_VARIABLE: "a"})
        nodes.add_node("b", 2, env={NODE_VARIABLE: "b"})
        yield nodes


def runner_cli(cluster: LocalCluster, cwd: Path, *args: str, timeout: float = 300) -> CliResult:
    """``python -m runner ARGS --ray-address <the cluster>`` in ``cwd``: a process of its own, since this one
    holds the tests' session Ray."""
    return run_process(*args, "--ray-address", cluster.address, env=cluster.env, timeout=timeout, cwd=cwd)


def test_default_storage_is_refused_on_a_cluster_of_several_nodes(cluster: LocalCluster, tmp_path: Path) -> None:
    """No --storage on a cluster of three nodes: each would write ./runs to its own disk. One line, exit 2, nothing
    written."""
    done = runner_cli(cluster, tmp_path, "-b", "toy", "-B", "n_tasks=2", "-s", "calculator")
    done.error_line("no --storage given, and the default file://", "is a local path; the Ray cluster has 3 nodes",
                    "pass --storage with an object store URL (s3://bucket/prefix")
    assert list(tmp_path.iterdir()) == []


def test_default_storage_is_refused_in_a_ray_job(cli, ray_session, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """The driver of a ``ray job submit`` (Ray's job supervisor gives it RAY_JOB_CONFIG_JSON_ENV_VAR) refuses the
    default storage even on one node: ./runs would be in a working directory on the head that Ray manages."""
    monkeypatch.chdir(tmp_path)
    job = json.dumps({"runtime_env": {}, "metadata": {"job_submission_id": "raysubmit_abc", "job_name": "x"}})
    done = cli("-b", "toy", "-B", "n_tasks=2", "-s", "calculator", env={"RAY_JOB_CONFIG_JSON_ENV_VAR": job})
    done.error_line("no --storage given", "this run is the Ray job 'raysubmit_abc'", "pass --storage")
    assert list(tmp_path.iterdir()) == []
    given = cli("-b", "toy", "-B", "n_tasks=2", "-s", "calculator", "--storage", str(tmp_path / "run"),
                env={"RAY_JOB_CONFIG_JSON_ENV_VAR": job})
    assert given.returncode == 0, given.stderr


def test_a_lost_node_costs_only_its_running_items_one_attempt(cluster: LocalCluster, tmp_path: Path) -> None:
    """Items take 60 s on node a and 0.5 s on b (slow enough that b's 2 workers leave items for a's 8 however slowly
    those start). Once each of a's 8 workers runs one (another queued behind it), a's raylet is killed. Each item
    that was running there finishes ok on b at attempt 2, having run once there; the queued ones run once, on b, at
    attempt 1; nothing is a WorkerDied error (the issue: a retried item went to the dead node's other workers, one
    after the other, and was given up at attempt 3)."""
    log, run, driver_log = tmp_path / "executions.txt", tmp_path / "run", tmp_path / "driver.log"
    with open(driver_log, "wb") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "runner", "-b", "toy", "-B", "n_tasks=30", "-s",
             "tests.engine.ray_solutions:node_bound", "-S", f"log={log}", "-S", "slow_node=a", "-S", "slow_s=60",
             "-S", "fast_s=0.5", "--storage", str(run), "--workers", "10", "--ray-address", cluster.address,
             "--log-format", "json"],
            cwd=REPO, env=cluster.env, stdout=subprocess.DEVNULL, stderr=out)
    try:
        deadline = time.monotonic() + 180
        while len({line.split()[0] for line in _lines(log) if line.endswith(" a")}) < 8:
            assert driver.poll() is None and time.monotonic() < deadline, driver_log.read_text()[-3000:]
            time.sleep(0.2)
        cluster.collect()
        cluster.kill_raylet("a")
        driver.wait(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
    stderr = driver_log.read_text()
    assert driver.returncode == 0, stderr[-3000:]
    started_on_a = {line.split()[0] for line in _lines(log) if line.endswith(" a")}
    assert len(started_on_a) == 8
    records = {record.task_id: record for record in ResultStore(str(run)).iter_records()}
    assert len(records) == 30 and {record.status for record in records.values()} == {"ok"}
    assert {task for task, record in records.items() if record.attempt == 2} == started_on_a
    assert all(record.attempt == 1 for task, record in records.items() if task not in started_on_a)
    executions = Counter((line.split()[0], line.split()[2], line.split()[3]) for line in _lines(log))
    for task in records:
        runs = sorted((attempt, node) for (name, attempt, node), count in executions.items() if name == task
                      for _ in range(count))
        assert runs == ([("1", "a"), ("2", "b")] if task in started_on_a else [("1", "b")]), (task, runs)
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    died = [event for event in events if event.get("event") == "worker.died"]
    assert len(died) == 8
    assert any(event.get("event") in ("node.lost", "worker.suspect") for event in events)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def fresh_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The module's cluster's layout, of its own: the module's loses node a in the test above."""
    with LocalCluster(tmp_path_factory.mktemp("nodes"), env={"PYTHONPATH": worker_pythonpath()}) as nodes:
        nodes.add_node("a", 8, env={NODE_VARIABLE: "a"})
        nodes.add_node("b", 2, env={NODE_VARIABLE: "b"})
        yield nodes


def test_a_node_lost_mid_matrix_returns_its_items_and_no_item_runs_twice(fresh_cluster: LocalCluster,
                                                                          tmp_path: Path) -> None:
    """A matrix of two models (at an endpoint: any worker runs their cells) x one benchmark on three nodes; once
    8 of node a's workers run an item, a's raylet is killed. Every cell ends done, each item that ran on a runs
    again once on b at attempt 2, every other item runs once, and no item of either cell runs twice."""
    import yaml

    cluster = fresh_cluster
    logs = {"m1": tmp_path / "m1.txt", "m2": tmp_path / "m2.txt"}
    run, driver_log, config = tmp_path / "matrix", tmp_path / "driver.log", tmp_path / "matrix.yaml"
    config.write_text(yaml.safe_dump({
        "models": [{"model": "mock", "key": "m1", "solution_args": {"log": str(logs["m1"])}},
                   {"model": "mock:echo", "key": "m2", "solution_args": {"log": str(logs["m2"])}}],
        "benchmarks": [{"benchmark": "toy", "args": {"n_tasks": 15}}],
        "solution": "tests.engine.ray_solutions:node_bound",
        "solution_args": {"slow_node": "a", "slow_s": 60, "fast_s": 0.5},
        "storage": str(run), "worker": {"num_workers": 10}, "log_format": "json"}))
    with open(driver_log, "wb") as out:
        driver = subprocess.Popen([sys.executable, "-m", "runner", "matrix", "--config", str(config), "--ray-address",
                                   cluster.address], cwd=REPO, env=cluster.env, stdout=subprocess.DEVNULL, stderr=out)
    try:
        deadline = time.monotonic() + 180
        while len(_started_on_a(logs)) < 8:
            assert driver.poll() is None and time.monotonic() < deadline, driver_log.read_text()[-3000:]
            time.sleep(0.2)
        cluster.collect()
        cluster.kill_raylet("a")
        driver.wait(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, driver_log.read_text()[-3000:]
    manifest = json.loads((run / "matrix.json").read_text())
    assert {cell["status"] for cell in manifest["cells"]} == {"done"}
    started_on_a = _started_on_a(logs)
    for key, log in logs.items():
        records = {record.task_id: record for record in ResultStore(str(run / "cells" / key / "toy")).iter_records()}
        assert len(records) == 15 and {record.status for record in records.values()} == {"ok"}
        on_a = {task for cell, task in started_on_a if cell == key}
        assert {task for task, record in records.items() if record.attempt == 2} == on_a
        executions = Counter((line.split()[0], line.split()[2], line.split()[3]) for line in _lines(log))
        for task in records:
            runs = sorted((attempt, node) for (name, attempt, node), count in executions.items() if name == task
                          for _ in range(count))
            assert runs == ([("1", "a"), ("2", "b")] if task in on_a else [("1", "b")]), (key, task, runs)


def _started_on_a(logs: dict[str, Path]) -> set[tuple[str, str]]:
    return {(key, line.split()[0]) for key, log in logs.items() for line in _lines(log) if line.endswith(" a")}
