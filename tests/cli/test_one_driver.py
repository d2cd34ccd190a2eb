"""One run, one driver, through the CLI: two drivers started at once on one run directory (a local disk, S3, GCS and
Azure Blob through their emulators on loopback), the lease renewed while a run executes, a driver whose run was
taken over stops with exit status 3."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from runner.storage import ResultStore
from runner.storage.lease import LEASE
from tests.support.cli import REPO, CliResult
from tests.support.emulators import STORES

SLOW = ["--benchmark", "toy", "--solution", "tests.support.solutions:counting_calculator", "--sequential",
        "--log-format", "json"]


def _storage(backend: str, tmp_path, request) -> tuple[str, dict[str, str]]:
    if backend == "local":
        return str(tmp_path / "run"), {}
    reached = request.getfixturevalue("object_stores").open(backend)
    return reached.uri("runs/toy"), dict(reached.env)


def _start(storage: str, env: dict[str, str], *flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runner", *SLOW, "--storage", storage, *flags], cwd=REPO,
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("backend", ["local", *STORES])
def test_two_drivers_started_at_once_one_runs_and_the_other_is_refused(backend, tmp_path, request):
    storage, env = _storage(backend, tmp_path, request)
    calls = tmp_path / "calls.txt"
    env.update({"RUNNER_TEST_CALLS": str(calls), "RUNNER_TEST_DELAY": "0.05"})
    drivers = [_start(storage, env) for _ in range(2)]
    outputs = [driver.communicate(timeout=180) for driver in drivers]
    results = [CliResult(driver.returncode, *output) for driver, output in zip(drivers, outputs)]
    assert sorted(result.returncode for result in results) == [0, 2], [r.stderr[-1000:] for r in results]
    winner, = (driver for driver, result in zip(drivers, results) if result.returncode == 0)
    refused, = (result for result in results if result.returncode == 2)
    refused.error_line("is in use by a driver on host ", f"(pid {winner.pid}) since ", "(its lease is alive until ",
                       "nothing was written", "--take-over")

    executions = [line.split() for line in calls.read_text().splitlines()]
    assert Counter(task for task, _ in executions) == Counter({f"toy-{i:03d}": 1 for i in range(100)})
    assert {int(pid) for _, pid in executions} == {winner.pid}
    store = ResultStore(storage)
    manifest = json.loads(store.read_file("run.json"))
    assert {record.run_id for record in store.iter_records()} == {manifest["run_id"]}
    summary = json.loads(store.read_file("summary.json"))
    assert (summary["expected"], summary["completed"], summary["duplicate_tasks"]) == (100, 100, 0)
    assert store.read_file(LEASE) is None


def test_the_lease_is_renewed_while_the_run_executes_and_released_at_its_end(tmp_path, cli):
    storage, calls = tmp_path / "run", tmp_path / "calls.txt"
    env = {"RUNNER_TEST_CALLS": str(calls), "RUNNER_TEST_DELAY": "0.04"}
    driver = _start(str(storage), env, "--lease-ttl", "1")
    heartbeats: set[str] = set()
    refused = status = None
    started = None
    while driver.poll() is None:
        try:
            lease = json.loads((storage / LEASE).read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
            continue
        heartbeats.add(lease["heartbeat_at"])
        started = started or time.monotonic()
        if refused is None and time.monotonic() - started > 1.5:   # older than the ttl: alive only if renewed
            refused = cli(*SLOW, "--storage", str(storage), env=env)
            status = json.loads(cli("status", str(storage), "--json").stdout)
        time.sleep(0.05)
    assert driver.returncode == 0, driver.communicate()[1][-2000:]
    assert refused is not None, "the run ended before the lease outlived its ttl"
    refused.error_line(f"(pid {driver.pid}) since ", "its lease is alive until")
    assert (status["driver"]["pid"], status["driver"]["state"], status["driver"]["alive"]) == (driver.pid, "alive",
                                                                                               True)
    assert len(heartbeats) >= 4
    assert not (storage / LEASE).exists()
    assert len(calls.read_text().splitlines()) == 100


def test_a_driver_whose_run_is_taken_over_stops_with_exit_3(tmp_path, cli):
    """Another driver replaces the lease mid-run (as a take-over after a lapse would): this one stops at its next
    renewal, and the records it wrote stay."""
    storage = tmp_path / "run"
    env = {"RUNNER_TEST_CALLS": str(tmp_path / "calls.txt"), "RUNNER_TEST_DELAY": "0.03"}
    other = {"token": "f" * 32, "host": "other-host", "pid": 4242, "run_id": None,
             "since": "2026-01-01T00:00:00+00:00", "heartbeat_at": "2026-01-01T00:00:00+00:00",
             "expires_at": "2999-01-01T00:00:00+00:00", "ttl_s": 60.0}

    def take_over() -> None:
        while len(list((storage / "records").glob("*/0.json"))) < 10:
            time.sleep(0.01)
        (storage / LEASE).write_text(json.dumps(other))

    thief = threading.Thread(target=take_over, daemon=True)
    thief.start()
    result = cli(*SLOW, "--storage", str(storage), "--lease-ttl", "1", env=env)
    thief.join(timeout=5)
    result.fault_line("a driver on host other-host (pid 4242) since 2026-01-01T00:00:00+00:00 took ",
                      "over after this driver's lease lapsed", "this driver stopped; records written so far are kept")
    assert 10 <= len(list((storage / "records").glob("*/0.json"))) < 100
    assert json.loads((storage / LEASE).read_text())["host"] == "other-host"


def test_status_says_how_a_run_left_with_its_lease_goes_on(tmp_path, cli):
    """A driver killed on this host: the same command resumes (its lease is taken over without --take-over), expired
    or not. A lease of another host that expired: --take-over. Each as status says it, and as the run does it."""
    storage = tmp_path / "run"
    toy = ["--benchmark", "toy", "--solution", "calculator", "--sequential", "--limit", "3", "--storage", str(storage)]
    assert cli(*toy).returncode == 0
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = {"token": "0" * 32, "host": socket.gethostname(), "pid": int(child.stdout), "run_id": None,
              "since": "2026-01-01T00:00:00+00:00", "heartbeat_at": "2026-01-01T00:00:00+00:00",
              "expires_at": "2026-01-01T00:01:00+00:00", "ttl_s": 60.0}
    (storage / LEASE).write_text(json.dumps(killed))
    status = cli("status", str(storage))
    assert status.stdout.splitlines()[1] == (
        f"driver: a driver on host {socket.gethostname()} (pid {killed['pid']}) since 2026-01-01T00:00:00+00:00, its "
        "process is gone (killed); the same command on this host resumes (it takes the lease over)")
    assert json.loads(cli("status", str(storage), "--json").stdout)["driver"]["state"] == "driver gone"
    assert cli(*toy).returncode == 0

    (storage / LEASE).write_text(json.dumps({**killed, "host": "other-host", "token": "1" * 32}))
    assert cli("status", str(storage)).stdout.splitlines()[1] == (
        "driver: a driver on host other-host (pid {}) since 2026-01-01T00:00:00+00:00, its lease expired at "
        "2026-01-01T00:01:00+00:00 (killed, or cut off from the storage); if it no longer runs, the same command "
        "with --take-over resumes".format(killed["pid"]))
    assert cli(*toy).returncode == 2
    assert cli(*toy, "--take-over").returncode == 0
