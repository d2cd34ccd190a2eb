"""The driver's heartbeat on its lease: a daemon thread renews ``lease.json`` while the run executes.

A thread, not an asyncio task, because a sequential run executes a sync solution in the event loop, which would
stall a task for as long as the solution runs. When the lease is lost (another driver took the run over), the keeper
calls ``on_lost`` once (the run cancels its execution) and stops; a renewal that fails because the storage does not
answer is logged once (``lease.renew_failed``) and tried again at the next beat (:mod:`runner.storage.lease` says
how a lease that may have lapsed meanwhile is claimed back).

Example::

    keeper = LeaseKeeper(store, lease.acquire(store, ttl_s=60))
    keeper.start()
    try:
        ...                              # the run; keeper.check() raises LeaseLost once the lease is lost
    finally:
        keeper.stop()                    # stops the thread, then removes the lease if this driver still holds it
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from runner.core.errors import LeaseLost, RunnerError, exception_line
from runner.storage import lease
from runner.storage.store import ResultStore

BEATS_PER_TTL = 4
"""Renewals per lease ttl: a lease of 60 s is renewed every 15 s."""


class LeaseKeeper:
    """Renews ``held`` every ``ttl / BEATS_PER_TTL`` seconds in a daemon thread.

    Args:
        store: the run's store.
        held: the lease :func:`runner.storage.lease.acquire` returned.
        on_lost: called once, from the keeper's thread, when the lease is lost.

    After the lease is lost, :attr:`lost` holds the :class:`LeaseLost` error.
    """

    def __init__(self, store: ResultStore, held: lease.HeldLease, on_lost: Callable[[], None] | None = None) -> None:
        self.store = store
        self.held = held
        self.on_lost = on_lost
        self.lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._failing = False
        self._thread = threading.Thread(target=self._beat, name="runner-lease", daemon=True)
        self._log = structlog.get_logger("runner")

    def start(self) -> None:
        """Start renewing."""
        self._thread.start()

    def bind_run(self, run_id: str) -> None:
        """Renew now with the run's id in the lease (once the run directory is opened).

        Raises:
            LeaseLost: the lease was lost.
            StorageError: the store cannot be written.
        """
        with self._lock:
            self.check()
            lease.renew(self.store, self.held, run_id)

    def check(self) -> None:
        """Raise :attr:`lost` if the lease was lost."""
        if self.lost is not None:
            raise self.lost

    def stop(self) -> None:
        """Stop renewing and remove the lease. A lease that may have lapsed (the storage did not answer for a
        while, so renewals failed) is claimed back first, as a renewal does (:func:`runner.storage.lease.renew`);
        one that another driver took over meanwhile stays theirs. If the store fails, the failure is logged
        (``lease.not_released``, saying how the run goes on) and the lease lapses by itself."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.lost is not None:
            return
        try:
            if not self.held.safe:
                lease.renew(self.store, self.held)
            released = lease.release(self.store, self.held)
        except LeaseLost as exc:
            self._log.error("lease.lost", detail=str(exc))
            return
        except RunnerError as exc:  # the storage failed: the lease lapses by itself
            self._log.warning("lease.not_released", error=str(exc), detail=self._lapses())
            return
        if not released:
            self._log.warning("lease.not_released", detail=self._lapses())

    def _lapses(self) -> str:
        """What a lease left behind means for the next run (:func:`runner.storage.lease.acquire`)."""
        return (f"lease.json stays until it lapses at {self.held.lease.expires_at}; once this process has exited, "
                "the same command on this host resumes at once (it takes over a lease whose process is gone); from "
                "another host, run it with --take-over (it waits for the lease to lapse)")

    def _beat(self) -> None:
        interval = self.held.lease.ttl_s / BEATS_PER_TTL
        while not self._stop.wait(interval):
            try:
                with self._lock:
                    lease.renew(self.store, self.held)
            except LeaseLost as exc:
                self.lost = exc
                self._log.error("lease.lost", detail=str(exc))
                if self.on_lost is not None:
                    self.on_lost()
                return
            except Exception as exc:  # noqa: BLE001 - the storage may be down; the next beat tries again
                if not self._failing:
                    self._failing = True
                    self._log.warning("lease.renew_failed", error=exception_line(exc),
                                      detail="the lease is renewed again at the next beat; it lapses at "
                                      f"{self.held.lease.expires_at} if none succeeds")
                continue
            if self._failing:
                self._failing = False
                self._log.info("lease.renewed", detail="the lease is renewed again")
