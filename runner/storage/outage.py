"""Outliving a storage outage: record writes retry, with backoff and jitter, while the store fails with errors that
look temporary, for up to a limit; new items wait meanwhile.

One :class:`OutageGuard` per store object, so every write of one process (the driver, or one Ray worker with its
concurrent items) shares one view of the outage: it is logged once when it starts (``storage.outage``) and once
when it ends (``storage.recovered``), its limit counts from its first failure, and when the limit passes every
write and every waiting item stops with the same :class:`~runner.core.errors.StorageOutage`.

The waits are the run's one backoff policy (:class:`runner.core.backoff.Backoff`) with "equal jitter": each is
drawn uniformly between half and all of ``min(10, 0.25 * 2**n)`` seconds (:data:`WRITE_BACKOFF`), so writers that
failed together do not come back together. botocore and s3fs retry a few times on their own first (a ``SlowDown``, a reset connection); this guard
is the outer loop, measured in minutes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import structlog

from runner.core.backoff import Backoff
from runner.core.errors import StorageOutage, exception_line
from runner.storage.error_kinds import is_transient

T = TypeVar("T")

WRITE_BACKOFF = Backoff(initial_delay=0.25, max_delay=10.0, jitter=0.5)
"""The waits between tries of one write: from 0.25 s, doubling, up to 10 s, each less up to half of it."""
POLL_S = 0.2
"""How often an item held back by an outage looks again, in seconds."""
_CLOCK_EPSILON_S = 1e-6

_log = structlog.get_logger("runner")


def backoff(attempt: int) -> float:
    """Seconds to wait before try ``attempt + 2`` of a write (``attempt`` >= 0: failed tries so far, less one)."""
    return WRITE_BACKOFF.delay(attempt + 1)


class OutageGuard:
    """The outage state of one store in one process.

    Args:
        limit_s: seconds from an outage's first failure after which writes give up.
        mask: hides secrets in a text before it is logged or raised (the store's storage options).
        clock: monotonic seconds (a test may pass a fake one); ``sleep`` waits that many seconds.
    """

    def __init__(self, limit_s: float, mask: Callable[[str], str] = str,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.limit_s = limit_s
        self._mask = mask
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self._gave_up: StorageOutage | None = None

    @property
    def in_outage(self) -> bool:
        """Whether the latest write of this process failed and none has succeeded since."""
        return self._since is not None

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, tried again after each failure that :func:`~runner.storage.error_kinds.is_transient` calls
        temporary, until it succeeds or the outage has lasted :attr:`limit_s`.

        With a limit of 0, nothing is retried: every failure is raised as it is.

        Args:
            what: the operation in words, for logs and the error (``write s3://bucket/run/records/a/0.json``).
            fn: the operation; any other exception (``FileExistsError`` of a refused conditional write, a 403) is
                raised at once.

        Raises:
            StorageOutage: the outage lasted :attr:`limit_s` (one line: what failed, that it looks temporary, and
                that the same command resumes).
        """
        attempt = 0
        while True:
            if self._gave_up is not None:
                raise self._gave_up
            sent = self._clock()
            try:
                result = fn()
            except Exception as exc:
                if self.limit_s <= 0 or not is_transient(exc):
                    raise
                since = self._failed(what, exc)
                elapsed = self._clock() - since
                # Within a microsecond of the limit counts as past it: a wait cut to the time left can end a
                # rounding error short of it, and the next waits would then be that short too.
                if elapsed >= self.limit_s - _CLOCK_EPSILON_S:
                    raise self._give_up(what, exc, elapsed) from None
                self._sleep(min(backoff(attempt), self.limit_s - elapsed))
                attempt += 1
                continue
            self._succeeded(sent)
            return result

    async def wait(self) -> None:
        """Return once no outage is in progress (at once, usually): an item waits here before its solution runs,
        so an outage holds new items back instead of paying for solutions whose records cannot be written.

        Raises:
            StorageOutage: the outage passed its limit while the item waited.
        """
        while self._since is not None:
            if self._gave_up is not None:
                raise self._gave_up
            await asyncio.sleep(POLL_S)
        if self._gave_up is not None:
            raise self._gave_up

    def _failed(self, what: str, exc: BaseException) -> float:
        """Count one failed try; log ``storage.outage`` if it starts one. The outage's start (monotonic s)."""
        with self._lock:
            self._failures += 1
            if self._since is None:
                self._since = self._clock()
                _log.warning("storage.outage", failed=what, error=self._mask(exception_line(exc)),
                             limit_s=self.limit_s, detail="the storage looks temporarily unavailable: record writes "
                             f"retry with backoff and new items wait, for up to {self.limit_s:g} s")
            return self._since

    def _succeeded(self, sent: float) -> None:
        """A write sent at ``sent`` (monotonic s) went through: log ``storage.recovered`` if it ends an outage.

        Only a write sent after the outage's first failure ends it: one sent before, whose answer arrives after that
        failure (several writes are in flight at once), says nothing about the store now, and counting it logged
        the outage as over and begun again within a second."""
        if self._since is None:
            return
        with self._lock:
            if self._since is None or sent < self._since:
                return
            seconds = self._clock() - self._since
            _log.info("storage.recovered", seconds=round(seconds, 3), failed_tries=self._failures,
                      detail="the storage answers again; record writes and new items go on")
            self._since, self._failures = None, 0

    def _give_up(self, what: str, exc: BaseException, elapsed: float) -> StorageOutage:
        with self._lock:
            if self._gave_up is None:
                self._gave_up = StorageOutage(self._mask(
                    f"cannot {what}: the storage kept failing for {elapsed:.0f} s ({exception_line(exc)}); this "
                    "looks temporary: the records written so far are kept, and the same command resumes once the "
                    f"storage answers (--storage-outage {self.limit_s:g} is the longest outage a run waits out)"
                ))
            return self._gave_up
