"""The run's traffic state: a schedule of requests per model endpoint, a shared backoff, and the budget.

Pure bookkeeping, with time passed in (seconds of one monotonic clock), so the rules are unit-tested with a fake
clock; :mod:`runner.traffic.control` drives it in this process, :mod:`runner.engine.ray.limiter` in one Ray actor
per run.

- Rates are spaced grants, never bursts (:class:`Schedule`: the virtual scheduling form of the Generic Cell Rate
  Algorithm, ITU-T I.371, with no burst above one request): a request is *reserved* the earliest start that the
  requests schedule and, with a tokens-per-minute limit, the tokens schedule allow, each start at least one request
  (or its tokens) of the rate after the one before. So any one second holds at most the rate's requests (``ceil(rpm
  / 60)``) and tokens (``tpm / 60``, plus one request's), from the run's first request on: a provider that enforces
  a per-minute limit per second or per fraction of one (OpenAI's rate-limit guide) is never sent more, and there
  is no full bucket at the start. Reservations are handed out in order, so callers are served first come, first
  served.
- Where the requests are sent from other processes than the schedule's (Ray workers, on clocks of their own), a
  request goes out up to a few milliseconds after its reserved start, and those delays differ, so a second at the
  server may see the starts of a little more than one second: the schedule then runs at ``rate / (1 + spread_s)``
  (see :class:`TrafficState`), so that even then no second holds more than the rate.
- Tokens are booked at their estimate and corrected by the reply's usage (a debt, or a refund).
- A refusal for rate (429, or 503 with ``Retry-After``), or an answer that says a limit is used up
  (``x-ratelimit-remaining-*: 0``), pauses the endpoint for every worker until the time the server gave
  (:class:`~runner.core.limits.RateSignal`); refusals also adapt the endpoint's request rate to what the server is
  seen to accept (:class:`~runner.traffic.backoff.RateControl`).
- The budget counts tokens and USD across the run, those of earlier invocations included.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from runner.core.config import RunSettings
from runner.core.limits import EndpointLimits, ModelPrice, RateSignal, model_key
from runner.core.record import TokenUsage
from runner.traffic.backoff import RateControl

LEASE_S = 0.5
"""Seconds of an endpoint's rate the clients sharing it hold reserved ahead, in equal shares (see
:meth:`TrafficState.lease`)."""
ACTIVE_S = 2.0
"""Seconds after its last lease a client still counts as one of an endpoint's clients."""
MAX_LEASE = 256
"""The most reservations of one lease on an endpoint without a rate."""


class Schedule:
    """A schedule of ``rate`` units/s with no burst above one reservation: the Generic Cell Rate Algorithm's virtual
    scheduling (ITU-T I.371) with a tolerance of zero, kept as :attr:`full_at`, the time the reservations so far are
    paid off (the algorithm's theoretical arrival time).

    A reservation of ``amount`` units starts at :attr:`full_at` at the earliest and moves it ``amount / rate``
    seconds on from its start, so each start follows the one before by that one's amount over the rate: any
    window of ``L`` seconds holds reservations of at most ``rate * L`` units plus the last one's (reservations of
    one unit: at most ``ceil(rate * L)``).

    Args:
        rate: units per second (> 0).
        now: the time from which it takes reservations.
    """

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.full_at = now

    def level(self, now: float) -> float:
        """Units reserved ahead at ``now`` and not yet paid off (0: none)."""
        return max(0.0, self.full_at - now) * self.rate

    def start(self, now: float) -> float:
        """The earliest time ``>= now`` at which a reservation may start."""
        return max(now, self.full_at)

    def take(self, amount: float, now: float) -> float:
        """Reserve ``amount`` units at the earliest time ``>= now`` they may start; that time."""
        start = self.start(now)
        self.full_at = start + amount / self.rate
        return start

    def adjust(self, amount: float, now: float) -> None:
        """Add a debt of ``amount`` units (negative: give units back, never to before ``now``)."""
        self.full_at = max(now, max(self.full_at, now) + amount / self.rate)

    def resized(self, rate: float, now: float) -> Schedule:
        """This schedule at another rate, keeping the units reserved ahead (paid off at the new rate)."""
        schedule = Schedule(rate, now)
        schedule.full_at = now + self.level(now) / rate
        return schedule


