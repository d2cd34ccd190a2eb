"""Storage faults between the store and its object store (moto's S3, fake-gcs-server, Azurite, each behind the
fault-injecting proxy of ``tests/support/store_proxy.py``): advice that fits the fault, record writes that outlive an
outage of more than 20 s, a lost response told apart from another writer's record on every store; the outage guard
itself."""

import asyncio
import time

import pytest
import structlog

from runner.core.errors import StorageError, StorageOutage
from runner.core.record import TaskRecord
from runner.storage import ResultStore
from runner.storage import outage
from runner.storage.error_kinds import credentials_of
from runner.storage.outage import OutageGuard, backoff
from tests.support.clock import FakeClock

NO_CLIENT_RETRIES = {"config_kwargs": {"retries": {"total_max_attempts": 1}}}
"""botocore's own retries off, so that each fault reaches the runner at once (s3fs still tries a SlowDown and a
broken connection 5 times)."""
CLIENT_OPTIONS = {"s3": NO_CLIENT_RETRIES, "gcs": {}, "azure": {}}
"""Each store's options in the tests that hold for every store. gcsfs and azure-storage-blob take no option for
their own retries: gcsfs tries 6 times over 31-36 s (waits of 1-2, 2-3, 4-5, 8-9 and 16-17 s, ``gcsfs/retry.py``),
azure-storage-blob 4 times (waits of 15-21, 21-27 and 39-45 s: 15 s + 3^n, +-3 s, ``ExponentialRetry``)."""


def _record(task_id: str = "a", attempt: int = 1, write_id: str | None = None) -> TaskRecord:
    return TaskRecord(run_id="r", task_id=task_id, repeat=0, attempt=attempt, status="ok", output=task_id,
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00",
                      write_id=write_id)


@pytest.fixture
def store(proxied_s3_env, s3_bucket):
    return ResultStore(f"s3://{s3_bucket}/run", NO_CLIENT_RETRIES)


@pytest.mark.parametrize("status, body, advice", [
    (403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
     "(PermissionError: Access Denied); the storage refused the credentials: check them (AWS_* variables or "
     "--storage-options)"),
    (404, b"<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>",
     "(FileNotFoundError: The specified bucket does not exist); check that the bucket (or container) of the "
     "storage URI exists"),
    (503, b"<html><body>503 Service Temporarily Unavailable</body></html>",
     "the storage looks temporarily unavailable (a server error, throttling or a network fault); try again once it "
     "answers"),
    (501, b"<Error><Code>NotImplemented</Code><Message>not implemented</Message></Error>",
     "the storage does not implement a request runner sends (conditional writes, If-None-Match: *)"),
])
def test_the_advice_fits_the_fault(store, s3_proxy, status, body, advice):
    s3_proxy.inject("status", method="PUT", status=status, body=body)
    with pytest.raises(StorageError) as caught:
        store.write_once(store.path("x.json"), b"{}")
    message = str(caught.value)
    assert message.startswith(f"cannot write {store.uri}/x.json (")
    assert advice in message
    assert "check the storage URI and its credentials" not in message


@pytest.mark.parametrize("kind, options", [
    # Outages of so many writes, not seconds: a busy machine may send only one write in a second and a half. The
    # runner meets each gateway 503 (s3fs does not retry it); s3fs itself tries a SlowDown and a reset connection 5
    # times, so 8 of them are one failure the runner meets and 3 that s3fs's next try absorbs.
    ("html503", {"times": 3}),
    ("slowdown", {"times": 8}),
    ("reset", {"times": 8}),
    ("delay", {"delay": 1.0, "times": 7}),
])
def test_a_record_write_outlives_an_outage_and_logs_it_once_each_way(store, s3_proxy, kind, options):
    store.outage_s = 60
    if kind == "delay":
        store.storage_options["config_kwargs"]["read_timeout"] = 0.3
    fault = s3_proxy.inject(kind, method="PUT", path="/records/", **options)
    with structlog.testing.capture_logs() as logs:
        assert store.write_record(_record())
    assert fault.applied == options["times"]  # every faulty write was met, then the next one went through
    assert [e["event"] for e in logs if e["event"].startswith("storage.")] == ["storage.outage", "storage.recovered"]
    outage = next(e for e in logs if e["event"] == "storage.outage")
    assert outage["failed"] == f"write {store.uri}/records/a/0.json" and outage["limit_s"] == 60
    assert [r.output for r in store.iter_records()] == ["a"]


def test_an_outage_longer_than_the_limit_stops_with_one_line(store, s3_proxy):
    store.outage_s = 1
    s3_proxy.inject("html503", method="PUT", path="/records/")
    started = time.monotonic()
    with pytest.raises(StorageOutage) as caught:
        store.write_record(_record())
    assert time.monotonic() - started < 5
    assert str(caught.value).startswith(f"cannot write {store.uri}/records/a/0.json: the storage kept failing for ")
    assert "(OSError: [Errno 16] Service Unavailable); this looks temporary: the records written so far are kept, " \
           "and the same command resumes once the storage answers (--storage-outage 1 " in str(caught.value)
    assert store.done_items() == set()


