"""Retries, timeouts and connection failures, against the scripted model server on loopback (it stands in for a
model server because no model can run here) through the real ``openai`` client.

The waits between retries are recorded instead of slept (``_retry._sleep`` is replaced), so the tests check the
delays chosen without taking that long.
"""

from __future__ import annotations

import asyncio
import email.utils

import pytest

from runner.models import ChatModel, ChatReply, ModelError, RetryPolicy, _retry
from runner.models._retry import retry_after_seconds
from tests.support.model_server import ScriptedModelServer

FAST = RetryPolicy(max_attempts=4, initial_delay=0.5, multiplier=2.0, max_delay=1.5, jitter=0.0)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the retry loop asked to sleep, in order (nothing is slept)."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(_retry, "_sleep", record)
    return delays


def _chat(base_url: str, retry: RetryPolicy = FAST, timeout: float | None = None) -> ChatReply:
    async def main() -> ChatReply:
        async with ChatModel.from_name("vllm:scripted", base_url=base_url, retry=retry, timeout=timeout) as model:
            return await model.chat("hello")

    return asyncio.run(main())


def test_rate_limits_are_retried_after_the_servers_retry_after(model_server: ScriptedModelServer,
                                                               waits: list[float]) -> None:
    model_server.set_policy(["finally"])
    model_server.fail(429, times=2, retry_after="7")
    assert _chat(model_server.url).text == "finally"
    assert waits == [7.0, 7.0]
    assert len(model_server.chat_requests) == 3


def test_server_errors_back_off_exponentially_up_to_the_cap(model_server: ScriptedModelServer,
                                                            waits: list[float]) -> None:
    model_server.set_policy(["ok"])
    model_server.fail(500, times=1)
    model_server.fail(503, times=2)
    assert _chat(model_server.url).text == "ok"
    assert waits == [0.5, 1.0, 1.5]


def test_a_server_error_that_persists_is_a_model_error_after_the_attempts(model_server: ScriptedModelServer,
                                                                          waits: list[float]) -> None:
    model_server.fail(502, times=10, message="upstream down")
    with pytest.raises(ModelError) as err:
        _chat(model_server.url)
    assert err.value.status == 502 and err.value.retryable
    assert "HTTP 502: upstream down; the server failed all 4 attempts; check the server's logs" in str(err.value)
    assert len(model_server.chat_requests) == 4 and len(waits) == 3


def test_a_bad_request_is_not_retried(model_server: ScriptedModelServer, waits: list[float]) -> None:
    model_server.fail(400, message="temperature must be at most 2")
    with pytest.raises(ModelError, match="HTTP 400: temperature must be at most 2; the server rejected the request"):
        _chat(model_server.url)
    assert len(model_server.chat_requests) == 1 and waits == []