@dataclass
class EndpointTraffic:
    """The schedule, backoff and counts of one endpoint.

    Args:
        limits: its configured limits.
        since: the time it is first seen.
        spread_s: seconds by which the sends of its reservations may spread after their starts (0: sent where they
            are reserved); its schedules run at their rates over ``1 + spread_s`` (the module's docstring).
    """

    limits: EndpointLimits
    since: float
    spread_s: float = 0.0
    control: RateControl = field(init=False)
    requests: Schedule | None = None
    tokens: Schedule | None = None
    paused_until: float = -math.inf
    answers: int = 0
    tokens_used: int = 0
    rate_limited: int = 0
    pauses: int = 0
    paused_s: float = 0.0

    def __post_init__(self) -> None:
        self.control = RateControl(self.limits.max_rpm / 60 if self.limits.max_rpm else None, self.since)
        self._resize(self.since)
        if self.limits.max_tpm:
            self.tokens = Schedule(self.limits.max_tpm / 60 / (1 + self.spread_s), self.since)

    @property
    def rate(self) -> float | None:
        """The request rate it is held to (requests/s), or ``None``: no limit."""
        return self.control.rate

    def reserve(self, count: int, tokens_each: float, now: float) -> list[float]:
        """Start times (``>= now``, in order) for ``count`` requests of ``tokens_each`` estimated tokens each."""
        self.grow(now)
        floor = max(now, self.paused_until)
        starts: list[float] = []
        for _ in range(count):
            start = floor
            if self.requests is not None:
                start = self.requests.start(start)
            if self.tokens is not None and tokens_each > 0:
                start = self.tokens.take(tokens_each, start)
            if self.requests is not None:
                self.requests.take(1, start)
            starts.append(start)
        return starts

    def observe(self, signal: RateSignal, booked: float, tokens: int | None, now: float) -> None:
        """Account for one answered (or failed) request that had ``booked`` tokens reserved and used ``tokens``
        (``None``: unknown, the booking stands); a refusal may change the rate (:class:`RateControl`), a pause
        holds every request back."""
        self.answers += 1
        if tokens is not None:
            self.tokens_used += tokens
            if self.tokens is not None:
                self.tokens.adjust(tokens - booked, now)
        self.rate_limited += signal.limited
        if self.control.answered(signal.limited, now):
            self._resize(now)
        pause = signal.pause_s
        if pause:
            self._pause(now + pause, now)

    def grow(self, now: float) -> None:
        """Apply the rate's additive increase up to ``now`` (after a decrease, once any pause is over)."""
        if self.control.grow(now, self.paused_until):
            self._resize(now)

    def _resize(self, now: float) -> None:
        """The requests schedule at the rate in force (none without one)."""
        rate = self.control.rate
        if rate is None:
            self.requests = None
        elif self.requests is None:
            self.requests = Schedule(rate / (1 + self.spread_s), now)
        else:
            self.requests = self.requests.resized(rate / (1 + self.spread_s), now)

    def _pause(self, until: float, now: float) -> None:
        if until <= self.paused_until:
            return
        self.pauses += 1
        self.paused_s += until - max(self.paused_until, now)
        self.paused_until = until

    def snapshot(self, now: float) -> dict[str, Any]:
        """The endpoint's state: ``rate_rpm`` (requests per minute it is held to now; ``None``: no limit),
        ``max_rpm``, ``max_tpm``, ``max_connections``, ``requests`` (answered or failed), ``tokens`` (reported),
        ``rate_limited`` (refusals for rate seen), ``decreases`` (of the rate), ``decreases_undone`` (found not to
        help, :mod:`runner.traffic.backoff`), ``pauses``, ``paused_s`` (seconds paused in all) and ``paused_for_s``
        (seconds of the current pause left)."""
        self.grow(now)
        return {
            "rate_rpm": round(self.rate * 60, 1) if self.rate is not None else None,
            **self.limits.model_dump(),
            "requests": self.answers,
            "tokens": self.tokens_used,
            "rate_limited": self.rate_limited,
            "decreases": self.control.decreases,
            "decreases_undone": self.control.undone,
            "pauses": self.pauses,
            "paused_s": round(self.paused_s, 3),
            "paused_for_s": round(max(0.0, self.paused_until - now), 3),
        }


