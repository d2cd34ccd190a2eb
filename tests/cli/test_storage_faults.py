"""Storage faults during a run, through the CLI, with S3 (moto) behind the fault-injecting proxy of
``tests/support/store_proxy.py``: lost responses make no phantom duplicates and a store that ignores conditional
writes is refused before anything is written (on GCS and Azure Blob too), an outage is waited out and logged once
each way, a longer one stops the run with exit status 3 and the same command resumes, and the advice fits the
fault."""

import json
import time

import pytest

from runner.engine import progress as progress_module
from runner.engine.sequential import WRITES_IN_FLIGHT
from runner.storage import ResultStore

TOY = ["--benchmark", "toy", "--solution", "calculator", "--sequential", "--log-format", "json"]
NO_CLIENT_RETRIES = json.dumps({"config_kwargs": {"retries": {"total_max_attempts": 1}}})
"""botocore's own retries off, so that each fault reaches the runner at once (the tests stay short)."""


@pytest.fixture
def storage(s3_bucket, proxied_s3_env) -> str:
    return f"s3://{s3_bucket}/runs/toy"


def storage_events(result) -> list[str]:
    return [event["event"] for event in result.events() if event["event"].startswith("storage.")]


LOST = {"s3": {"every": 7}, "gcs": {"every": 7}, "azure": {"every": 7, "times": 3}}
"""Which record writes lose their answer: every seventh, on Azure three of them only (azure-storage-blob waits 15 s
before it tries again)."""


def test_lost_responses_make_no_phantom_duplicates(cli, object_store):
    """The store stores a record, then its answer is lost; the retried conditional write is refused, and the stored
    record carries the write's own id: a success, not a duplicate task id."""
    storage = object_store.uri("runs/toy")
    lost = object_store.proxy.inject("lose_response", op="write", path="/records/", **LOST[object_store.name])
    result = cli(*TOY, "--storage", storage)
    assert result.returncode == 0, result.stderr
    assert lost.applied == LOST[object_store.name]["times"] if object_store.name == "azure" else lost.applied >= 13
    assert "100/100 items" in result.stdout
    summary = json.loads(ResultStore(storage).read_file("summary.json"))
    assert (summary["expected"], summary["completed"], summary["duplicate_tasks"], summary["notes"]) == (
        100, 100, 0, [])
    finished = result.event("run.finished")
    assert (finished["executed"], finished["duplicate_tasks"], finished["written_by_another"]) == (100, 0, 0)
    assert not [e for e in result.events() if e["event"] == "item.duplicate"]


def test_an_outage_mid_run_is_waited_out_and_logged_once_each_way(cli, storage, s3_proxy):
    """An outage of six record writes (not of seconds: a busy machine may send few writes in two), some of them the
    same record's write tried again."""
    gateway = s3_proxy.inject("html503", op="write", path="/records/", after=10, times=6)
    result = cli(*TOY, "--limit", "30", "--storage", storage, "--storage-options", NO_CLIENT_RETRIES,
                 "--storage-outage", "60")
    assert result.returncode == 0, result.stderr
    assert gateway.applied == 6
    assert storage_events(result) == ["storage.outage", "storage.recovered"]
    outage = result.event("storage.outage")
    # The 11th record write fails: the sequential executor writes a few records at once while later items run, so
    # it may be the record of any item of that window.
    window = {f"write {storage}/records/toy-{i:03d}/0.json"
              for i in range(10 - WRITES_IN_FLIGHT, 11 + WRITES_IN_FLIGHT)}
    assert outage["failed"] in window
    assert outage["error"] == "OSError: [Errno 16] Service Unavailable" and outage["limit_s"] == 60
    assert result.event("storage.recovered")["seconds"] > 0
    summary = json.loads(ResultStore(storage).read_file("summary.json"))
    assert (summary["completed"], summary["errors"]) == (30, 0)


def test_an_outage_longer_than_the_limit_exits_3_and_the_same_command_resumes(cli_process, cli, storage, s3_proxy,
                                                                              proxied_s3_env):
    """The exit-3 path in a real process; the resume in this one."""
    s3_proxy.inject("html503", op="write", path="/records/", after=5)
    command = [*TOY, "--limit", "20", "--storage", storage, "--storage-options", NO_CLIENT_RETRIES,
               "--storage-outage", "3"]
    stopped = cli_process(*command, env=proxied_s3_env)
    stopped.fault_line(f"error: cannot write {storage}/records/toy-", "/0.json: the storage kept failing for ",
                       " s (OSError: [Errno 16] Service Unavailable); this looks temporary: the records written so far "
                       "are kept, and the same command resumes once the storage answers (--storage-outage 3 is the "
                       "longest outage a run waits out)")
    assert stopped.stdout == ""
    # Five writes went through: those of five of the first items (a few are written at once).
    done = ResultStore(storage).done_items()
    assert len(done) == 5 and done <= {(f"toy-{i:03d}", 0) for i in range(5 + WRITES_IN_FLIGHT)}

    s3_proxy.clear()
    resumed = cli(*command)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.event("run.finished")["executed"] == 15  # the other fifteen, each once
    assert "20/20 items" in resumed.stdout


