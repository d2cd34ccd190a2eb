"""Models served by the run, end to end with the real embedded model (SmolLM2-135M-Instruct on ``transformers serve``,
CPU): a sequential run from the driver, a run on Ray workers, a worker killed with SIGKILL (none of its server's
processes remain, and its items run again on a new worker with a new replica), and a server killed mid-run (it
restarts, and the item that was waiting for it is not an error)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from runner.core.config import EMBEDDED_MODEL
from runner.storage import ResultStore
from tests.support.http_proxy import ForwardProxy

pytestmark = pytest.mark.timeout(900)

ASK = "tests.engine.served_solutions:ask"


def _servers() -> set[int]:
    """Every ``transformers serve`` process of this Python environment now (a replica runs its console script,
    ``<sys.prefix>/bin/transformers``): not those of another checkout's tests on a shared machine."""
    found = set()
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info.get("cmdline") or [])
        if sys.prefix not in cmdline:
            continue
        if "transformers serve" in cmdline or cmdline.endswith("/transformers serve"):
            found.add(process.pid)
        elif "/bin/transformers" in cmdline and " serve " in f"{cmdline} ":
            found.add(process.pid)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _records(storage: Path) -> list:
    return sorted(ResultStore(str(storage)).iter_records(), key=lambda record: record.task_id)


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    """A cluster's egress proxy, which cannot reach this machine's loopback (it answers 502 to everything)."""
    with ForwardProxy() as forward:
        yield forward


def test_a_sequential_run_serves_the_embedded_model_from_the_driver(cli, tmp_path: Path, embedded_dir: Path,
                                                                    proxy: ForwardProxy,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Run with an egress proxy in the environment, every spelling, and no NO_PROXY (issue 27: the replica's
    readiness probe went to it until the start-up timeout): the replica is reached directly. A Hugging Face home
    with no update check done yet: ``transformers serve``'s first start of a day asked pypi.org for a newer release
    (through the proxy, on a fresh machine) until the replicas were told not to."""
    for name, value in proxy.environment().items():
        monkeypatch.setenv(name, value)
    for name in ("NO_PROXY", "no_proxy", "HF_HUB_DISABLE_UPDATE_CHECK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    before = _servers()
    storage = tmp_path / "run"
    result = cli("-b", "toy", "-B", "n_tasks=3", "-s", ASK, "--model", EMBEDDED_MODEL, "--sequential",
                 "--storage", str(storage), "--log-format", "json")
    assert result.returncode == 0, result.stderr
    assert proxy.requests == []
    records = _records(storage)
    assert [record.status for record in records] == ["ok"] * 3
    used = [record.usage[EMBEDDED_MODEL] for record in records]
    assert all(usage.calls == 1 and usage.input_tokens > 0 and 0 < usage.output_tokens <= 4 for usage in used)
    [log] = (storage / "replicas").iterdir()
    assert log.name.startswith("driver-smollm2-135m-instruct-") and "Uvicorn running" in log.read_text()
    summary = json.loads((storage / "summary.json").read_text())
    assert summary["usage"][EMBEDDED_MODEL]["calls"] == 3
    assert "tokens transformers:smollm2-135m-instruct: " in result.stdout
    assert json.loads((storage / "progress.json").read_text())["replicas"] == {"ready": 1, "starting": 0}
    assert _alive(_servers() - before) == set()      # stopped with the run


@pytest.mark.usefixtures("ray_session")
def test_a_killed_worker_leaves_no_server_and_its_items_run_on_a_new_replica(
        cli, tmp_path: Path, embedded_dir: Path) -> None:
    """One worker (4 items in flight) serves the model; the first item kills the worker's process with SIGKILL. Its
    server's processes end with it (the shepherd), a new worker starts a new replica, and every item ends ok."""
    before = _servers()
    storage = tmp_path / "run"
    flag = tmp_path / "killed"
    result = cli("-b", "toy", "-B", "n_tasks=4", "-s", ASK, "-S", f"flag={flag}", "-S", "kill=worker",
                 "--model", EMBEDDED_MODEL, "--workers", "1", "--concurrency", "4", "--storage", str(storage),
                 "--log-format", "json")
    assert result.returncode == 0, result.stderr
    assert flag.exists()
    records = _records(storage)
    assert [record.status for record in records] == ["ok"] * 4
    killed = int(flag.read_text())
    assert killed not in {record.worker["pid"] for record in records}
    assert [event["event"] for event in result.events() if event["event"] == "worker.died"] == ["worker.died"]
    logs = sorted(path.name for path in (storage / "replicas").iterdir())
    assert len(logs) == 1 and logs[0].startswith("worker-")   # the new worker's; the killed one kept none
    assert _alive(_servers() - before) == set()


@pytest.mark.usefixtures("ray_session")
def test_a_killed_server_restarts_and_the_item_waiting_for_it_is_not_an_error(
        cli, tmp_path: Path, embedded_dir: Path, proxy: ForwardProxy) -> None:
    """The worker gets an egress proxy in its environment before its server is killed: the restarted replica's
    readiness probes, the health checks and the calls after it reach the replica directly."""
    before = _servers()
    storage = tmp_path / "run"
    flag = tmp_path / "killed"
    result = cli("-b", "toy", "-B", "n_tasks=3", "-s", ASK, "-S", f"flag={flag}", "-S", "kill=server",
                 "-S", f"proxy={proxy.url}", "--model", EMBEDDED_MODEL, "--workers", "1", "--concurrency", "1",
                 "--storage", str(storage), "--log-format", "json")
    assert result.returncode == 0, result.stderr
    assert proxy.requests == []
    records = _records(storage)
    assert [record.status for record in records] == ["ok"] * 3
    assert len({record.worker["pid"] for record in records}) == 1           # no worker was replaced
    log = next((storage / "replicas").iterdir()).read_text()
    assert log.count("=== runner: start ") == 2                               # the start, and one restart
    assert _alive(_servers() - before) == set()
