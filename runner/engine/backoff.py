"""The request rate one model endpoint is held to, adapted to the server's refusals for rate (429, or 503 with
``Retry-After``).

Pure bookkeeping with time passed in (seconds of one monotonic clock), unit-tested with a fake clock; each
:class:`~runner.engine.limiter.EndpointTraffic` holds one :class:`RateControl`. A refusal also pauses the endpoint
for every worker until the time the server gave (``Retry-After``): that pause is the endpoint's, not decided here,
and it is what a server that refuses everything meets. The rate answers a different question, how fast to send once
the server takes requests again, and follows what the server is seen to accept:

- Evidence first: a refusal lowers the rate only when at least :data:`MIN_OBSERVED` answers came in over the last
  :data:`WINDOW_S` seconds. A refusal among a few answers says nothing of the rate the server takes; the pause alone
  applies.
- A decrease sets the rate to what the server accepted over that window (answers that were not refusals, per
  second, over at least one second), never below :data:`MIN_RATE` and never above the rate in force: the server has
  just shown that it takes that much, so the rate never collapses below it, as repeated halving (TCP's
  multiplicative decrease, RFC 5681) would against a server that keeps refusing.
- A decrease is judged by the answers that follow it, from :data:`HOLD_S` after it (requests sent at the new rate):
  until :data:`MIN_OBSERVED` of them came in, refusals only pause. If refusals among them are still at least
  :data:`UNDO_SHARE` of the share that caused the decrease, slowing down did not help: the refusals are not about
  the rate (a server that refuses a share of requests whatever the rate, or one whose quota is gone), so the
  decrease is undone, as TCP undoes a spurious reduction of its window (RFC 4015), and for :data:`TOLERATE_S`
  seconds refusals at that share do not lower the rate (then a decrease is tried again: the server may have changed).
- The rate grows back additively, as in TCP's congestion avoidance (RFC 5681): by its ceiling (``--max-rpm``) or,
  without one, by the highest rate a decrease was made from, divided by :data:`INCREASE_S`, each second once any
  pause is over; so from any low it is back where it was within :data:`INCREASE_S` seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

INCREASE_S = 20.0
"""Seconds the rate takes to grow by its ceiling, or by the highest rate a decrease was made from."""
HOLD_S = 1.0
"""Seconds after a decrease whose answers are still those of requests sent before it: they neither decrease the rate
again nor judge the decrease."""
WINDOW_S = 2.0
"""Seconds of answers the rates sent and accepted count."""
MIN_OBSERVED = 10
"""Answers a decision needs: in the window to decrease, after a decrease to judge it."""
MIN_RATE = 1.0
"""The lowest rate a decrease goes to, in requests per second: a server that takes fewer says so with its pauses,
which every worker honours whatever the rate, and ``--max-rpm`` sets a lower rate."""
TOLERATE_S = 60.0
"""Seconds a share of refusals found not to be about the rate is tolerated."""
UNDO_SHARE = 0.75
"""Two shares of refusals are the same within this factor: a decrease after which refusals are that frequent is undone,
and a share of refusals the same as a tolerated one does not lower the rate."""


@dataclass
class _Trial:
    """A decrease being judged: the rate before it (``None``: no limit), the share of refusals that caused it, and
    the answers (and refusals among them) since ``since``."""

    rate: float | None
    share: float
    since: float
    answers: int = 0
    refused: int = 0


@dataclass
class RateControl:
    """The request rate of one endpoint (see the module's docstring).

    Args:
        ceiling: the configured rate (requests/s), or ``None``: no limit until the server refuses.
        since: the time the endpoint is first seen.

    Attributes:
        rate: the rate in force (requests/s), ``None`` without a limit.
        decreases: decreases made; undone: those of them found not to help and undone.
        tolerated: the share of refusals found not to be about the rate (0: none), until ``tolerated_until``.
    """

    ceiling: float | None
    since: float
    rate: float | None = None
    decreases: int = 0
    undone: int = 0
    tolerated: float = 0.0
    tolerated_until: float = -math.inf
    _step: float | None = None
    _grown_at: float = 0.0
    _last_decrease: float = -math.inf
    _trial: _Trial | None = None
    _window: deque[tuple[float, bool]] = field(default_factory=deque)
    _refused: int = 0

    def __post_init__(self) -> None:
        self._grown_at = self.since
        if self.ceiling is not None:
            self.rate = self.ceiling
            self._step = self.ceiling / INCREASE_S

    def answered(self, refused: bool, now: float) -> bool:
        """Account for one answer at ``now`` (``refused``: a refusal for rate); whether the rate changed."""
        self._window.append((now, refused))
        self._refused += refused
        while self._window[0][0] < now - WINDOW_S:
            self._refused -= self._window.popleft()[1]
        trial = self._trial
        if trial is not None and now >= trial.since:
            trial.answers += 1
            trial.refused += refused
        return refused and self._refusal(now)

    def _refusal(self, now: float) -> bool:
        if now - self._last_decrease < HOLD_S:
            return False
        trial = self._trial
        if trial is not None:
            if trial.answers < MIN_OBSERVED:
                return False
            self._trial = None
            if trial.refused / trial.answers >= UNDO_SHARE * trial.share:
                self.undone += 1
                self.tolerated = max(self.tolerated if now < self.tolerated_until else 0.0, trial.share)
                self.tolerated_until = now + TOLERATE_S
                rate = None if trial.rate is None or self.rate is None else max(trial.rate, self.rate)
                return self._set(rate, now)
        answers = len(self._window)
        tolerated = self.tolerated if now < self.tolerated_until else 0.0
        if answers < MIN_OBSERVED or self._refused / answers * UNDO_SHARE <= tolerated:
            return False
        span = min(WINDOW_S, max(1.0, now - self._window[0][0]))
        accepted = max(MIN_RATE, (answers - self._refused) / span)
        if self.rate is not None and accepted >= self.rate:
            return False
        if self.ceiling is None:
            self._step = max(self._step or 0.0, answers / span / INCREASE_S)
        self._trial = _Trial(self.rate, self._refused / answers, now + HOLD_S)
        self._last_decrease = now
        self.decreases += 1
        return self._set(accepted, now)

    def grow(self, now: float, paused_until: float) -> bool:
        """Apply the additive increase up to ``now`` (from the last decrease or the end of the pause
        ``paused_until``, whichever is later); whether the rate changed."""
        if self.rate is None or self._step is None:
            return False
        since = max(self._grown_at, paused_until, self._last_decrease)
        if now <= since:
            return False
        rate = self.rate + self._step * (now - since)
        return self._set(min(self.ceiling, rate) if self.ceiling is not None else rate, now)

    def _set(self, rate: float | None, now: float) -> bool:
        self._grown_at = now
        changed = rate != self.rate
        self.rate = rate
        return changed