def test_a_lost_response_is_the_writes_own_success_and_another_writers_record_is_not(object_store):
    """The store stores the record, the proxy loses its answer; the client tries again under the condition, the
    store refuses it, and the record it holds carries this write's id: a success (the client's own retry on S3 and
    GCS, the runner's on Azure, whose SDK waits 15 s first)."""
    store = ResultStore(object_store.uri("run"), CLIENT_OPTIONS[object_store.name])
    store.outage_s = 60
    lost = object_store.proxy.inject("lose_response", op="write", path="/records/", times=1)
    assert store.write_record(_record("a"))
    assert lost.applied == 1
    writes = [seen for seen in object_store.proxy.requests if seen.op == "write" and "/records/a/" in seen.key]
    assert len(writes) >= 2 and all(seen.conditional for seen in writes)  # stored, answer lost, retry refused
    assert not store.write_record(_record("a"))                  # another write (its own write id)
    assert not store.write_record(_record("a", attempt=2, write_id=next(store.iter_records()).write_id))
    assert [r.output for r in store.iter_records()] == ["a"]


OUTAGE_S = 25
"""An outage longer than 20 s, and one that no client retry lands on the edge of (gcsfs tries again at 15-19 s and
31-36 s, azure-storage-blob at 15-21 s and 36-48 s), so each store meets it the same way every time."""
OUTAGE_EVENTS = {"s3": ["storage.outage", "storage.recovered"], "gcs": [], "azure": []}
"""What the runner logs of the outage: on S3 (client retries off) every failure reaches it, and it waits the outage
out itself; gcsfs and azure-storage-blob wait it out on their own (:data:`CLIENT_OPTIONS`), within the call's deadline
(60 s with ``--storage-outage 60``), so nothing reaches it."""


def test_a_record_write_outlives_an_outage_of_more_than_20_s(object_store):
    store = ResultStore(object_store.uri("run"), CLIENT_OPTIONS[object_store.name])
    store.outage_s = 60
    outage = object_store.proxy.inject("html503", op="write", path="/records/", seconds=OUTAGE_S)
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        assert store.write_record(_record())
    assert time.monotonic() - started >= OUTAGE_S and outage.applied >= 2
    assert [e["event"] for e in logs if e["event"].startswith("storage.")] == OUTAGE_EVENTS[object_store.name]
    assert [r.output for r in store.iter_records()] == ["a"]
    assert store.done_items() == {("a", 0)}


OUTAGE_ERROR = {"s3": "(OSError: [Errno 16] Service Unavailable)",
                "gcs": "(TimeoutError: the storage did not answer within 2 s)",
                "azure": "(TimeoutError: the storage did not answer within 2 s)"}
"""The failure an outage past ``--storage-outage 2`` ends with: S3's 503 itself; on GCS and Azure the call's deadline,
which cuts the client's own retries short."""


def test_an_outage_longer_than_the_limit_stops_with_one_line_on_every_store(object_store):
    store = ResultStore(object_store.uri("run"), CLIENT_OPTIONS[object_store.name])
    store.outage_s = 2
    object_store.proxy.inject("html503", op="write", path="/records/")
    started = time.monotonic()
    with pytest.raises(StorageOutage) as caught:
        store.write_record(_record())
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert message.startswith(f"cannot write {store.uri}/records/a/0.json: the storage kept failing for ")
    assert f" s {OUTAGE_ERROR[object_store.name]}; this looks temporary: the records written so far are kept, " \
           "and the same command resumes once the storage answers (--storage-outage 2 " in message
    assert store.done_items() == set()


@pytest.mark.parametrize("status, body, advice", [
    (403, b"<Error><Code>AuthorizationFailure</Code><Message>denied</Message></Error>",
     "the storage refused the credentials: check them ({credentials})"),
    (404, b"<Error><Code>ContainerNotFound</Code><Message>no such bucket</Message></Error>",
     "check that the bucket (or container) of the storage URI exists, and the endpoint if you set one"),
])
def test_the_advice_fits_the_fault_on_every_store(object_store, status, body, advice):
    store = ResultStore(object_store.uri("run"), CLIENT_OPTIONS[object_store.name])
    object_store.proxy.inject("status", op="write", status=status, body=body)
    with pytest.raises(StorageError) as caught:
        store.write_once(store.path("x.json"), b"{}")
    message = str(caught.value)
    assert message.startswith(f"cannot write {store.uri}/x.json (")
    assert message.endswith(advice.format(credentials=credentials_of(store.uri.split("://")[0])))


