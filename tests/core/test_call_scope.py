"""One scope per work item for its model calls: the run's limiter, its response cache with the item's repeat, and the
item's usage, set together (:class:`runner.core.scope.CallScope`) and gone after the item."""

from __future__ import annotations

import asyncio
from typing import Any

from runner.core.cache import cache_scope, current_cache, current_repeat
from runner.core.config import RunSettings
from runner.core.limits import current_limiter
from runner.core.scope import CallScope, current_scope
from runner.core.usage import usage_scope
from runner.models import ChatModel
from runner.traffic.control import TrafficControl


class Cache:
    policy = "deterministic"

    def get(self, key: str) -> dict[str, Any] | None:
        return None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        pass


def test_an_items_limiter_cache_repeat_and_usage_are_one_scope_set_once() -> None:
    cache = Cache()
    traffic = TrafficControl(RunSettings(), cache=cache)  # type: ignore[arg-type]
    usage: dict = {}
    with traffic.scope(2, usage=usage) as scope:
        assert current_scope() is scope
        assert (current_limiter(), current_cache(), current_repeat()) == (traffic.limiter(), cache, 2)
        ChatModel.from_name("mock").chat_sync("hello")
    assert usage["mock"].calls == 1
    assert current_scope() == CallScope()


def test_the_parts_set_apart_nest_in_one_scope() -> None:
    """``usage_scope``, then the traffic's scope (as the engine's item path opens them), then a cache of its own:
    each block changes its part and keeps the others, and leaving it restores them."""
    traffic = TrafficControl(RunSettings())
    with usage_scope() as usage, traffic.scope(1):
        limiter = current_limiter()
        with cache_scope(Cache(), 3):  # type: ignore[arg-type]
            assert (current_limiter(), current_repeat(), current_scope().usage) == (limiter, 3, usage)

        async def call() -> None:  # another task of the item: the same scope
            await ChatModel.from_name("mock").chat("hello")

        asyncio.run(call())
        assert current_cache() is None and current_scope().usage is usage
    assert usage["mock"].calls == 1
    assert current_scope() == CallScope()