def test_an_outage_on_ray_workers_stops_the_run_with_exit_3(cli, storage, s3_proxy, proxied_s3_env, ray_session):
    """Ray workers write the records: the outage they meet reaches the driver, which stops the run. A 3 s limit: it
    is also each request's deadline, and 1 s was shorter than the first probe write's turn on a loaded machine."""
    s3_proxy.inject("html503", op="write", path="/records/")
    options = {**json.loads(NO_CLIENT_RETRIES), "endpoint_url": s3_proxy.url,
               "key": proxied_s3_env["AWS_ACCESS_KEY_ID"], "secret": proxied_s3_env["AWS_SECRET_ACCESS_KEY"]}
    result = cli("--benchmark", "toy", "--solution", "calculator", "--limit", "10", "--workers", "1",
                 "--storage", storage, "--storage-options", json.dumps(options), "--storage-outage", "3",
                 env={"RAY_ADDRESS": ""})
    assert result.returncode == 3, result.stderr
    last = result.lines()[-1]
    assert last.startswith(f"error: cannot write {storage}/records/toy-00"), result.stderr
    assert "the storage kept failing for " in last and "the same command resumes once the storage answers" in last


@pytest.mark.parametrize("fault, problem", [
    ("ignore_precondition", "a second write of one key with {condition} replaced the first"),
    ("reject_precondition", "it answered a write with {condition} with 501 Not Implemented"),
])
def test_a_store_without_conditional_writes_is_refused_unless_allowed(cli, object_store, fault, problem):
    storage = object_store.uri("runs/toy")
    object_store.proxy.inject(fault)
    refused = cli(*TOY, "--limit", "5", "--storage", storage)
    condition = "ifGenerationMatch=0" if object_store.name == "gcs" else "If-None-Match: *"
    refused.error_line(f"storage {storage} does not honour conditional writes: {problem.format(condition=condition)}",
                       "or pass --allow-overwriting-store")
    store = ResultStore(storage)
    assert store.fs.find(store.root) == []

    allowed = cli(*TOY, "--limit", "5", "--storage", storage, "--allow-overwriting-store")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.event("storage.unconditional")["level"] == "warning"
    assert len(ResultStore(storage).done_items()) == 5


def test_refused_credentials_before_the_run_say_so(cli, storage, s3_proxy):
    s3_proxy.inject("status", op="write", status=403,
                    body=b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")
    cli(*TOY, "--storage", storage).error_line(
        "(PermissionError: Access Denied); the storage refused the credentials: check them (AWS_* variables or "
        "--storage-options)")


def test_refused_credentials_mid_run_stop_it_with_exit_3(cli, storage, s3_proxy):
    """Credentials that expire mid-run: not temporary, but after writing started, so the finished records stay and
    the same command resumes once they are fixed."""
    s3_proxy.inject("status", op="write", path="/records/", after=3, status=403,
                    body=b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")
    result = cli(*TOY, "--storage", storage)
    result.fault_line(f"cannot write {storage}/records/toy-", "/0.json (PermissionError: Access Denied); the "
                      "storage refused the credentials", "the records written so far are kept, and the same command "
                      "resumes once this is fixed")
    assert len(ResultStore(storage).done_items()) == 3


def test_a_store_that_hangs_is_an_outage_within_the_budget(cli, storage, s3_proxy, monkeypatch):
    """S3 holds record writes without answering (a paused server): each call is cut at the outage budget, so the
    outage is logged and the run stops with exit status 3 within seconds, not after botocore's and s3fs' retries
    of their 15 s read timeout; meanwhile the heartbeat names the item that waits, and the lease is released."""
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.5)
    s3_proxy.inject("delay", op="write", path="/records/", after=3, delay=30)
    started = time.monotonic()
    result = cli(*TOY, "--limit", "10", "--storage", storage, "--storage-outage", "2")
    assert time.monotonic() - started < 15
    line = result.fault_line(f"cannot write {storage}/records/toy-", "/0.json: the storage kept failing for ",
                             "(TimeoutError: the storage did not answer within 2 s); this looks temporary")
    assert result.event("storage.outage")["error"] == "TimeoutError: the storage did not answer within 2 s"
    # The writes from the 4th on hang; the sequential executor writes a few records at once, so the first refused
    # is one of those in flight together, and the heartbeat names the oldest item waiting.
    window = [f"toy-{i:03d}" for i in range(0, 4 + WRITES_IN_FLIGHT)]
    assert any(f"/records/{task}/0.json" in line for task in window), line
    waiting = [beat for beat in result.events() if beat["event"] == "run.heartbeat" and beat["in_flight"]]
    assert waiting and {beat["oldest_task_id"] for beat in waiting} <= set(window)
    assert max(beat["in_flight"] for beat in waiting) <= 1 + WRITES_IN_FLIGHT
    assert max(beat["oldest_s"] for beat in waiting) >= 2
    assert ResultStore(storage).read_file("lease.json") is None


def test_a_hang_shorter_than_the_budget_is_waited_out_and_the_lease_released(cli, storage, s3_proxy, monkeypatch):
    """A record write and a renewal of the lease held for 3 s each (with a 2 s lease, which may thus have lapsed):
    the run waits, the heartbeat names the item that waits, and at the end the driver claims its lease back and
    releases it, leaving nothing that would stop the next run."""
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.5)
    s3_proxy.inject("delay", op="write", path="/records/", after=3, delay=3, times=1)
    s3_proxy.inject("delay", op="write", path="/lease.json", after=2, delay=3, times=1)
    result = cli(*TOY, "--limit", "10", "--storage", storage, "--lease-ttl", "2")
    assert result.returncode == 0, result.stderr
    events = [event["event"] for event in result.events()]
    assert "lease.not_released" not in events and "lease.lost" not in events
    waiting = [beat for beat in result.events() if beat["event"] == "run.heartbeat" and beat["in_flight"]]
    assert {beat["oldest_task_id"] for beat in waiting} <= {f"toy-{i:03d}" for i in range(4 + WRITES_IN_FLIGHT)}
    assert max(beat["oldest_s"] for beat in waiting) >= 2
    assert ResultStore(storage).read_file("lease.json") is None
    assert cli(*TOY, "--limit", "10", "--storage", storage).returncode == 0
