"""One run, one driver: the lease a driver holds on its run directory (``lease.json``).

A driver creates ``lease.json`` with the records' own write-once primitive (``os.link`` on a local disk, the store's
conditional write on an object store: :mod:`runner.storage.protocols`) before it writes anything else, renews it
while the run executes, and removes it when the run ends. The lease says who holds it (host, pid, run id, since
when) and until when (``expires_at`` = last heartbeat + ``ttl_s``), so a killed driver's lease lapses by itself.

- A second driver finds a live lease and is refused (:class:`~runner.core.errors.LeaseHeld`, one line naming the
  owner). A lapsed lease (expired, or held by a process of this host that no longer exists) is taken over only with
  ``--take-over``; with it, a lease that is still alive is watched until it lapses (its driver died without
  releasing it, a RayJob retry starts before it expires) or is renewed (its driver runs: refused).
- Taking over creates ``lease-takeovers/<token of the lapsed lease>.json`` with the same write-once primitive
  before replacing ``lease.json``: of two drivers taking over one lapsed lease, exactly one creates the marker, and
  the other is refused. The markers stay as the record of every take-over.
- The holder renews by reading ``lease.json`` (is its token still there?) and replacing it, as long as its own
  monotonic clock says the lease is safely alive (renewed less than :data:`SAFE_FRACTION` of ``ttl_s`` ago). Past
  that (the storage was down, the process was paused) it may have lapsed, so the holder takes it over from itself
  through a marker like anyone else: if another driver has taken it, the holder learns that it lost the lease
  (:class:`~runner.core.errors.LeaseLost`). Drivers on different hosts compare wall clocks, so the scheme assumes
  their clocks differ by less than ``(1 - SAFE_FRACTION) * ttl_s`` (15 s for the default 60 s).
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psutil
import structlog
from pydantic import BaseModel

from runner.core.errors import LeaseHeld, LeaseLost, StorageError
from runner.storage.object_store import ObjectStore

LEASE = "lease.json"
TAKEOVERS = "lease-takeovers"
SAFE_FRACTION = 0.75
"""A holder renews by a plain replace only while its last renewal is younger than this share of the ttl."""


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _stamp(moment: _dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def _started(pid: int) -> float | None:
    """The start time of process ``pid`` (seconds since the epoch), or ``None`` if it cannot be read."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