@dataclass
class Budget:
    """A run's budget: tokens (input + output) and USD, this invocation's and earlier ones'.

    Args:
        max_tokens: tokens allowed, or ``None``.
        max_cost: USD allowed, or ``None``.
        prices: USD per million tokens by model (``provider:model``).
    """

    max_tokens: int | None = None
    max_cost: float | None = None
    prices: dict[str, ModelPrice] = field(default_factory=dict)
    tokens: int = 0
    cost: float = 0.0
    earlier_tokens: int = 0
    earlier_cost: float = 0.0
    calls_without_usage: int = 0
    unpriced: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, settings: RunSettings) -> Budget:
        """The budget of a run with ``settings``."""
        return cls(settings.max_tokens, settings.max_cost, dict(settings.prices))

    def add(self, model: str, input_tokens: int | None, output_tokens: int | None) -> None:
        """Count one call of ``model`` (an unknown count adds nothing, see :attr:`calls_without_usage`)."""
        self.tokens += int(input_tokens or 0) + int(output_tokens or 0)
        self.cost += self.cost_of(model, int(input_tokens or 0), int(output_tokens or 0))
        self.calls_without_usage += input_tokens is None or output_tokens is None

    def add_earlier(self, usage: dict[str, TokenUsage]) -> None:
        """Count the usage of one record written by an earlier invocation."""
        for model, counts in usage.items():
            self.earlier_tokens += counts.input_tokens + counts.output_tokens
            self.earlier_cost += self.cost_of(model, counts.input_tokens, counts.output_tokens)

    def cost_of(self, model: str, input_tokens: int, output_tokens: int) -> float:
        """USD of ``model``'s tokens at its price (0 without one: with ``max_cost``, the model is noted in
        :attr:`unpriced`)."""
        price = self.prices.get(model_key(model))
        if price is None:
            if self.max_cost is not None and (input_tokens or output_tokens):
                self.unpriced.add(model)
            return 0.0
        return price.cost(input_tokens, output_tokens)

    @property
    def spent_tokens(self) -> int:
        """Tokens spent by the run, earlier invocations included."""
        return self.earlier_tokens + self.tokens

    @property
    def spent_cost(self) -> float:
        """USD spent by the run, earlier invocations included."""
        return self.earlier_cost + self.cost

    @property
    def reached(self) -> bool:
        """Whether the budget is spent."""
        return ((self.max_tokens is not None and self.spent_tokens >= self.max_tokens)
                or (self.max_cost is not None and self.spent_cost >= self.max_cost))

    def snapshot(self) -> dict[str, Any]:
        """``max_tokens``, ``max_cost``, ``tokens`` and ``cost_usd`` spent (earlier invocations included),
        ``earlier_tokens``, ``earlier_cost_usd``, ``reached``, ``calls_without_usage`` (calls counted as 0 tokens)
        and ``unpriced`` (models that spent tokens without a price, counted as USD 0)."""
        return {
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "tokens": self.spent_tokens,
            "cost_usd": round(self.spent_cost, 6),
            "earlier_tokens": self.earlier_tokens,
            "earlier_cost_usd": round(self.earlier_cost, 6),
            "reached": self.reached,
            "calls_without_usage": self.calls_without_usage,
            "unpriced": sorted(self.unpriced),
        }


def spent_line(budget: dict[str, Any]) -> str:
    """What a run spent against what was allowed, from a :meth:`Budget.snapshot`, e.g. ``1,204 tokens of
    --max-tokens 1,000``."""
    parts = []
    if budget.get("max_tokens") is not None:
        parts.append(f"{budget['tokens']:,} tokens of --max-tokens {budget['max_tokens']:,}")
    if budget.get("max_cost") is not None:
        parts.append(f"USD {budget['cost_usd']:,.4f} of --max-cost {budget['max_cost']:g}")
    return " and ".join(parts)


