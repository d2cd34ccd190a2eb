"""Live statistics of a run: the progress events and progress.json carry running means, and ``status`` shows them."""

import json
import threading
import time

from runner.engine import progress as progress_module
from runner.storage import ResultStore


def test_progress_json_is_written_while_the_run_executes_and_status_shows_it(cli, tmp_path, monkeypatch):
    """A slow run in a thread of this process: progress.json appears within the file interval, says ``running``
    and how far; at the end it says ``ended`` and its running means are the report's means."""
    monkeypatch.setattr(progress_module, "PROGRESS_FILE_S", 0.2)
    storage = tmp_path / "run"
    args = ["-b", "toy", "-B", "n_tasks=30", "-s", "tests.support.solutions:counting_calculator", "--sequential",
            "--storage", str(storage), "--log-format", "json"]
    monkeypatch.setenv("RUNNER_TEST_DELAY", "0.05")
    monkeypatch.setenv("RUNNER_TEST_CALLS", str(tmp_path / "calls.txt"))
    result: list = []
    runner = threading.Thread(target=lambda: result.append(cli(*args)))
    runner.start()
    seen = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and runner.is_alive():
        data = ResultStore(str(storage)).read_file("progress.json") if storage.exists() else None
        if data and json.loads(data)["state"] == "running" and json.loads(data)["done"] > 0:
            seen = json.loads(data)
            break
        time.sleep(0.05)
    runner.join(60)
    assert seen is not None, "no progress.json while the run executed"
    assert 0 < seen["done"] < 30 and seen["total"] == 30 and seen["headline"] == "exact-match"
    assert seen["metrics"]["exact-match"]["n"] == seen["done"]
    assert result and result[0].returncode == 0, result[0].stderr if result else "no result"

    final = json.loads((storage / "progress.json").read_text())
    summary = json.loads((storage / "summary.json").read_text())
    assert (final["state"], final["done"], final["by_status"]) == ("ended", 30, {"ok": 30})
    assert final["metrics"]["exact-match"]["mean"] == summary["metrics"]["exact-match"]["mean"] == 1.0
    assert set(final["by_category"]) == set(summary["by_category"])

    status = cli("status", str(storage))
    line = next(line for line in status.stdout.splitlines() if line.startswith("progress (ended, written "))
    assert "30/30 items this invocation" in line and "exact-match 1.000" in line
    assert json.loads(cli("status", str(storage), "--json").stdout)["progress"]["state"] == "ended"
    watched = cli("status", str(storage), "--watch", "0.5")            # nothing executes it: its final state, once
    def steady(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith("progress (")]     # its age moves on

    assert watched.returncode == 0 and "progress (ended" in watched.stdout
    assert steady(watched.stdout.splitlines()[:-1]) == steady(status.stdout.splitlines())
    assert watched.stdout.splitlines()[-1] == "(no driver executes this run: this is its final state; nothing to watch)"
