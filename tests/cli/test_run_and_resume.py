"""The main job, its files and resume: rerun does no work; a run killed with SIGKILL leaves its lease, which the same
command takes over (the driver's process is gone on this host), and resumes without running a finished item again
(locally, and on S3, GCS and Azure Blob through their emulators on loopback)."""

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import psutil
import pytest

from runner.engine.sequential import WRITES_IN_FLIGHT
from runner.storage import ResultStore
from tests.support.cli import REPO
from tests.support.emulators import STORES


def test_quick_start_prints_a_table_and_leaves_the_files(cli_process, cli, tmp_path):
    """The exit-0 path in a real process; the resume in this one."""
    storage = tmp_path / "run"
    result = cli_process("--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage))
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
    assert any(e["event"] == "run.nothing_to_do" for e in again.events())
    assert again.event("run.finished")["executed"] == 0


def test_config_file_with_flags_overriding_it(cli, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"benchmark: toy\nsolution: calculator\nsequential: true\nrepeats: 2\nlimit: 4\n"
                      f"storage: {tmp_path / 'from-file'}\n")
    result = cli("--config", str(config), "--limit", "3")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "from-file" / "summary.json").read_text())
    assert (summary["n_tasks"], summary["n_repeats"], summary["completed"]) == (3, 2, 6)
    assert summary["pass_at_k"]["exact-match"] == {"1": 1.0, "2": 1.0}


_ZOMBIES: list[subprocess.Popen] = []


@pytest.fixture
def reaper():
    """Reaps, at the end of the test, the killed drivers it left as zombies."""
    yield
    while _ZOMBIES:
        _ZOMBIES.pop().wait()


def _kill_midway(storage: str, calls_file, env: dict[str, str], after_calls: int, reap: bool = True) -> int:
    """Run the toy benchmark in a subprocess, SIGKILL it after ``after_calls`` solution calls; its pid. Without
    ``reap``, the killed driver stays a zombie until the test ends."""
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
    if reap:
        proc.wait()
    else:  # as `timeout -s KILL` leaves it: a zombie until its parent (here, this test) reaps it
        _ZOMBIES.append(proc)
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
    return proc.pid


@pytest.mark.parametrize("backend", ["local", *STORES, "local, its driver a zombie"])
def test_killed_run_resumes_without_running_a_finished_item_again(backend, tmp_path, request, cli, reaper):
    env = {"RUNNER_TEST_CALLS": str(tmp_path / "calls.txt")}
    if backend in STORES:
        reached = request.getfixturevalue("object_stores").open(backend)
        env.update(reached.env)
        storage = reached.uri("runs/toy")
    else:
        storage = str(tmp_path / "run")
    calls_file = tmp_path / "calls.txt"

    killed = _kill_midway(storage, calls_file, env, after_calls=30, reap="zombie" not in backend)
    done_at_kill = {key for key, _ in ResultStore(storage).done_items()}
    calls_at_kill = len(calls_file.read_text().splitlines())
    assert 0 < len(done_at_kill) < 100

    status = cli("status", storage, "--json", env=env)
    assert status.returncode == 0, status.stderr
    progress = json.loads(status.stdout)
    assert (progress["done"], progress["expected"], progress["complete"]) == (len(done_at_kill), 100, False)
    assert (progress["driver"]["pid"], progress["driver"]["state"], progress["driver"]["alive"]) == (
        killed, "driver gone", False)
    partial = cli("report", storage, "--json", env=env)
    assert partial.returncode == 0, partial.stderr
    assert json.loads(partial.stdout)["missing"] == 100 - len(done_at_kill)

    command = ["--benchmark", "toy", "--solution", "tests.support.solutions:counting_calculator", "--sequential",
               "--storage", storage]
    # The killed driver's process is gone on this host: the same command takes its lease over and resumes.
    resumed = cli(*command, "--log-format", "json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.event("lease.taken_over")["previous"].startswith(
        f"a driver on host {socket.gethostname()} (pid {killed}) since ")
    assert cli("status", storage, "--json", env=env).stdout.count('"driver": null') == 1

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
    # sequential: at most the items in flight at the kill ran twice: the one running and those whose records were
    # still being written (never one whose record was stored)
    assert sum(calls.values()) <= 100 + 1 + WRITES_IN_FLIGHT
    assert len(calls) == 100
    assert calls_at_kill >= len(done_at_kill)
    summary = json.loads(store.read_file("summary.json"))
    assert (summary["completed"], summary["score"]) == (100, 1.0)


