"""The total deadline of one model request (openai/openai-python#2599's kind): a server that trickles its answer, a
byte at a time, resets the HTTP client's read timeout with every byte, so a model built with ``timeout=3`` used to
wait 20 s for an answer sent over 20 s. The deadline holds however the bytes arrive; a request past it is retried
per the retry policy and ends in one clear line.

The scripted server on loopback stands in for the model server or proxy that trickles
(:meth:`ScriptedModelServer.drip`); the requests go through the real ``openai`` client.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from runner.models import ChatModel, ModelError, RetryPolicy, _retry
from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the retry loop asked to sleep, in order (nothing is slept)."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(_retry, "_sleep", record)
    return delays


def _timed(coroutine_of, model: ChatModel) -> tuple[float, BaseException | object]:
    async def main() -> object:
        async with model:
            return await coroutine_of(model)

    started = time.monotonic()
    try:
        outcome: BaseException | object = asyncio.run(main())
    except ModelError as exc:
        outcome = exc
    return time.monotonic() - started, outcome


def test_a_byte_a_second_for_20_s_fails_at_the_3_s_timeout(model_server: ScriptedModelServer) -> None:
    """The issue's input: one byte a second (the answer is about 300 bytes, so 20 s and more) to ``timeout=3``."""
    model_server.drip(1.0)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, timeout=3,
                                retry=RetryPolicy(max_attempts=1))
    seconds, outcome = _timed(lambda m: m.chat("hello"), model)
    assert isinstance(outcome, ModelError)
    assert str(outcome) == (f"vllm:scripted: the server at {model_server.url} did not finish answering within 3 s, "
                            "the model timeout of one request; check that it is healthy and not trickling its "
                            "answers, or raise the model timeout")
    assert outcome.retryable and outcome.error_code is None
    assert 2.9 <= seconds < 6.0


def test_each_attempt_has_the_deadline_and_the_retry_policy_applies(model_server: ScriptedModelServer,
                                                                    waits: list[float]) -> None:
    """A neighbour: the status line and headers trickle too (not only the body), on every attempt but the last."""
    model_server.set_policy(["finally"])
    model_server.drip(0.2, times=2, headers_too=True)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, timeout=1,
                                retry=RetryPolicy(max_attempts=3, initial_delay=0.5, jitter=0))
    seconds, outcome = _timed(lambda m: m.chat("hello"), model)
    assert getattr(outcome, "text", None) == "finally"
    assert waits == [0.5, 1.0] and len(model_server.chat_requests) == 3
    assert 1.9 <= seconds < 5.0


def test_every_attempt_past_the_deadline_ends_in_one_line_naming_them(model_server: ScriptedModelServer,
                                                                      waits: list[float]) -> None:
    model_server.drip(0.2, times=2)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, timeout=0.5,
                                retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=0))
    seconds, outcome = _timed(lambda m: m.chat("hello"), model)
    assert isinstance(outcome, ModelError)
    assert "did not finish answering within 0.5 s (each of 2 attempts)" in str(outcome)
    assert len(model_server.chat_requests) == 2 and seconds < 3.0


def test_the_preflight_check_has_the_deadline_too(model_server: ScriptedModelServer) -> None:
    model_server.drip(0.5, endpoint="models")
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, timeout=1)
    seconds, outcome = _timed(lambda m: m.check(), model)
    assert isinstance(outcome, ModelError) and "did not finish answering within 1 s" in str(outcome)
    assert seconds < 4.0


def test_a_request_abandoned_at_the_deadline_is_closed_and_the_server_sees_it(
        model_server: ScriptedModelServer, waits: list[float]) -> None:
    """Issue 27: a call the runner gives up on must not leave its request to run at the server. The server notices
    each abandoned request's closed connection (as vLLM and SGLang do to abort it), and the item's usage counts the
    timeouts."""
    from runner.core.usage import usage_scope

    model_server.stall(30, times=2)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, timeout=0.5,
                                retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=0))
    with usage_scope() as usage:
        seconds, outcome = _timed(lambda m: m.chat("hello"), model)
    assert isinstance(outcome, ModelError) and "(each of 2 attempts)" in str(outcome)
    assert model_server.wait_for_disconnects(2)
    assert model_server.disconnects == [r for r in model_server.requests if r.path.endswith("/chat/completions")]
    assert usage["vllm:scripted"].timeouts == 2 and usage["vllm:scripted"].calls == 0
    assert usage["vllm:scripted"].model_dump() == {"input_tokens": 0, "output_tokens": 0, "calls": 0, "timeouts": 2}
    assert seconds < 10


def test_a_call_cancelled_from_outside_closes_its_request_too(model_server: ScriptedModelServer) -> None:
    """The neighbour: cancelled by the item's own timeout or the run's stop (not the model deadline)."""
    model_server.stall(30)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, timeout=60)

    async def main() -> None:
        async with model:
            call = asyncio.ensure_future(model.chat("hello"))
            while not model_server.requests:
                await asyncio.sleep(0.02)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call

    asyncio.run(main())
    assert model_server.wait_for_disconnects(1)
