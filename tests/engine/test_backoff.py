"""How an endpoint's request rate follows the server's refusals, with a fake clock: the endpoint's schedule is driven
by a client that sends as fast as it lets it (up to ``demand`` requests/s), against small fake servers whose answers
come at once (a rate limit enforced as a token bucket, a server that refuses every third request whatever the rate,
one that refuses everything)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from runner.core.limits import EndpointLimits, RateSignal
from runner.traffic.backoff import INCREASE_S, MIN_RATE, RARE_SHARE, TOLERATE_S, RateControl
from runner.traffic.state import EndpointTraffic

Server = Callable[[float], RateSignal]
OK = RateSignal.from_answer(200, {})


def refusal(retry_after: str) -> RateSignal:
    return RateSignal.from_answer(429, {"retry-after": retry_after})


class RateLimited:
    """A server that takes ``per_second`` requests a second, as a token bucket holding one second of them, and
    refuses the others with ``Retry-After: 1`` (as ``ScriptedModelServer.limit_rate``)."""

    def __init__(self, per_second: float) -> None:
        self.rate = per_second
        self.full_at = 0.0

    def __call__(self, now: float) -> RateSignal:
        if self.full_at - now > 1.0 - 1.0 / self.rate:
            return refusal("1")
        self.full_at = max(self.full_at, now) + 1.0 / self.rate
        return OK


class Refusing:
    """A server that takes every request except the ``refused`` ones (their numbers, from 1), which it refuses with
    ``Retry-After: 1`` whatever the rate: another client sharing the quota for a moment, a provider's hiccup."""

    def __init__(self, *refused: int) -> None:
        self.refused = set(refused)
        self.count = 0

    def __call__(self, now: float) -> RateSignal:
        self.count += 1
        return refusal("1") if self.count in self.refused else OK


class EveryThird:
    """A server that refuses every third request with ``Retry-After: 0``, whatever the rate."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, now: float) -> RateSignal:
        self.count += 1
        return refusal("0") if self.count % 3 == 0 else OK


def always_refused(now: float) -> RateSignal:
    return refusal("1")


def drive(state: EndpointTraffic, server: Server, until: float, *, start: float = 0.0, demand: float = 100.0,
          batch: int = 1) -> list[tuple[float, bool]]:
    """Send ``batch`` requests at a time, each at the start the endpoint's schedule gives it and answered there, the
    next batch ``1 / demand`` seconds after the last start, until ``until``; each request's (start, refused)."""
    sent: list[tuple[float, bool]] = []
    now = start
    while now < until:
        starts = state.reserve(batch, 0, now=now)
        for at in starts:
            signal = server(at)
            state.observe(signal, 0, None, at)
            sent.append((at, signal.limited))
        now = starts[-1] + 1.0 / demand
    return sent


def last(sent: list[tuple[float, bool]], since: float) -> tuple[int, int]:
    """Requests accepted and refused from ``since`` on."""
    recent = [refused for at, refused in sent if at >= since]
    return len(recent) - sum(recent), sum(recent)


def test_a_server_that_refuses_everything_is_asked_again_after_each_retry_after():
    """One request at a time against a server that always answers 429 with ``Retry-After: 1``: one request a
    second, as the server asks, for as long as it refuses (not one a minute)."""
    for limits in ({}, {"max_rpm": 600}):
        state = EndpointTraffic(EndpointLimits(**limits), 0.0)
        sent = drive(state, always_refused, 60.0)
        gaps = [b - a for (a, _), (b, _) in zip(sent, sent[1:], strict=False)]
        assert max(gaps) == pytest.approx(1.0)
        assert len(sent) == 61 and state.rate == (10.0 if limits else None)


def test_many_requests_refused_at_once_lower_the_rate_until_it_shows_it_does_not_help():
    """Twenty requests at a time, all refused: the rate goes to what the server accepted (nothing: the floor), and
    once refusals after that are as frequent, the decrease is undone; the requests go out after each pause."""
    state = EndpointTraffic(EndpointLimits(), 0.0)
    sent = drive(state, always_refused, 60.0, batch=20)
    assert state.control.decreases == state.control.undone == 1
    assert state.rate is None
    batches = sorted({at for at, _ in sent if at >= 30.0})
    assert [b - a for a, b in zip(batches, batches[1:], strict=False)] == pytest.approx([1.0] * (len(batches) - 1))
    snapshot = state.snapshot(60.0)
    assert (snapshot["decreases"], snapshot["decreases_undone"]) == (1, 1)


def test_refusals_that_do_not_depend_on_the_rate_do_not_hold_it_down():
    """Every third request refused with ``Retry-After: 0``: slowing down does not make refusals rarer, so the rate
    goes back to its ceiling and the server gets what the client sends."""
    state = EndpointTraffic(EndpointLimits(max_rpm=6000), 0.0)  # 100 requests/s
    sent = drive(state, EveryThird(), 60.0, demand=100.0)
    assert state.snapshot(60.0)["rate_rpm"] == 6000.0
    accepted, refused = last(sent, 50.0)
    assert accepted == pytest.approx(667, abs=10) and refused == pytest.approx(333, abs=10)
    assert state.control.undone >= 1


@pytest.mark.parametrize("limit", [4.0, 20.0])
def test_against_a_rate_limit_the_rate_follows_it(limit):
    """A server that takes ``limit`` requests/s and a client that would send 100/s without a configured rate: the
    rate saws between about half of the server's and all of it (multiplicative decrease, additive increase), and
    refusals are rare (each pauses every request for a second)."""
    state = EndpointTraffic(EndpointLimits(), 0.0)
    sent = drive(state, RateLimited(limit), 60.0)
    accepted, refused = last(sent, 20.0)
    assert limit * 0.75 <= accepted / 40 <= limit * 1.05
    assert refused <= 10 and state.control.undone == 0


