"""SIGTERM (what Kubernetes sends a pod it stops, and what ``timeout`` sends) stops a run as Ctrl-C does, on both
executors: the lease is released, one line says what is kept, exit status 143. Each run is a real process, the
only way to deliver a signal to a driver (on Ray, one that starts its own embedded Ray)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from tests.conftest import worker_pythonpath
from tests.support.cli import REPO, CliResult
from tests.support.ray_nodes import descendants


def command_lines(pids: Iterable[int]) -> dict[int, bytes]:
    """The command line of each process of ``pids`` that is still alive."""
    lines = {}
    for pid in pids:
        try:
            lines[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
    return lines


@pytest.mark.parametrize("executor", ["sequential", "ray"])
def test_sigterm_stops_a_run_like_ctrl_c_with_exit_143(tmp_path: Path, executor: str) -> None:
    run, log = tmp_path / "run", tmp_path / "executions.txt"
    command = [sys.executable, "-m", "runner", "-b", "toy", "-B", "n_tasks=400", "-s",
               "tests.engine.ray_solutions:slow_counted", "-S", f"log={log}", "--executor", executor,
               "--storage", str(run), "--log-format", "json", *(["--workers", "1"] if executor == "ray" else [])]
    env = {**os.environ, "PYTHONPATH": worker_pythonpath()}
    env.pop("RAY_ADDRESS", None)
    driver = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started: dict[int, bytes] = {}
    try:
        deadline = time.monotonic() + 120
        while not (run / "records").is_dir() or len(list((run / "records").iterdir())) < 5:
            assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[1][-3000:]
            started.update(command_lines(descendants(driver.pid)))
            time.sleep(0.05)
        started.update(command_lines(descendants(driver.pid)))
        driver.send_signal(signal.SIGTERM)
        stdout, stderr = driver.communicate(timeout=60)
    finally:
        driver.kill()
        # What the driver's embedded Ray left running, if anything: only its processes, by id (one whose id was
        # reused since has another command line).
        for pid, line in command_lines(started).items():
            if line == started[pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    result = CliResult(driver.returncode, stdout, stderr)
    assert result.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr and "SIGTERM received" not in stderr, stderr[-3000:]
    not_events = [line for line in result.lines() if not line.startswith("{")]
    assert not_events == ["terminated: finished records are kept; run the same command again to resume"], stderr
    assert [json.loads(line)["event"] for line in result.lines() if line.startswith("{")][-1] != "lease.not_released"
    assert not (run / "lease.json").exists()
    assert 5 <= len(list((run / "records").iterdir())) < 400
    assert stdout == ""