class _Flaky:
    """An operation that raises ``errors`` in turn, then returns ``"done"``."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_the_guard_backs_off_with_jitter_and_gives_up_at_its_limit():
    clock = FakeClock()
    guard = OutageGuard(30, clock=clock, sleep=clock.sleep)
    flaky = _Flaky(*[ConnectionResetError("reset")] * 5)
    with structlog.testing.capture_logs() as logs:
        assert guard.call("write x", flaky) == "done"
    assert flaky.calls == 6 and not guard.in_outage
    for attempt, slept in enumerate(clock.slept):
        ceiling = min(10.0, 0.25 * 2**attempt)
        assert ceiling / 2 <= slept <= ceiling
    assert [e["event"] for e in logs] == ["storage.outage", "storage.recovered"]
    assert logs[1]["failed_tries"] == 5

    forever, started = _Flaky(*[TimeoutError("timed out")] * 1000), clock.now
    with pytest.raises(StorageOutage, match=r"^cannot write y: the storage kept failing for 30 s \(TimeoutError: "):
        guard.call("write y", forever)
    assert clock.now - started == pytest.approx(30)          # 30 s after the first failure, never past it
    with pytest.raises(StorageOutage):                        # every later write gives up at once
        guard.call("write z", _Flaky())


def test_a_write_sent_before_the_outage_began_does_not_end_it():
    """Several writes in flight: one sent before the first failure answers after it. That answer says nothing about
    the store now, so the outage goes on, and is logged once each way (it was logged over and begun again)."""
    clock = FakeClock()
    guard = OutageGuard(30, clock=clock, sleep=clock.sleep)

    def sent_then_answered_late() -> str:
        clock.now += 0.5                                    # in flight while another write fails
        guard._failed("write a", ConnectionResetError("reset"))  # another writer's failure: the outage begins
        return "done"

    with structlog.testing.capture_logs() as logs:
        assert guard.call("write b", sent_then_answered_late) == "done"
        assert guard.in_outage                              # b was sent before a failed: no recovery
        assert guard.call("write c", _Flaky(ConnectionResetError("reset"))) == "done"
    assert not guard.in_outage
    assert [e["event"] for e in logs] == ["storage.outage", "storage.recovered"]


def test_the_guard_gives_up_at_its_limit_despite_the_clocks_rounding(monkeypatch):
    """An outage that starts at 7.3 s on the clock: its last wait, cut to the time left, ends a rounding error short
    of the limit; the guard gives up there instead of trying again after ever shorter waits."""
    monkeypatch.setattr(outage, "backoff", lambda attempt: 0.7)
    clock = FakeClock()
    clock.now = 7.3
    forever = _Flaky(*[TimeoutError("timed out")] * 1000)
    with pytest.raises(StorageOutage, match=r"^cannot write y: the storage kept failing for 30 s "):
        OutageGuard(30, clock=clock, sleep=clock.sleep).call("write y", forever)
    assert forever.calls == 44 and clock.now == pytest.approx(37.3)


def test_the_guard_raises_other_failures_at_once_and_retries_nothing_without_a_limit():
    guard = OutageGuard(30, sleep=lambda s: None)
    denied = _Flaky(PermissionError("Access Denied"))
    with pytest.raises(PermissionError):
        guard.call("write x", denied)
    assert denied.calls == 1 and not guard.in_outage
    with pytest.raises(ConnectionResetError):
        OutageGuard(0).call("write x", _Flaky(ConnectionResetError("reset")))


def test_items_wait_while_the_store_is_unavailable_and_go_on_when_it_answers():
    guard = OutageGuard(30, sleep=lambda s: time.sleep(0.05))

    async def scenario() -> list[str]:
        order: list[str] = []
        failing = _Flaky(*[ConnectionResetError("reset")] * 6)
        write = asyncio.create_task(asyncio.to_thread(guard.call, "write x", failing))
        while not guard.in_outage:
            await asyncio.sleep(0.01)
        waiting = asyncio.create_task(guard.wait())
        await asyncio.sleep(0.05)
        order.append("waiting" if not waiting.done() else "went on")
        await write
        await asyncio.wait_for(waiting, 2)
        order.append("went on")
        return order

    assert asyncio.run(scenario()) == ["waiting", "went on"]


def test_waiting_items_stop_when_the_outage_passes_the_limit():
    clock = FakeClock()
    guard = OutageGuard(1, clock=clock, sleep=clock.sleep)
    with pytest.raises(StorageOutage):
        guard.call("write x", _Flaky(*[ConnectionResetError("reset")] * 100))
    with pytest.raises(StorageOutage):
        asyncio.run(guard.wait())


def test_backoff_doubles_up_to_its_cap():
    assert all(0.125 <= backoff(0) <= 0.25 for _ in range(50))
    assert all(5.0 <= backoff(12) <= 10.0 for _ in range(50))