def test_rerun_failed_runs_failed_items_again_and_keeps_the_old_records(cli, tmp_path):
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "tests.support.solutions:flaky_calculator", "--sequential",
            "--storage", str(storage), "--limit", "20"]
    assert cli(*args, env={"RUNNER_TEST_FAIL": "1"}).returncode == 0
    assert json.loads((storage / "summary.json").read_text())["errors"] == 2

    assert cli(*args).returncode == 0          # a plain resume keeps the error records
    assert json.loads((storage / "summary.json").read_text())["errors"] == 2

    rerun = cli(*args, "--rerun-failed")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.event("run.rerun_failed")["retired"] == 2
    assert rerun.event("run.finished")["executed"] == 2
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["completed"], summary["errors"]) == (20, 0)
    retired = sorted(p.parent.name for p in (storage / "retired").rglob("*.json"))
    assert retired == ["toy-003", "toy-013"]


def test_a_damaged_record_is_named_by_the_report_and_run_again_by_rerun_failed(cli, tmp_path):
    """Also: --rerun-errors, the flag's former name, still works and says in one line which flag to use."""
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage),
            "--limit", "10"]
    assert cli(*args).returncode == 0
    (storage / "records" / "toy-002" / "0.json").write_text('{"status": "o')       # damaged from outside
    (storage / "records" / "toy-007" / "0.json").write_text("[1, 2]")

    report = cli("report", str(storage), "--log-format", "json")
    assert report.returncode == 0
    warnings = [e for e in report.events() if e["event"] == "store.unreadable_record"]
    assert sorted(w["path"].rsplit("/", 2)[-2] for w in warnings) == ["toy-002", "toy-007"]
    assert json.loads((storage / "summary.json").read_text())["completed"] == 8

    rerun = cli(*args, "--rerun-errors")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.lines()[0] == "warning: --rerun-errors is deprecated; use --rerun-failed"
    assert rerun.event("run.rerun_failed")["retired"] == 2
    assert rerun.event("run.finished")["executed"] == 2
    assert json.loads((storage / "summary.json").read_text())["completed"] == 10
    assert sorted(p.parent.name for p in (storage / "retired").rglob("*.json")) == ["toy-002", "toy-007"]


TOY = ["--benchmark", "toy", "--solution", "calculator", "--sequential"]


def test_damaged_and_stray_record_files_are_named_not_counted_and_redone_with_rerun_failed(cli, tmp_path):
    """A record cut short, an empty one, and a copy of another record under a task id the benchmark does not have:
    status counts the plan's task ids only, the report counts readable records and notes the others, a resume says
    how many files are damaged and how to redo them, and every message names --rerun-failed."""
    storage = tmp_path / "run"
    args = [*TOY, "--storage", str(storage), "--limit", "10", "--log-format", "json"]
    assert cli(*args).returncode == 0
    records = storage / "records"
    (records / "toy-007" / "0.json").write_bytes((records / "toy-007" / "0.json").read_bytes()[:40])
    (records / "toy-008" / "0.json").write_bytes(b"")
    (records / "zzz").mkdir()
    (records / "zzz" / "0.json").write_bytes((records / "toy-001" / "0.json").read_bytes())

    status = cli("status", str(storage))
    assert status.returncode == 0, status.stderr
    first, _, _, note = status.stdout.splitlines()
    assert ": 10/10 items (100.0%), complete;" in first
    assert note == ("note: 1 stored records are outside the current plan (1 of task ids the benchmark does not have: "
                    "files put under records/ from outside the runner): kept on disk, not counted")

    report = cli("report", str(storage), "--log-format", "json")
    assert report.returncode == 0, report.stderr
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["completed"], summary["missing"], summary["unreadable_records"], summary["misplaced_records"]) \
        == (8, 2, 2, 1)
    assert summary["notes"] == [
        "2 of 10 items have no record yet: the score and the metrics cover the 8 items done",
        f"2 record file(s) cannot be read (damaged outside the runner: {records}/toy-007/0.json, "
        f"{records}/toy-008/0.json): their items count as missing; run the same command with --rerun-failed to run "
        "them again",
        f"1 file(s) under records/ hold the record of another item (copies made outside the runner: "
        f"{records}/zzz/0.json): not counted; remove them"]
    assert "8/10 items" in report.stdout

    resumed = cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.event("run.finished")["executed"] == 0
    assert resumed.event("run.unreadable_records")["files"] == 2
    assert "run the same command with --rerun-failed" in resumed.event("run.unreadable_records")["detail"]
    assert "--rerun-errors" not in resumed.stderr + report.stderr + status.stdout

    rerun = cli(*args, "--rerun-failed")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.event("run.finished")["executed"] == 2
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["completed"], summary["unreadable_records"], summary["misplaced_records"]) == (10, 0, 1)