class TrafficState:
    """Every endpoint's :class:`EndpointTraffic` and the :class:`Budget` of one run.

    Args:
        settings: the run's limits, budget and prices.
        budget: the budget (default: from ``settings``, nothing spent yet).
        clients: the clients expected to share each endpoint (a run's workers), so that the first to ask gets no
            more than its share (see :meth:`lease`).
        spread_s: seconds by which the clients' sends may spread after their reserved starts (see
            :class:`EndpointTraffic`; 0 in one process).
    """

    def __init__(self, settings: RunSettings, budget: Budget | None = None, clients: int = 1,
                 spread_s: float = 0.0) -> None:
        self.settings = settings
        self.clients = clients
        self.spread_s = spread_s
        self.budget = budget if budget is not None else Budget.of(settings)
        self.endpoints: dict[str, EndpointTraffic] = {}
        self._clients: dict[str, dict[str, float]] = {}
        self._held: dict[str, dict[str, deque[float]]] = {}

    def endpoint(self, key: str, model: str, now: float) -> EndpointTraffic:
        """The state of the endpoint ``key`` of ``model`` (``provider:model``), created with the model's limits."""
        found = self.endpoints.get(key)
        if found is None:
            found = self.endpoints[key] = EndpointTraffic(self.settings.limits_for(model), now, self.spread_s)
        return found

    def reserve(self, key: str, model: str, count: int, tokens_each: float, now: float) -> list[float]:
        """:meth:`EndpointTraffic.reserve` on the endpoint ``key``."""
        return self.endpoint(key, model, now).reserve(count, tokens_each, now)

    def lease(self, client: str, key: str, model: str, want: int, tokens_each: float,
              now: float) -> tuple[list[float], float | None]:
        """Reservations for one of several clients sharing the endpoint ``key`` (the workers of a run), each asking
        for what it expects to send soon.

        Fair by construction: reservations are handed out in the order the clients ask, and a client holds at most
        its share of the reservations still ahead: ``ceil(rate * LEASE_S / clients)``, ``clients`` being those that
        asked in the last :data:`ACTIVE_S` seconds, and at least the number expected (without a rate: up to
        :data:`MAX_LEASE` at a time). So the
        schedule reaches about :data:`LEASE_S` seconds ahead, and a worker with many requests waiting cannot book
        it for itself.

        Args:
            client: the asking client's id.
            want: reservations it asks for (at least one is considered).
            tokens_each: the estimated tokens of each request.

        Returns:
            the reserved starts (at least one), or, for a client that holds its share already, no start and the
            time its first reservation starts (when it may ask again).
        """
        seen = self._clients.setdefault(key, {})
        seen[client] = now
        for other in [name for name, last in seen.items() if last < now - ACTIVE_S]:
            del seen[other]
            self._held.get(key, {}).pop(other, None)
        held = self._held.setdefault(key, {}).setdefault(client, deque())
        while held and held[0] <= now:
            held.popleft()
        state = self.endpoint(key, model, now)
        state.grow(now)
        share = MAX_LEASE if state.rate is None else math.ceil(state.rate * LEASE_S / max(len(seen), self.clients))
        if len(held) >= share:
            return [], held[0]
        starts = state.reserve(max(1, min(want, share - len(held))), tokens_each, now)
        held.extend(start for start in starts if start > now)
        return starts, None

    def observe(self, key: str, model: str, signal: RateSignal, booked: float, tokens: int | None,
                now: float) -> None:
        """:meth:`EndpointTraffic.observe` on the endpoint ``key``."""
        self.endpoint(key, model, now).observe(signal, booked, tokens, now)

    def paused_until(self, key: str) -> float:
        """When the endpoint's pause ends (``-inf``: not paused, or not seen)."""
        found = self.endpoints.get(key)
        return found.paused_until if found is not None else -math.inf

    def snapshot(self, now: float) -> dict[str, Any]:
        """``endpoints`` (key -> :meth:`EndpointTraffic.snapshot`) and, with a budget, ``budget``
        (:meth:`Budget.snapshot`)."""
        out: dict[str, Any] = {"endpoints": {key: state.snapshot(now) for key, state in sorted(self.endpoints.items())}}
        if self.settings.budgeted:
            out["budget"] = self.budget.snapshot()
        return out
