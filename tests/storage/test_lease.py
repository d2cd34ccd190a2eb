"""One run, one driver: the lease on a local disk and on each object store (moto's S3, fake-gcs-server, Azurite): a
live lease refuses a second driver, a lapsed one is taken over only with ``take_over`` and by one taker (which waits
for a live lease to lapse, and is refused if it is renewed meanwhile), a holder that lost its lease learns it at its
next renewal."""

import datetime as dt
import json
import re
import os
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
import structlog

from runner.core.errors import LeaseHeld, LeaseLost
from runner.storage import ResultStore
from runner.storage import lease
from runner.storage.lease import LEASE, TAKEOVERS, Lease
from tests.support.emulators import STORES


@pytest.fixture(params=["local", *STORES])
def store(request, tmp_path):
    if request.param == "local":
        return ResultStore(str(tmp_path / "run"))
    return ResultStore(request.getfixturevalue("object_stores").open(request.param).uri("run"))


def stored(store: ResultStore) -> dict:
    return json.loads(store.read_file(LEASE))


def leave(store: ResultStore, **fields) -> Lease:
    """Put a lease of another driver in the store, as one that died would leave it."""
    now = dt.datetime.now(dt.timezone.utc)
    values = {"token": "0" * 32, "host": "other-host", "pid": 4242, "run_id": "r-1",
              "since": (now - dt.timedelta(minutes=5)).isoformat(), "heartbeat_at": now.isoformat(),
              "expires_at": (now + dt.timedelta(seconds=60)).isoformat(), "ttl_s": 60.0, **fields}
    left = Lease(**values)
    store.write_file(LEASE, left.model_dump_json().encode())
    return left


def test_a_second_driver_is_refused_while_the_lease_is_alive_and_gets_it_once_released(store):
    held = lease.acquire(store, ttl_s=60)
    assert stored(store)["host"] == socket.gethostname() and stored(store)["pid"] == held.lease.pid
    with pytest.raises(LeaseHeld) as caught:
        lease.acquire(store, ttl_s=60)
    assert str(caught.value) == (
        f"{store.uri} is in use by a driver on host {socket.gethostname()} (pid {held.lease.pid}) since "
        f"{held.lease.since} (its lease is alive until {held.lease.expires_at}); nothing was written; wait for that "
        "run to finish, or, if its driver is gone, run again with --take-over (it waits for the lease to lapse)")
    assert lease.release(store, held)
    assert store.read_file(LEASE) is None
    again = lease.acquire(store, ttl_s=60)
    assert again.lease.token != held.lease.token


def test_an_expired_lease_is_taken_over_only_with_take_over(store):
    expired = leave(store, expires_at="2026-01-01T00:00:00+00:00")
    with pytest.raises(LeaseHeld) as caught:
        lease.acquire(store, ttl_s=60)
    assert str(caught.value) == (
        f"{store.uri} was left by a driver on host other-host (pid 4242) since {expired.since}: its lease expired at "
        "2026-01-01T00:00:00+00:00 without releasing the run (killed, or cut off from the storage); nothing was "
        "written; if no driver runs on it any more, run again with --take-over")
    assert stored(store)["token"] == expired.token
    held = lease.acquire(store, ttl_s=60, take_over=True)
    assert stored(store)["token"] == held.lease.token != expired.token
    marker = json.loads(store.fs.cat_file(store.path(TAKEOVERS, f"{expired.token}.json")))
    assert marker["token"] == held.lease.token


def test_a_lease_whose_process_is_gone_on_this_host_is_taken_over_without_the_flag(store):
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = leave(store, host=socket.gethostname(), pid=int(child.stdout))
    assert dead.state() == "driver gone" and not dead.describe()["alive"]
    with structlog.testing.capture_logs() as logs:
        held = lease.acquire(store, ttl_s=60)
    assert held.lease.pid == os.getpid() != dead.pid and stored(store)["token"] == held.lease.token
    assert [e["detail"] for e in logs if e["event"] == "lease.taken_over"] == [
        "its process is gone: this driver now owns the run"]


