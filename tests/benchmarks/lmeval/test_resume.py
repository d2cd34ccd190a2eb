"""A Ray run of lm-eval tasks killed midway resumes with the same command and another number of workers: no
document with a record is computed again, every record written before the kill is kept as it was, and the numbers
are lm-eval's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.benchmarks.lmeval.compare import assert_same_as_lm_eval
from tests.benchmarks.lmeval.conftest import EMBEDDED, N_DOCS, OFFLINE, TASKS
from tests.conftest import worker_pythonpath
from tests.support.ray_nodes import descendants

BIN = Path(sys.executable).parent


def finished(stderr: str) -> dict:
    """The ``run.finished`` event of a run logged as JSON."""
    for line in stderr.splitlines():
        if '"run.finished"' in line:
            return json.loads(line)
    raise AssertionError(f"no run.finished in {stderr[-2000:]}")


def test_a_killed_ray_run_resumes_with_another_number_of_workers(lm_tasks: Path, lm_eval_reference,
                                                                 tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = {**os.environ, **OFFLINE, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": worker_pythonpath()}
    env.pop("RAY_ADDRESS", None)
    base = [sys.executable, "-m", "runner", "-b", "lm-eval", "-B", f"tasks={TASKS}", "-B", f"include_path={lm_tasks}",
            "--model", EMBEDDED, "--storage", str(run), "--log-format", "json"]
    driver = subprocess.Popen([*base, "--workers", "2"], cwd=lm_tasks, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    started: set[int] = set()
    total = sum(N_DOCS.values())
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and driver.poll() is None:
            started |= descendants(driver.pid)
            if len(list(run.glob("records/*/0.json"))) >= 8:
                break
            time.sleep(0.05)
        started |= descendants(driver.pid)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        for pid in started:  # the killed driver's embedded Ray: only the processes it started, by id
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    kept = {path: path.read_bytes() for path in run.glob("records/*/0.json")}
    assert 8 <= len(kept) < total, "the run was not killed midway"

    done = subprocess.run([*base, "--workers", "1"], cwd=lm_tasks, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert finished(done.stderr)["executed"] == total - len(kept)  # no document with a record runs again
    assert all(path.read_bytes() == data for path, data in kept.items())
    assert len(list(run.glob("records/*/0.json"))) == total
    assert_same_as_lm_eval(run, lm_eval_reference, rel=1e-4)
