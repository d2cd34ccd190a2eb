"""Storage faults between the store and S3 (the moto server behind the fault-injecting proxy of
``tests/support/s3_proxy.py``): advice that fits the fault, record writes that outlive an outage, a lost response told
apart from another writer's record, and the outage guard itself."""

import asyncio
import time

import pytest
import structlog

from runner.core.errors import StorageError, StorageOutage
from runner.core.record import TaskRecord
from runner.storage import ResultStore
from runner.storage import outage
from runner.storage.outage import OutageGuard, backoff
from tests.support.clock import FakeClock

NO_CLIENT_RETRIES = {"config_kwargs": {"retries": {"total_max_attempts": 1}}}
"""botocore's own retries off, so that each fault reaches the runner at once (s3fs still tries a SlowDown and a
broken connection 5 times)."""


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
    ("html503", {"seconds": 1.5}),
    ("slowdown", {"times": 8}),
    ("reset", {"seconds": 2.5}),
    ("delay", {"delay": 1.0, "times": 7}),
])
def test_a_record_write_outlives_an_outage_and_logs_it_once_each_way(store, s3_proxy, kind, options):
    store.outage_s = 60
    if kind == "delay":
        store.storage_options["config_kwargs"]["read_timeout"] = 0.3
    fault = s3_proxy.inject(kind, method="PUT", path="/records/", **options)
    with structlog.testing.capture_logs() as logs:
        assert store.write_record(_record())
    assert fault.applied >= 2
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


def test_a_lost_response_is_the_writes_own_success_and_another_writers_record_is_not(store, s3_proxy):
    lost = s3_proxy.inject("lose_response", method="PUT", path="/records/", times=1)
    assert store.write_record(_record("a"))
    assert lost.applied == 1
    puts = [seen for seen in s3_proxy.requests if seen.method == "PUT" and "/records/a/" in seen.path]
    assert len(puts) >= 2  # the write reached S3, its answer was lost, and the retry was refused
    assert not store.write_record(_record("a"))                  # another write (its own write id)
    assert not store.write_record(_record("a", attempt=2, write_id=next(store.iter_records()).write_id))
    assert [r.output for r in store.iter_records()] == ["a"]


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