def test_a_lease_whose_driver_is_a_zombie_is_taken_over_without_the_flag(store):
    """A driver killed and not yet reaped (``timeout -s KILL``; PID 1 reaps late, or never in some containers) is
    a zombie: its pid still answers ``kill(pid, 0)``, yet it is dead."""
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    killed.kill()
    deadline = time.monotonic() + 10
    while psutil.Process(killed.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        os.kill(killed.pid, 0)  # the old test of a live process says "alive"
        dead = leave(store, host=socket.gethostname(), pid=killed.pid)
        assert dead.state() == "driver gone"
        held = lease.acquire(store, ttl_s=60)
        assert stored(store)["token"] == held.lease.token and held.lease.pid_started is not None
    finally:
        killed.wait()


def test_a_lease_whose_pid_another_process_reuses_is_taken_over(store):
    """The pid is alive, but it started long after the driver took the lease: another process reuses it."""
    reused = leave(store, host=socket.gethostname(), pid=os.getpid(), pid_started=time.time() - 86400)
    assert reused.state() == "driver gone"
    alive = leave(store, host=socket.gethostname(), pid=os.getpid(), pid_started=psutil.Process().create_time())
    assert alive.state() == "alive"


def test_two_drivers_taking_over_one_lapsed_lease_at_once_one_wins(store, monkeypatch):
    """Both drivers have read the lapsed lease before either claims it: the claims race on one marker.

    Without holding both at the claim, the second thread may read the first one's fresh lease instead, and then
    (rightly) waits a whole ttl for it to lapse: that is the waiting test's case, not this one."""
    leave(store, expires_at="2026-01-01T00:00:00+00:00")
    both_read = threading.Barrier(2, timeout=60)
    claim = lease._take_over

    def claim_together(*args, **kwargs):
        both_read.wait()
        return claim(*args, **kwargs)

    monkeypatch.setattr(lease, "_take_over", claim_together)
    results: list[object] = []

    def take() -> None:
        try:
            results.append(lease.acquire(store, ttl_s=60, take_over=True))
        except LeaseHeld as exc:
            results.append(exc)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [r for r in results if isinstance(r, lease.HeldLease)]
    losers = [r for r in results if isinstance(r, LeaseHeld)]
    assert len(winners) == len(losers) == 1
    assert str(losers[0]).startswith(f"another driver took {store.uri} over from a driver on host other-host")
    assert stored(store)["token"] == winners[0].lease.token


def test_renewal_moves_the_heartbeat_and_keeps_the_holding(store):
    held = lease.acquire(store, ttl_s=60)
    first = stored(store)
    time.sleep(0.01)
    lease.renew(store, held, run_id="r-7")
    renewed = stored(store)
    assert renewed["token"] == first["token"] and renewed["since"] == first["since"]
    assert renewed["heartbeat_at"] > first["heartbeat_at"] and renewed["expires_at"] > first["expires_at"]
    assert renewed["run_id"] == "r-7"


def test_a_holder_whose_lease_was_taken_over_learns_it_and_leaves_the_new_lease(store):
    held = lease.acquire(store, ttl_s=60)
    held.renewed -= 3600   # this driver was paused for an hour: its lease lapsed
    leave(store, token=held.lease.token, host=held.lease.host, pid=held.lease.pid,
          expires_at="2026-01-01T00:00:00+00:00")
    taker = lease.acquire(store, ttl_s=60, take_over=True)
    with pytest.raises(LeaseLost) as caught:
        lease.renew(store, held)
    assert str(caught.value).startswith(f"a driver on host {socket.gethostname()} (pid {taker.lease.pid}) since ")
    # 3600 s, plus the time this test took since (a second or so on a busy machine and a slow store)
    assert re.search(rf"took {re.escape(store.uri)} over after this driver's lease lapsed \(not renewed for "
                     r"360[0-9] s", str(caught.value))
    assert not lease.release(store, held)
    assert stored(store)["token"] == taker.lease.token


def test_a_holder_that_may_have_lapsed_claims_its_lease_back_when_no_one_took_it(store):
    held = lease.acquire(store, ttl_s=60)
    since, token = held.lease.since, held.lease.token
    held.renewed -= 50     # past the safe share of the ttl: a plain replace could overwrite a take-over
    lease.renew(store, held)
    assert stored(store)["token"] == held.lease.token != token and stored(store)["since"] == since
    assert store.fs.exists(store.path(TAKEOVERS, f"{token}.json"))


def test_a_driver_replaced_while_it_was_renewing_safely_learns_it_too(store):
    held = lease.acquire(store, ttl_s=60)
    leave(store)
    with pytest.raises(LeaseLost, match="^a driver on host other-host \\(pid 4242\\) since .* took "):
        lease.renew(store, held)


def test_take_over_waits_for_a_lease_that_is_not_renewed_to_lapse(store):
    soon = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    leave(store, expires_at=soon.isoformat(), ttl_s=1.0)
    held = lease.acquire(store, ttl_s=60, take_over=True)
    # Taken once the lease expired, not before, and soon after (the write of the left lease itself may take most
    # of its second on a loaded machine, so the wait is measured against the expiry, not a stopwatch).
    taken = dt.datetime.fromisoformat(held.lease.since)
    assert soon <= taken < soon + dt.timedelta(seconds=5)
    assert stored(store)["token"] == held.lease.token


def test_take_over_is_refused_when_the_lease_is_renewed_while_it_waits(store):
    # A ttl of 3 s renewed every 0.2 s: with 1 s, a renewal's few requests to a loaded S3 emulator took longer than
    # the ttl and the lease lapsed for real (CI: taken over).
    running = lease.acquire(store, ttl_s=3)
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(0.2):
            lease.renew(store, running)

    beating = threading.Thread(target=heartbeat)
    beating.start()
    try:
        started = time.monotonic()
        with pytest.raises(LeaseHeld, match="its lease was renewed while --take-over waited for it to lapse, so its "
                                            "driver runs; nothing was written"):
            lease.acquire(store, ttl_s=60, take_over=True)
        assert time.monotonic() - started < 3  # refused at the first renewal it sees, before the lease could lapse
    finally:
        stop.set()
        beating.join()
    assert stored(store)["token"] == running.lease.token
