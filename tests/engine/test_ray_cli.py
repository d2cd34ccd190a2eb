"""The Ray mode from the command line, each run in its own process: bad addresses, a driver killed midway and
resumed, and ``ray job submit`` / ``--ray-address`` against a head started with ``ray start --head``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import worker_pythonpath
from tests.support.ray_nodes import descendants, free_port, restoring_current_cluster

from runner import ResultStore

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def runner_env(**extra: str) -> dict[str, str]:
    """This environment, with the venv first on PATH and ``tests.engine.ray_solutions`` importable."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": worker_pythonpath()}
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    return env


def test_unreachable_ray_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "runner", "-b", "toy", "-s", "calculator", "--storage", str(run),
         "--ray-address", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, env=runner_env(), timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: cannot reach the Ray cluster at 127.0.0.1:")
    assert not run.exists()


def test_ray_missing_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Without Ray importable (hidden from this subprocess), the Ray mode says how to get it or avoid it."""
    code = ("import sys; sys.modules['ray'] = None; from runner.cli import main; "
            f"sys.exit(main(['-b', 'toy', '-s', 'calculator', '--storage', {str(tmp_path / 'run')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=runner_env(), timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: Ray is not installed; install it with pip install 'ray[default]==2.60.0', or run with --sequential"
    ]


@pytest.mark.parametrize("case", ["long TMPDIR", "TMPDIR is a file"])
def test_an_os_error_while_the_embedded_ray_starts_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    """ray#7724: a Slurm-style TMPDIR whose socket paths pass AF_UNIX's 107 bytes, and (a neighbour) a TMPDIR that
    is a file: one line naming the cause and the way out, exit 2, nothing written."""
    if case == "long TMPDIR":
        temp = tmp_path / "slurm" / "job_48151623" / ("step_" + "x" * (84 - len(str(tmp_path)) - 24))
        temp.mkdir(parents=True)
        cause = "AF_UNIX path length cannot exceed 107 bytes"
    else:
        temp = tmp_path / "a-file"
        temp.write_text("")
        cause = "NotADirectoryError"
    run = tmp_path / "run"
    env = runner_env(TMPDIR=str(temp))
    env.pop("RAY_TMPDIR", None)
    done = subprocess.run([sys.executable, "-m", "runner", "-b", "toy", "-s", "calculator", "--storage", str(run)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: cannot start an embedded Ray (") and cause in lines[0]
    assert f"set RAY_TMPDIR to a short, writable folder (e.g. RAY_TMPDIR=/tmp; Ray uses it, else TMPDIR, now {temp})" \
        in lines[0] and lines[0].endswith("or run with --sequential")
    assert not run.exists()


def test_driver_killed_midway_resumes_without_running_items_twice(tmp_path: Path) -> None:
    """SIGKILL the driver once some records exist; the same command takes the dead driver's lease over (its process
    is gone on this host) and completes the run. Only items that were in flight at the kill may have run twice (at most 2
    workers x 2 x batch, batch <= 2 for a 0.05 s solution)."""
    run, log = tmp_path / "run", tmp_path / "executions.txt"
    command = [sys.executable, "-m", "runner", "-b", "toy", "-B", "n_tasks=200", "-s", "tests.engine.ray_solutions:slow_counted",
               "-S", f"log={log}", "--storage", str(run), "--workers", "2", "--log-format", "json"]
    driver = subprocess.Popen(command, env=runner_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            started |= descendants(driver.pid)
            if (run / "records").is_dir() and len(list((run / "records").iterdir())) >= 20:
                break
            time.sleep(0.05)
        started |= descendants(driver.pid)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        for pid in started:  # the embedded Ray of the killed driver: only processes it started, by id
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    before = len(list((run / "records").iterdir()))
    assert 20 <= before < 200, "the driver was not killed midway"

    # The killed driver's process is gone on this host: the same command takes its lease over and resumes.
    done = subprocess.run(command, env=runner_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # One record per item (a write cut short by the kill may leave a hidden temp file, which is no record).
    assert ResultStore(str(run)).done_items() == {(f"toy-{i:03d}", 0) for i in range(200)}
    executions = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert set(executions) == {f"toy-{i:03d}" for i in range(200)}
    twice = [task for task, n in executions.items() if n > 1]
    assert max(executions.values()) <= 2
    assert len(twice) <= 8


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """``ray start --head`` on 127.0.0.1 with fixed ports and Ray 2.60's default token authentication. The job agent
    gets a free port too: Ray's default (52365) may be held by another Ray on this machine (the tests' embedded one),
    and then the head takes no job ("No available agent to submit job").

    It runs with ``--block`` as a child of this test, so SIGTERM to it stops exactly the processes it started (no
    machine-wide ``ray stop``). Every port is its own, the agents' too: with their defaults (52365 for the dashboard
    agent) a second Ray on the machine (the tests' session Ray) keeps the head's job agent from ever registering.
    Yields the GCS address and the dashboard (job server) URL.
    """
    gcs, dashboard, client = free_port(), free_port(), free_port()
    agents = ["--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
              "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port())]
    with restoring_current_cluster():
        log = tmp_path_factory.mktemp("head") / "head.log"
        with open(log, "wb") as out:
            head = subprocess.Popen(
                [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
                 "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), "--ray-client-server-port",
                 str(client), *agents, "--num-cpus", "2", "--disable-usage-stats"],
                env=runner_env(), stdout=out, stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 120
            while b"--block" not in log.read_bytes():
                assert head.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.5)
            yield {"gcs": f"127.0.0.1:{gcs}", "dashboard": f"http://127.0.0.1:{dashboard}"}
        finally:
            head.send_signal(signal.SIGTERM)
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                head.kill()


def submit_job(dashboard: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``ray job submit --working-dir . -- python -m runner ARGS`` (RAY_AUTH_MODE=token), again while the head's job
    agent is not registered: it registers some seconds after `ray start` returns (longer on a busy machine), and
    until then the job server refuses submissions and creates no job, as it would for a user who submits right after
    starting a head."""
    deadline = time.monotonic() + 180
    while True:
        submitted = subprocess.run(
            [str(BIN / "ray"), "job", "submit", "--address", dashboard, "--working-dir", ".", "--", "python", "-m",
             "runner", *args], cwd=REPO, env=runner_env(RAY_AUTH_MODE="token"), capture_output=True, text=True,
            timeout=300)
        if "No available agent to submit job" not in submitted.stdout + submitted.stderr:
            return submitted
        assert time.monotonic() < deadline, "the head's job agent never registered"
        time.sleep(3)


def test_ray_job_submit_and_ray_address_against_a_head(ray_head: dict[str, str], tmp_path: Path) -> None:
    """The documented commands: ``ray job submit --working-dir . -- python -m runner ...`` (the driver attaches
    through RAY_ADDRESS) and ``python -m runner --ray-address``; both with RAY_AUTH_MODE=token."""
    job_run, direct_run = tmp_path / "job-run", tmp_path / "direct-run"
    submitted = submit_job(ray_head["dashboard"], "-b", "toy", "-B", "n_tasks=10", "-s", "calculator", "--storage",
                           str(job_run), "--log-format", "json")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    assert "succeeded" in submitted.stdout + submitted.stderr
    assert len(list((job_run / "records").iterdir())) == 10
    assert (job_run / "summary.json").is_file()

    # Without --storage, the job's driver refuses the default ./runs (on the head, in a directory Ray manages).
    refused = submit_job(ray_head["dashboard"], "-b", "toy", "-B", "n_tasks=10", "-s", "calculator")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "failed" in output
    assert "error: no --storage given, and the default file://" in output
    assert "this run is the Ray job 'raysubmit_" in output

    direct = subprocess.run(
        [sys.executable, "-m", "runner", "-b", "toy", "-B", "n_tasks=10", "-s", "calculator", "--storage",
         str(direct_run), "--ray-address", ray_head["gcs"], "--log-format", "json"],
        env=runner_env(RAY_AUTH_MODE="token"), capture_output=True, text=True, timeout=300,
    )
    assert direct.returncode == 0, direct.stderr[-3000:]
    assert len(list((direct_run / "records").iterdir())) == 10
