"""The main job, its files and resume: rerun does no work; a run killed with SIGKILL resumes and never runs a
finished item again (locally and on a real S3 API over loopback)."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from runner.storage import ResultStore

from .conftest import REPO, runner_cli


def test_quick_start_prints_a_table_and_leaves_the_files(cli, tmp_path):
    storage = tmp_path / "run"
    result = cli("--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage))
    assert result.returncode == 0, result.stderr
    assert "exact-match" in result.stdout and "score 1.000" in result.stdout
    summary = json.loads((storage / "summary.json").read_text())
    for key in ("benchmark", "run_id", "n_tasks", "n_repeats", "completed", "errors", "metrics", "by_category",
                "score", "duration_s"):
        assert key in summary
    assert (summary["n_tasks"], summary["completed"], summary["errors"], summary["score"]) == (100, 100, 0, 1.0)
    assert summary["metrics"]["exact-match"]["mean"] == 1.0
    assert set(summary["by_category"]) == {"addition", "subtraction", "multiplication", "division", "mixed"}
    with (storage / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 100 and rows[0]["task_id"] == "toy-000"
    assert len(list((storage / "records").glob("*/0.json"))) == 100

    again = cli("--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage))
    assert again.returncode == 0
    events = [json.loads(line) for line in again.stderr.splitlines()]
    assert any(e["event"] == "run.nothing_to_do" for e in events)
    assert next(e for e in events if e["event"] == "run.finished")["executed"] == 0


def test_config_file_with_flags_overriding_it(cli, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"benchmark: toy\nsolution: calculator\nsequential: true\nrepeats: 2\nlimit: 4\n"
                      f"storage: {tmp_path / 'from-file'}\n")
    result = cli("--config", str(config), "--limit", "3")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "from-file" / "summary.json").read_text())
    assert (summary["n_tasks"], summary["n_repeats"], summary["completed"]) == (3, 2, 6)
    assert summary["pass_at_k"]["exact-match"] == {"1": 1.0, "2": 1.0}


def _kill_midway(storage: str, calls_file, env: dict[str, str], after_calls: int) -> None:
    command = [sys.executable, "-m", "runner", "--benchmark", "toy", "--solution",
               "tests.support.solutions:counting_calculator", "--sequential", "--storage", storage,
               "--log-format", "json"]
    proc = subprocess.Popen(command, cwd=REPO, env={**os.environ, **env, "RUNNER_TEST_DELAY": "0.02"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if calls_file.exists() and len(calls_file.read_text().splitlines()) >= after_calls:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_killed_run_resumes_without_running_a_finished_item_again(backend, tmp_path, request):
    env = {"RUNNER_TEST_CALLS": str(tmp_path / "calls.txt")}
    if backend == "s3":
        env.update(request.getfixturevalue("s3_server"))
        storage = f"s3://{request.getfixturevalue('s3_bucket')}/runs/toy"
    else:
        storage = str(tmp_path / "run")
    calls_file = tmp_path / "calls.txt"

    _kill_midway(storage, calls_file, env, after_calls=30)
    os.environ.update(env) if backend == "s3" else None
    done_at_kill = {key for key, _ in ResultStore(storage).done_items()}
    calls_at_kill = len(calls_file.read_text().splitlines())
    assert 0 < len(done_at_kill) < 100

    status = runner_cli("status", storage, "--json", env=env)
    assert status.returncode == 0, status.stderr
    progress = json.loads(status.stdout)
    assert (progress["done"], progress["expected"], progress["complete"]) == (len(done_at_kill), 100, False)
    partial = runner_cli("report", storage, "--json", env=env)
    assert partial.returncode == 0, partial.stderr
    assert json.loads(partial.stdout)["missing"] == 100 - len(done_at_kill)

    resumed = runner_cli("--benchmark", "toy", "--solution", "tests.support.solutions:counting_calculator",
                         "--sequential", "--storage", storage, env=env)
    assert resumed.returncode == 0, resumed.stderr

    calls = Counter(line.split()[0] for line in calls_file.read_text().splitlines())
    store = ResultStore(storage)
    records = list(store.iter_records())
    assert sorted((r.task_id, r.repeat) for r in records) == [(f"toy-{i:03d}", 0) for i in range(100)]
    assert all(r.status == "ok" for r in records)
    from runner.storage import encode_key

    for task_id, count in calls.items():
        if encode_key(task_id) in done_at_kill:
            assert count == 1, f"{task_id} ran again after its record was stored"
        else:
            assert count <= 2
    # sequential: at most the one item in flight at the kill ran twice
    assert sum(calls.values()) <= 100 + 1
    assert len(calls) == 100
    assert calls_at_kill >= len(done_at_kill)
    summary = json.loads(store.read_file("summary.json"))
    assert (summary["completed"], summary["score"]) == (100, 1.0)


def test_rerun_errors_runs_failed_items_again_and_keeps_the_old_records(cli, tmp_path):
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "tests.support.solutions:flaky_calculator", "--sequential",
            "--storage", str(storage), "--limit", "20"]
    assert cli(*args, env={"RUNNER_TEST_FAIL": "1"}).returncode == 0
    assert json.loads((storage / "summary.json").read_text())["errors"] == 2

    assert cli(*args).returncode == 0          # a plain resume keeps the error records
    assert json.loads((storage / "summary.json").read_text())["errors"] == 2

    rerun = cli(*args, "--rerun-errors")
    assert rerun.returncode == 0, rerun.stderr
    events = [json.loads(line) for line in rerun.stderr.splitlines()]
    assert next(e for e in events if e["event"] == "run.rerun_errors")["retired"] == 2
    assert next(e for e in events if e["event"] == "run.finished")["executed"] == 2
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["completed"], summary["errors"]) == (20, 0)
    retired = sorted(p.parent.name for p in (storage / "retired").rglob("*.json"))
    assert retired == ["toy-003", "toy-013"]


def test_a_damaged_record_is_named_by_the_report_and_run_again_by_rerun_errors(cli, tmp_path):
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage),
            "--limit", "10"]
    assert cli(*args).returncode == 0
    (storage / "records" / "toy-002" / "0.json").write_text('{"status": "o')       # damaged from outside
    (storage / "records" / "toy-007" / "0.json").write_text("[1, 2]")

    report = cli("report", str(storage))
    assert report.returncode == 0
    warnings = [json.loads(line) for line in report.stderr.splitlines() if "unreadable_record" in line]
    assert sorted(w["path"].rsplit("/", 2)[-2] for w in warnings) == ["toy-002", "toy-007"]
    assert json.loads((storage / "summary.json").read_text())["completed"] == 8

    rerun = cli(*args, "--rerun-errors")
    assert rerun.returncode == 0, rerun.stderr
    events = [json.loads(line) for line in rerun.stderr.splitlines()]
    assert next(e for e in events if e["event"] == "run.rerun_errors")["retired"] == 2
    assert next(e for e in events if e["event"] == "run.finished")["executed"] == 2
    assert json.loads((storage / "summary.json").read_text())["completed"] == 10
    assert sorted(p.parent.name for p in (storage / "retired").rglob("*.json")) == ["toy-002", "toy-007"]