def test_a_decision_waits_for_the_answers_sent_with_the_refusal_and_halves_the_rate_sent():
    """Refusals come back at once, accepted answers after the model's work: the rate is decided a second after a
    refusal, from the answers of the last seconds."""
    state = EndpointTraffic(EndpointLimits(), 0.0)
    for i in range(40):  # 20 answers/s
        state.observe(OK, 0, None, now=i * 0.05)
    state.observe(refusal("0"), 0, None, now=2.0)
    state.grow(2.95)
    assert state.rate is None
    state.grow(3.0)
    assert state.rate == pytest.approx(41 / 3.0 / 2)
    assert state.control.decreases == 1


def test_a_lone_refusal_pauses_the_endpoint_and_keeps_its_rate():
    state = EndpointTraffic(EndpointLimits(max_rpm=600), 0.0)  # 10 requests/s
    state.reserve(1, 0, now=0.0)
    state.observe(refusal("2"), 0, None, now=0.5)
    assert (state.rate_limited, state.pauses) == (1, 1)
    assert state.reserve(1, 0, now=0.6) == [2.5]  # nothing before the server's Retry-After of 2 s
    assert (state.rate, state.control.decreases) == (pytest.approx(10.0), 0)


def test_the_rate_grows_back_by_its_ceiling_and_stops_at_the_floor():
    state = EndpointTraffic(EndpointLimits(max_rpm=600), 0.0)  # 10 requests/s
    for i in range(30):  # 10 answers/s, every other one refused from t=2
        state.observe(refusal("0") if i >= 20 and i % 2 == 0 else OK, 0, None, now=i * 0.1)
    state.grow(3.0)
    assert state.rate == pytest.approx(5.0) and state.control.decreases == 1
    state.grow(3.0 + INCREASE_S / 4)  # a quarter of the ceiling per INCREASE_S / 4 seconds
    assert state.rate == pytest.approx(7.5)
    state.grow(3.0 + INCREASE_S)
    assert state.snapshot(100.0)["rate_rpm"] == 600.0  # never over --max-rpm
    slow = RateControl(ceiling=1.5, since=0.0)
    for i in range(10):
        slow.answered(True, i * 0.1)
    slow.grow(1.0, paused_until=-math.inf)
    assert slow.rate == MIN_RATE  # not half of 1.5


def test_a_tolerated_share_of_refusals_is_forgotten_after_a_while():
    """After refusals that slowing down did not help, a server that starts limiting for rate is met again once the
    tolerance lapses."""
    state = EndpointTraffic(EndpointLimits(), 0.0)
    drive(state, EveryThird(), 20.0)
    assert state.control.tolerated == pytest.approx(1 / 3, abs=0.05)
    assert state.control.tolerated_until <= 20.0 + TOLERATE_S
    sent = drive(state, RateLimited(5.0), 120.0, start=20.0)
    accepted, refused = last(sent, 100.0)
    assert accepted / 20 == pytest.approx(5.0, rel=0.1) and refused <= 10
    assert state.rate is not None


def test_rare_refusals_under_the_users_rate_only_pause():
    """Issue 20's input: ``--max-rpm 3000`` against a server that takes 50 requests/s, and 2 of the first 100
    requests refused (429, ``Retry-After: 1``). Each pauses every request for its second, and the rate stays the
    user's: it was halved, and grew back too slowly for a 300-item run (26.8 requests/s)."""
    state = EndpointTraffic(EndpointLimits(max_rpm=3000), 0.0)
    sent = drive(state, Refusing(41, 90), 8.0)
    assert (state.rate_limited, state.pauses, state.control.decreases) == (2, 2, 0)
    assert state.rate == pytest.approx(50.0)
    accepted, refused = last(sent, 4.0)
    assert (accepted, refused) == (pytest.approx(200, abs=1), 0)  # 50 a second once the pauses are over


def test_refusals_at_once_under_a_rate_below_the_servers_only_pause():
    """``--max-rpm 1200`` (20/s) against a server that takes more, and three requests in flight refused at once for
    another cause (``Retry-After: 2``): one pause of 2 s, and the requests then go at the rate set."""
    state = EndpointTraffic(EndpointLimits(max_rpm=1200), 0.0)
    for at in state.reserve(100, 0, now=0.0):  # 0 to 4.95 s
        state.observe(OK, 0, None, at + 0.3)  # answered after the model's work
    for _ in range(3):
        state.observe(refusal("2"), 0, None, 5.2)
    state.grow(6.5)  # the decision is due a second after the refusals
    assert (state.rate_limited, state.pauses, state.control.decreases) == (3, 1, 0)
    later = state.reserve(40, 0, now=6.5)
    assert later[0] == pytest.approx(7.2) and later[-1] - later[0] == pytest.approx(39 / 20)


@pytest.mark.parametrize(("every", "lowered"), [(25, False), (10, True)])
def test_under_the_users_rate_refusals_lower_it_beyond_one_answer_in_20(every, lowered):
    """50 answers/s at a configured 50/s for 5 s, one in ``every`` refused: one in 25 only pauses, one in 10 says
    the server takes less than the rate set, which is lowered as without one."""
    control = RateControl(ceiling=50.0, since=0.0)
    for i in range(250):
        control.answered(i % every == every - 1, i * 0.02)
    control.grow(6.0, paused_until=-math.inf)
    assert (control.decreases >= 1) == lowered
    assert RARE_SHARE == 0.05