class Lease(BaseModel):
    """The content of ``lease.json``.

    Args:
        token: this holding's id (a take-over draws a new one; a renewal keeps it).
        host, pid: the driver's host name and process id.
        run_id: the run it drives (``None`` until the driver has read or created ``run.json``).
        since: ISO-8601 UTC time the driver took the run.
        heartbeat_at: ISO-8601 UTC time of the latest renewal.
        expires_at: ``heartbeat_at`` + ``ttl_s``: past it, the lease has lapsed.
        ttl_s: seconds a renewal keeps the lease alive.
        pid_started: the driver process's start time (seconds since the epoch, as the OS reports it), which tells
            the driver from a later process that reuses its pid (``None`` in leases of earlier versions).
    """

    token: str
    host: str
    pid: int
    pid_started: float | None = None
    run_id: str | None = None
    since: str
    heartbeat_at: str
    expires_at: str
    ttl_s: float

    @classmethod
    def new(cls, ttl_s: float, run_id: str | None = None) -> Lease:
        """A lease for this process, renewed now."""
        now = _now()
        return cls(token=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(), pid_started=_started(os.getpid()),
                   run_id=run_id,
                   since=_stamp(now), heartbeat_at=_stamp(now), expires_at=_stamp(now + _dt.timedelta(seconds=ttl_s)),
                   ttl_s=ttl_s)

    def renewed(self, run_id: str | None = None) -> Lease:
        """This lease with a heartbeat now (and ``run_id`` if given)."""
        now = _now()
        return self.model_copy(update={"heartbeat_at": _stamp(now), "run_id": run_id or self.run_id,
                                       "expires_at": _stamp(now + _dt.timedelta(seconds=self.ttl_s))})

    def expired(self) -> bool:
        """Whether ``expires_at`` has passed (on this machine's clock)."""
        return _dt.datetime.fromisoformat(self.expires_at) <= _now()

    def driver_gone(self) -> bool:
        """Whether the holder was a process of this host that no longer runs (a killed driver): its pid is gone,
        is a zombie (killed, not yet reaped: ``timeout -s KILL`` leaves one until PID 1 reaps it, and PID 1 of many
        containers never does), or is another process's now (its start time differs)."""
        if self.host != socket.gethostname():
            return False
        try:
            process = psutil.Process(self.pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
            return self.pid_started is not None and abs(process.create_time() - self.pid_started) > 1.0
        except psutil.NoSuchProcess:
            return True
        except psutil.AccessDenied:
            return False

    def lapsed(self) -> bool:
        """Whether the lease may be taken over: it expired, or its driver is gone."""
        return self.expired() or self.driver_gone()

    def owner(self) -> str:
        """``a driver on host H (pid P) since T``."""
        return f"a driver on host {self.host} (pid {self.pid}) since {self.since}"

    def state(self) -> str:
        """``driver gone`` (a process of this host that no longer exists: the same command takes its lease over,
        expired or not), ``expired`` or ``alive``."""
        if self.driver_gone():
            return "driver gone"
        return "expired" if self.expired() else "alive"

    def describe(self) -> dict[str, Any]:
        """The lease with its ``state`` and ``alive``, for ``status``."""
        state = self.state()
        return {**self.model_dump(exclude={"token"}), "state": state, "alive": state == "alive"}


@dataclass
class HeldLease:
    """A lease this process holds: the lease as last written, and :func:`time.monotonic` just before that write."""

    lease: Lease
    renewed: float

    @property
    def safe(self) -> bool:
        """Whether the lease is surely alive by this process's own clock (renewed within the safe share of its
        ttl), so a plain replace cannot overwrite another driver's take-over."""
        return time.monotonic() - self.renewed < SAFE_FRACTION * self.lease.ttl_s


def read_lease(store: ObjectStore) -> Lease | None:
    """The run's lease, or ``None`` if it has none.

    Raises:
        StorageError: the store cannot be read, or ``lease.json`` is not a lease.
    """
    try:
        data = store.read_file(LEASE)
    except Exception as exc:  # noqa: BLE001 - any backend failure becomes one clear line
        raise StorageError(store.explain(f"cannot read {store.display(store.path(LEASE))}", exc)) from None
    if data is None:
        return None
    try:
        return Lease.model_validate_json(data)
    except ValueError:
        raise StorageError(f"{store.display(store.path(LEASE))} is not a lease of this runner; remove it if no "
                           "driver is running on this storage") from None


def acquire(store: ObjectStore, ttl_s: float, take_over: bool = False) -> HeldLease:
    """Take the run's lease before anything else is written.

    Args:
        store: the run's store.
        ttl_s: seconds the lease lives without a renewal.
        take_over: replace a lapsed lease (``--take-over``); a live one is watched until it lapses (then taken
            over) or is renewed (then refused), at most until it expires. A renewed lease is never replaced. A
            lease whose driver was a process of this host that no longer exists is taken over without it.

    Raises:
        LeaseHeld: a live lease (renewed while ``take_over`` waited); an expired one of another host without
            ``take_over``; or another driver took a lapsed one over first (nothing is written).
        StorageError: the store cannot be written.
    """
    current = _create_or_read(store, ttl_s)
    if isinstance(current, HeldLease):
        return current
    where = store.uri
    if not current.lapsed() and take_over:
        current = _wait_for_lapse(store, current, ttl_s)
        if isinstance(current, HeldLease):
            return current
    if not current.lapsed() and take_over:
        raise LeaseHeld(f"{where} is in use by {current.owner()}: its lease was renewed while --take-over waited for "
                        "it to lapse, so its driver runs; nothing was written; wait for that run to finish")
    if not current.lapsed():
        raise LeaseHeld(
            f"{where} is in use by {current.owner()} (its lease is alive until {current.expires_at}); nothing was "
            "written; wait for that run to finish, or, if its driver is gone, run again with --take-over (it waits "
            "for the lease to lapse)"
        )
    # A driver of this host whose process is gone cannot come back: the same command resumes without --take-over.
    # An expired lease of another host may hide a driver cut off from the storage, so taking it over is the user's.
    gone = "its process is gone" if current.driver_gone() else f"its lease expired at {current.expires_at}"
    if not take_over and not current.driver_gone():
        raise LeaseHeld(
            f"{where} was left by {current.owner()}: {gone} without releasing the run (killed, or cut off from the "
            "storage); nothing was written; if no driver runs on it any more, run again with --take-over"
        )
    held = _take_over(store, current, ttl_s)
    if held is None:
        raise LeaseHeld(f"another driver took {where} over from {current.owner()} first; nothing was written")
    structlog.get_logger("runner").warning(
        "lease.taken_over", previous=current.owner(), previous_state=current.state(),
        detail=(f"{gone}: this driver now owns the run" if not take_over else "--take-over: this driver now owns "
                "the run; the previous one, if it still runs, stops at its next renewal"))
    return held


def _create_or_read(store: ObjectStore, ttl_s: float) -> HeldLease | Lease:
    """A new lease of this process if the run has none (:class:`HeldLease`), else the lease it has."""
    for _ in range(3):
        started, lease = time.monotonic(), Lease.new(ttl_s)
        if store.write_once(store.path(LEASE), lease.model_dump_json(indent=2).encode()):
            return HeldLease(lease, started)
        current = read_lease(store)
        if current is not None:
            return current
    raise LeaseHeld(f"the lease of {store.uri} keeps appearing and disappearing: other drivers are starting on this "
                    "storage; run one at a time")


def _wait_for_lapse(store: ObjectStore, alive: Lease, ttl_s: float) -> HeldLease | Lease:
    """Watch ``alive`` until it lapses (returned, to be taken over), is released (a new lease of this process), or
    is renewed or replaced (returned as it is now: alive)."""
    structlog.get_logger("runner").info(
        "lease.waiting", owner=alive.owner(), expires_at=alive.expires_at,
        detail="--take-over: waiting for the lease to lapse; a driver that still runs renews it, and then this one "
        "is refused")
    current: Lease | None = alive
    while current is not None and not current.lapsed():
        if (current.token, current.heartbeat_at) != (alive.token, alive.heartbeat_at):
            return current
        left = (_dt.datetime.fromisoformat(current.expires_at) - _now()).total_seconds()
        time.sleep(min(max(left, 0.0) + 0.01, max(current.ttl_s / 8, 0.05)))
        current = read_lease(store)
    return _create_or_read(store, ttl_s) if current is None else current


def _take_over(store: ObjectStore, lapsed: Lease, ttl_s: float, run_id: str | None = None,
               since: str | None = None) -> HeldLease | None:
    """Replace ``lapsed`` by a new lease of this process (held ``since`` then, if given), unless another driver
    claimed it first (``None``)."""
    started, lease = time.monotonic(), Lease.new(ttl_s, run_id)
    if since is not None:
        lease = lease.model_copy(update={"since": since})
    marker = store.path(TAKEOVERS, f"{lapsed.token}.json")
    if not store.write_once(marker, lease.model_dump_json(indent=2).encode()):
        return None
    store.write_file(LEASE, lease.model_dump_json(indent=2).encode())
    return HeldLease(lease, started)


def renew(store: ObjectStore, held: HeldLease, run_id: str | None = None) -> None:
    """Renew ``held`` (and record ``run_id`` in it if given), in place.

    Raises:
        LeaseLost: another driver took the run over, or ``lease.json`` was removed.
        StorageError: the store cannot be read or written (the lease stays as it was; try again).
    """
    started = time.monotonic()
    if held.safe:
        current = read_lease(store)
        if current is None or current.token != held.lease.token:
            raise _lost(store, held, current)
        lease = held.lease.renewed(run_id)
        store.write_file(LEASE, lease.model_dump_json(indent=2).encode())
        held.lease, held.renewed = lease, started
        return
    # The lease may have lapsed meanwhile: claim it back as any driver taking it over would.
    taken = _take_over(store, held.lease, held.lease.ttl_s, run_id or held.lease.run_id, held.lease.since)
    if taken is None:
        raise _lost(store, held, read_lease(store))
    held.lease, held.renewed = taken.lease, taken.renewed


def _lost(store: ObjectStore, held: HeldLease, current: Lease | None) -> LeaseLost:
    silent = time.monotonic() - held.renewed
    if current is None:
        return LeaseLost(f"this driver's lease on {store.uri} (lease.json) was removed by another process after "
                         f"{silent:.0f} s without a renewal; the driver stopped so that two drivers do not run one "
                         "run; records written so far are kept, and the same command resumes")
    return LeaseLost(f"{current.owner()} took {store.uri} over after this driver's lease lapsed (not renewed for "
                     f"{silent:.0f} s: a storage outage, or a paused process); this driver stopped; records written "
                     "so far are kept and the other driver goes on")


def release(store: ObjectStore, held: HeldLease) -> bool:
    """Remove the lease if this process still surely holds it; whether it did. A lease that may have lapsed is
    left to lapse (removing it could remove another driver's take-over).

    Raises:
        StorageError: the store cannot be read or written.
    """
    if not held.safe:
        return False
    current = read_lease(store)
    if current is None or current.token != held.lease.token:
        return False
    store.remove_file(LEASE)
    return True
