"""The request rate one model endpoint is held to, adapted to the server's refusals for rate (429, or 503 with
``Retry-After``).

Pure bookkeeping with time passed in (seconds of one monotonic clock), unit-tested with a fake clock; each
:class:`~runner.traffic.state.EndpointTraffic` holds one :class:`RateControl`. A refusal also pauses the endpoint
for every worker until the time the server gave (``Retry-After``): that pause is the endpoint's, not decided here,
and it is what a server that refuses everything meets. The rate answers another question, how fast to send once the
server takes requests again:

- Evidence first: a refusal is acted on :data:`HOLD_S` after it, once the answers of the requests sent with it are
  in (a refusal comes back at once, an accepted request after the model's work), and only when at least
  :data:`MIN_OBSERVED` answers came in over the last :data:`WINDOW_S` seconds. A refusal among a few answers says
  nothing of the rate the server takes; the pause alone applies.
- Under a rate the user set (``--max-rpm``), refusals that stay rare (at most :data:`RARE_SHARE` of the answers over
  the window) only pause: the user said what the server takes, and a server that takes a little less, or another
  client sharing its quota for a moment, is met by the pauses alone, which keep the rate at what the server accepts
  (each refusal holds every request back for its ``Retry-After``); halving the rate instead would cost half the
  throughput for :data:`INCREASE_S` seconds, the whole of a short run. Refusals beyond that share mean the limit set
  is above the server's, and the rate is lowered as without one.
- A decrease halves the rate sent (answers per second over that window, over at least one second, or the rate in
  force when lower), never below :data:`MIN_RATE`: multiplicative decrease, as TCP's congestion control (RFC 5681).
- A decrease is judged by the answers that follow it, from :data:`HOLD_S` after it (those of requests sent at the
  new rate; the answers within the hold are counted as the old rate's): until :data:`MIN_OBSERVED` of them came in,
  refusals only pause. Against a rate limit, slowing down makes refusals rarer, or the server goes on accepting as
  many requests as before. When neither holds (refusals as frequent as before, within :data:`UNDO_SHARE`, and the
  requests accepted fewer by more than that factor, or none), the refusals are not about the rate: a server that
  refuses a share of the requests whatever the rate, or one whose quota is gone. The decrease is then undone, as TCP
  undoes a spurious reduction of its window (RFC 4015), and for :data:`TOLERATE_S` seconds refusals at that share do
  not lower the rate (then a decrease is tried again: the server may have changed).
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
"""Seconds after a refusal, or a decrease, whose answers are still those of the requests sent before it: a refusal is
acted on after them, and they do not judge the decrease."""
WINDOW_S = 5.0
"""Seconds of answers the rates sent and accepted count."""
MIN_OBSERVED = 10
"""Answers a decision needs: in the window to decrease, after a decrease to judge it."""
DECREASE = 0.5
"""The factor of the rate sent that a decrease sets."""
MIN_RATE = 1.0
"""The lowest rate a decrease goes to, in requests per second: a server that takes fewer says so with its pauses,
which every worker honours whatever the rate, and ``--max-rpm`` sets a lower rate."""
RARE_SHARE = 0.05
"""The share of the answers over :data:`WINDOW_S` that refusals under a configured rate may reach and only pause (one
answer in 20)."""
TOLERATE_S = 60.0
"""Seconds a share of refusals found not to be about the rate is tolerated."""
UNDO_SHARE = 0.75
"""Two shares of refusals, or two rates of accepted requests, are the same within this factor (see the module's
docstring)."""


@dataclass
class _Trial:
    """A decrease being judged: the rate before it (``None``: no limit), the share of refusals that caused it, the
    requests accepted before it (over ``span`` seconds, the hold included), and the answers (and refusals among them)
    since ``since``, the end of its hold."""

    rate: float | None
    share: float
    accepted: int
    span: float
    since: float
    answers: int = 0
    refused: int = 0

    def count(self, refused: bool, now: float) -> None:
        """One answer at ``now``: within the hold, an accepted one is the old rate's; after it, the trial's."""
        if now < self.since:
            self.accepted += not refused
        else:
            self.answers += 1
            self.refused += refused

    def spurious(self, now: float) -> bool:
        """Whether the decrease did not help (the module's docstring): refusals as frequent and accepted requests
        fewer in proportion."""
        as_frequent = self.refused / self.answers >= UNDO_SHARE * self.share
        before = self.accepted / self.span
        after = (self.answers - self.refused) / max(1.0, now - self.since)
        return as_frequent and (before == 0 or after < UNDO_SHARE * before)


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
    _refused_at: float | None = None
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
        if self._trial is not None:
            self._trial.count(refused, now)
        if refused and self._refused_at is None and now - self._last_decrease >= HOLD_S:
            self._refused_at = now
        return self._decide(now)

    def grow(self, now: float, paused_until: float) -> bool:
        """Make a decision due by ``now``, then apply the additive increase up to ``now`` (from the last decrease or
        the end of the pause ``paused_until``, whichever is later); whether the rate changed."""
        changed = self._decide(now)
        if self.rate is None or self._step is None:
            return changed
        since = max(self._grown_at, paused_until, self._last_decrease)
        if now <= since:
            return changed
        rate = self.rate + self._step * (now - since)
        return self._set(min(self.ceiling, rate) if self.ceiling is not None else rate, now) or changed

    def _decide(self, now: float) -> bool:
        """Once :data:`HOLD_S` has passed since a refusal (when the answers of the requests sent with it are in):
        judge the last decrease, then lower the rate if the evidence says so; whether the rate changed."""
        if self._refused_at is None or now - self._refused_at < HOLD_S:
            return False
        self._refused_at = None
        while self._window and self._window[0][0] < now - WINDOW_S:
            self._refused -= self._window.popleft()[1]
        trial = self._trial
        if trial is not None:
            if trial.answers < MIN_OBSERVED:
                return False
            self._trial = None
            if trial.spurious(now):
                self.undone += 1
                self.tolerated = max(self.tolerated if now < self.tolerated_until else 0.0, trial.share)
                self.tolerated_until = now + TOLERATE_S
                rate = None if trial.rate is None or self.rate is None else max(trial.rate, self.rate)
                return self._set(rate, now)
        answers = len(self._window)
        tolerated = self.tolerated if now < self.tolerated_until else 0.0
        share = self._refused / answers if answers else 0.0
        if answers < MIN_OBSERVED or self._refused == 0 or share * UNDO_SHARE <= tolerated:
            return False
        if self.ceiling is not None and share <= RARE_SHARE:
            return False
        span = min(WINDOW_S, max(1.0, now - self._window[0][0]))
        sent = answers / span if self.rate is None else min(self.rate, answers / span)
        rate = max(MIN_RATE, DECREASE * sent)
        if self.rate is not None and rate >= self.rate:
            return False
        if self.ceiling is None:
            self._step = max(self._step or 0.0, sent / INCREASE_S)
        self._trial = _Trial(self.rate, share, answers - self._refused, span + HOLD_S, now + HOLD_S)
        self._last_decrease = now
        self.decreases += 1
        return self._set(rate, now)

    def _set(self, rate: float | None, now: float) -> bool:
        self._grown_at = now
        changed = rate != self.rate
        self.rate = rate
        return changed
