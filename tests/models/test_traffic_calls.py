"""What the model layer hands the run's limiter and response cache: every HTTP try holds a permit, a 429 or a
rate-limit header pauses the endpoint, every call's tokens count against the budget, and cacheable requests are
answered from the cache. The scripted server stands in for a model server (no model can run here); the limiter is
the engine's in-process one on a fake clock, the cache the stored one on a temporary directory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from runner.core.cache import cache_scope
from runner.core.config import RunSettings
from runner.core.limits import limiter_scope
from runner.core.record import TokenUsage
from runner.core.usage import usage_scope
from runner.traffic.state import TrafficState
from runner.traffic.in_process import LocalLimiter
from runner.models import ChatModel, ChatReply, _retry
from runner.storage.response_cache import StoredCache
from tests.support.clock import FakeClock
from tests.support.model_server import ScriptedModelServer, completion


@pytest.fixture(autouse=True)
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry loop's own waits pass at once (the limiter's are on the fake clock)."""

    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(_retry, "_sleep", no_wait)


def _limiter(**settings: Any) -> tuple[LocalLimiter, FakeClock]:
    clock = FakeClock(1000.0)
    return LocalLimiter(TrafficState(RunSettings(**settings)), clock=clock, sleep=clock.asleep), clock


def _calls(server: ScriptedModelServer, count: int, limiter: LocalLimiter | None = None,
           cache: StoredCache | None = None, repeat: int = 0, model: str = "vllm:scripted",
           **options: Any) -> tuple[list[ChatReply], dict[str, TokenUsage]]:
    """``count`` identical calls in one item: the replies and the item's usage."""

    async def main() -> list[ChatReply]:
        async with ChatModel.from_name(model, base_url=server.url) as chat_model:
            return [await chat_model.chat("What is 2 + 2?", **options) for _ in range(count)]

    with usage_scope() as usage, limiter_scope(limiter), cache_scope(cache, repeat):
        replies = asyncio.run(main())
    return replies, usage


def test_a_429_pauses_the_endpoint_for_every_call_and_the_retry_waits_it_out(model_server):
    limiter, clock = _limiter()
    model_server.fail(429, retry_after="3")
    [reply], _ = _calls(model_server, 1, limiter)
    assert reply.content
    assert clock.slept == [pytest.approx(3.0)]  # the second try waited for the endpoint's pause
    endpoint = limiter.snapshot()["endpoints"][f"vllm:scripted@{model_server.url}"]
    assert (endpoint["requests"], endpoint["rate_limited"], endpoint["pauses"]) == (2, 1, 1)
    assert endpoint["paused_s"] == pytest.approx(3.0)
    assert endpoint["tokens"] == reply.usage.total_tokens


def test_rate_limit_headers_of_a_success_hold_the_next_request_back(model_server):
    limiter, clock = _limiter()
    usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    model_server.answer(completion({"role": "assistant", "content": "4"}, usage=usage),
                        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"})
    replies, _ = _calls(model_server, 2, limiter)
    assert [r.content for r in replies][0] == "4"
    assert clock.slept == [pytest.approx(2.0)]
    assert limiter.snapshot()["endpoints"][f"vllm:scripted@{model_server.url}"]["rate_limited"] == 0


def test_every_call_spends_the_budget(model_server):
    limiter, _ = _limiter(max_tokens=10_000)
    replies, usage = _calls(model_server, 3, limiter)
    assert limiter.state.budget.tokens == sum(r.usage.total_tokens for r in replies)
    assert limiter.state.budget.tokens == usage["vllm:scripted"].input_tokens + usage["vllm:scripted"].output_tokens


def test_a_deterministic_request_is_answered_from_the_cache_the_second_time(model_server, tmp_path):
    limiter, _ = _limiter(max_tokens=10_000)
    cache = StoredCache(str(tmp_path / "cache"))
    replies, usage = _calls(model_server, 2, limiter, cache, temperature=0)
    assert len(model_server.chat_requests) == 1
    assert replies[1] == replies[0]
    assert usage["vllm:scripted"].model_dump() == {
        "input_tokens": replies[0].usage.input_tokens, "output_tokens": replies[0].usage.output_tokens,
        "calls": 1, "cached_calls": 1, "cache_misses": 1}
    assert limiter.state.budget.tokens == replies[0].usage.total_tokens  # the hit cost nothing
    assert len(list((tmp_path / "cache").glob("*/*.json"))) == 1


@pytest.mark.parametrize(("policy", "options", "requests"), [
    ("deterministic", {}, 2),  # the server's default temperature samples
    ("deterministic", {"temperature": 0.7}, 2),
    ("deterministic", {"temperature": 0.7, "seed": 7}, 1),
    ("always", {"temperature": 0.7}, 1),
])
def test_the_policy_decides_which_requests_are_cached(model_server, tmp_path, policy, options, requests):
    _calls(model_server, 2, cache=StoredCache(str(tmp_path / "cache"), policy=policy), **options)
    assert len(model_server.chat_requests) == requests


def test_a_sampled_request_is_cached_per_repeat(model_server, tmp_path):
    cache = StoredCache(str(tmp_path / "cache"), policy="always")
    for repeat in (0, 1, 0, 1):
        _calls(model_server, 1, cache=cache, repeat=repeat, temperature=0.7)
    assert len(model_server.chat_requests) == 2
    # A deterministic request is one reply whatever the repeat.
    for repeat in (0, 1):
        _calls(model_server, 1, cache=cache, repeat=repeat, temperature=0)
    assert len(model_server.chat_requests) == 3


def test_the_endpoint_and_the_whole_body_are_in_the_key(tmp_path):
    cache = StoredCache(str(tmp_path / "cache"))
    with ScriptedModelServer() as first, ScriptedModelServer() as second:
        _calls(first, 1, cache=cache, temperature=0)
        _calls(second, 1, cache=cache, temperature=0)  # another base URL
        _calls(first, 1, cache=cache, temperature=0, max_tokens=5)
        _calls(first, 1, cache=cache, temperature=0, tools=[{"name": "f", "parameters": {"type": "object"}}])
        _calls(first, 1, cache=cache, temperature=0)
    assert (len(first.chat_requests), len(second.chat_requests)) == (3, 1)


def test_the_mock_provider_is_never_cached(tmp_path):
    cache = StoredCache(str(tmp_path / "cache"), policy="always")

    async def main() -> None:
        model = ChatModel.from_name("mock")
        await model.chat("hi", temperature=0)

    with cache_scope(cache):
        asyncio.run(main())
    assert not (tmp_path / "cache").exists()


def test_a_cache_that_cannot_be_read_or_written_is_logged_and_the_server_answers(model_server, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with structlog.testing.capture_logs() as logs:
        [reply], usage = _calls(model_server, 1, cache=StoredCache(str(blocker / "cache")), temperature=0)
    assert reply.content and usage["vllm:scripted"].calls == 1
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == [
        "model.cache_unreadable", "model.cache_unwritable"]