RATE_LIMITED = {"error": {"message": "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
                          "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
NO_QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                      "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


def test_a_429_that_persists_is_one_line_naming_why_after_the_attempts(model_server: ScriptedModelServer,
                                                                       waits: list[float]) -> None:
    model_server.answer(RATE_LIMITED, status=429, headers={"Retry-After": "1"}, times=None)
    with pytest.raises(ModelError) as err:
        _chat(model_server.url)
    assert str(err.value) == (
        f"vllm:scripted at {model_server.url}: the server refuses with HTTP 429 (rate_limit_exceeded): Rate limit "
        "reached for requests per min (RPM): Limit 3, Used 3, Requested 1.; it refused all 4 attempts; lower the "
        "request rate (--max-rpm, --concurrency) or resume the run once its limit resets")
    assert (err.value.status, err.value.retryable, err.value.error_code) == (429, True, "rate_limited")
    assert waits == [1.0, 1.0, 1.0] and len(model_server.chat_requests) == 4


@pytest.mark.parametrize("code", ["insufficient_quota", "project_spend_limit_exceeded", None])
def test_a_429_for_a_used_up_quota_is_not_retried(model_server: ScriptedModelServer, waits: list[float],
                                                   code: str | None) -> None:
    """OpenAI's quota errors: the type ``insufficient_quota``, the code naming the limit (or none)."""
    model_server.answer({"error": {**NO_QUOTA["error"], "code": code}}, status=429, headers={"Retry-After": "1"},
                        times=None)
    with pytest.raises(ModelError) as err:
        _chat(model_server.url)
    assert str(err.value) == (
        f"vllm:scripted at {model_server.url}: the server refuses with HTTP 429 ({code or 'insufficient_quota'}): "
        "You exceeded your current quota, please check your plan and billing details.; the account's quota is "
        "used up and no wait restores it: add credits or raise its limits")
    assert (err.value.retryable, err.value.error_code) == (False, "quota_exhausted")
    assert waits == [] and len(model_server.chat_requests) == 1


def test_a_retry_after_beyond_the_limit_stops_at_once(model_server: ScriptedModelServer, waits: list[float]) -> None:
    model_server.fail(429, retry_after="3600")
    with pytest.raises(ModelError, match="asks to wait 3600 s, more than the 120 s allowed"):
        _chat(model_server.url)
    assert waits == []


def test_a_refused_connection_is_one_line_naming_the_url_and_the_fix(refused_url: str, waits: list[float]) -> None:
    with pytest.raises(ModelError) as err:
        _chat(refused_url, RetryPolicy(max_attempts=2, initial_delay=0.25, jitter=0.0))
    message = str(err.value)
    assert f"cannot connect to the model server at {refused_url} after 2 attempt(s)" in message
    assert message.endswith("start the server or point --model-base-url at it (or set VLLM_BASE_URL)")
    assert "\n" not in message and waits == [0.25]


def test_a_servable_model_without_a_url_is_told_the_run_can_serve_it(
        refused_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No --model-base-url: a vllm:, sglang: or transformers: model is looked for at its provider's default URL,
    and the line says the other way out, --serve (a model given a URL is the user's server: no such hint)."""
    monkeypatch.setenv("TRANSFORMERS_BASE_URL", refused_url)
    model = ChatModel.from_name("transformers:no-such-model", retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ModelError) as err:
        model.chat_sync("hello")
    assert str(err.value).endswith("; or have the run start it on its workers: --serve transformers:no-such-model")


def test_a_request_past_the_timeout_is_a_model_error(model_server: ScriptedModelServer) -> None:
    model_server.stall(2.0)
    with pytest.raises(ModelError, match=r"did not finish answering within 0.2 s, the model timeout of one request"):
        _chat(model_server.url, RetryPolicy(max_attempts=1), timeout=0.2)


def test_retry_after_header_forms() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_jitter_only_shortens_a_delay() -> None:
    policy = RetryPolicy(initial_delay=2.0, jitter=0.25)
    delays = [policy.delay(1) for _ in range(50)]
    assert all(1.5 <= d <= 2.0 for d in delays)
    assert policy.delay(3, retry_after=11.0) == 11.0


@pytest.mark.parametrize(("status", "retry_after", "waited"), [(503, None, [0.5, 1.0, 1.5]), (429, "0", [0.0] * 3)])
def test_one_failing_call_under_the_runs_limiter_is_tried_the_configured_number_of_times(
        model_server: ScriptedModelServer, waits: list[float], status: int, retry_after: str | None,
        waited: list[float]) -> None:
    """One retry loop with one schedule: the limiter the engine installs for an item (which also sees every failed
    answer) adds no tries of its own, whatever the failure."""
    from runner.core.config import RunSettings
    from runner.traffic.control import TrafficControl

    model_server.fail(status, times=10, retry_after=retry_after)
    with TrafficControl(RunSettings()).scope(), pytest.raises(ModelError):
        _chat(model_server.url)
    assert len(model_server.chat_requests) == FAST.max_attempts == 4
    assert waits == waited


def test_a_refusal_whose_headers_say_when_the_limit_resets_is_retried_then(model_server: ScriptedModelServer,
                                                                           waits: list[float]) -> None:
    """The server's wait is read once, as the limiter reads it (:attr:`RateSignal.retry_s`): a 429 without
    ``Retry-After`` whose ``x-ratelimit-*`` headers say the limit is used up for 3 s is retried after those 3 s, the
    time the endpoint pauses for every worker, not after the policy's 0.5 s and then the pause's rest."""
    model_server.set_policy(["later"])
    model_server.answer(RATE_LIMITED, status=429,
                        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s"})
    assert _chat(model_server.url).text == "later"
    assert waits == [3.0]