def test_lowering_repeats_and_limit_on_resume_reports_the_current_plan(cli, tmp_path):
    storage = tmp_path / "run"
    assert cli(*TOY, "--storage", str(storage), "--limit", "10", "--repeats", "3").returncode == 0
    lowered = cli(*TOY, "--storage", str(storage), "--limit", "4", "--repeats", "1")
    assert lowered.returncode == 0, lowered.stderr
    assert "4/4 items" in lowered.stdout
    note = ("note: 26 stored records are outside the current plan (20 with repeat index >= 1, 6 of tasks past the "
            "first 4): kept on disk, not counted")
    assert note in lowered.stdout.splitlines()
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["expected"], summary["completed"], summary["missing"]) == (4, 4, 0)
    assert (summary["outside_plan"], summary["outside_plan_by"]) == (26, {"limit": 6, "repeats": 20})
    assert summary["metrics"]["exact-match"]["n"] == 4 and list(summary["by_repeat"]) == ["0"]
    status = cli("status", str(storage))
    assert status.returncode == 0, status.stderr
    first, driver, progress, second = status.stdout.splitlines()
    assert ": 4/4 items (100.0%), complete;" in first and second == note
    assert driver == "driver: none (no driver holds the run)"
    assert progress.startswith("progress (ended, written ") and "0/0 items this invocation" in progress  # a resume
    assert json.loads(cli("status", str(storage), "--json").stdout)["outside_plan"] == 26
    assert len(list((storage / "records").glob("*/*.json"))) == 30

    raised = cli(*TOY, "--storage", str(storage), "--limit", "10", "--repeats", "3", "--log-format", "json")
    assert raised.event("run.finished")["executed"] == 0
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["expected"], summary["completed"], summary["outside_plan"]) == (30, 30, 0)


def test_duplicate_task_id_warns_is_not_run_and_the_run_completes(cli, tmp_path):
    storage = tmp_path / "run"
    args = ["--benchmark", "tests.support.solutions:IdsBenchmark", "-B", "ids=a,b,a,c", "--solution", "calculator",
            "--sequential", "--storage", str(storage), "--log-format", "json"]
    for executed in (3, 0):  # the first run and a resume both find the duplicate in the plan
        result = cli(*args)
        assert result.returncode == 0, result.stderr
        warning = result.event("plan.duplicate_task")
        assert (warning["level"], warning["task_id"], warning["index"]) == ("warning", "a", 2)
        assert "an earlier task of the benchmark has this id" in warning["detail"]
        finished = result.event("run.finished")
        assert (finished["executed"], finished["duplicate_tasks"], finished["written_by_another"]) == (executed, 1, 0)
        assert not [e for e in result.events() if e["event"] == "item.duplicate"]
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["n_tasks"], summary["expected"], summary["completed"], summary["duplicate_tasks"]) == (3, 3, 3, 1)
    status = cli("status", str(storage)).stdout.splitlines()
    assert ": 3/3 items (100.0%), complete;" in status[0]
    assert status[3] == ("note: the benchmark repeats 1 task id(s) at later positions: each id has one record per "
                         "repeat and is counted once")


def test_empty_task_id_stops_the_run_with_one_line_and_keeps_earlier_records(cli, tmp_path):
    storage = tmp_path / "run"
    result = cli("--benchmark", "tests.support.solutions:IdsBenchmark", "-B", "ids=a,b,,c", "--solution",
                 "calculator", "--sequential", "--storage", str(storage), "--log-format", "json")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: task at position 2 (0-based) of benchmark 'ids': a task needs a non-empty id; fix the benchmark and "
        "rerun to resume (records written so far are kept)")
    assert sorted(p.parent.name for p in (storage / "records").glob("*/0.json")) == ["a", "b"]


def test_retried_items_leave_a_trace_in_their_records_and_the_summary(cli, tmp_path):
    """--solution-retries 2 with toy-001 and toy-011 failing twice, then answering wrong: their records keep the
    tries, and summary.json shows that retried items score differently."""
    from tests.support.solutions import STUBBORN_TRIES

    STUBBORN_TRIES.clear()
    storage = tmp_path / "run"
    result = cli("--benchmark", "toy", "--limit", "20", "--solution", "tests.support.solutions:stubborn_calculator",
                 "--solution-retries", "2", "--sequential", "--storage", str(storage))
    assert result.returncode == 0, result.stderr
    record = json.loads((storage / "records" / "toy-001" / "0.json").read_text())
    assert record["status"] == "ok" and record["tries"] == 3
    assert [(e["type"], e["message"]) for e in record["try_errors"]] == [("ConnectionError", "try 1 failed"),
                                                                        ("ConnectionError", "try 2 failed")]
    assert json.loads((storage / "records" / "toy-002" / "0.json").read_text())["tries"] == 1
    summary = json.loads((storage / "summary.json").read_text())
    assert summary["retried_items"] == 2
    assert summary["metrics"]["exact-match"]["by_tries"] == {"first_try": {"mean": 1.0, "n": 18},
                                                             "retried": {"mean": 0.0, "n": 2}}
