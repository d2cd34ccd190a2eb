"""GET requests to a public JSON API for a live tool, through the run's response cache and rate limits.

Each API is an endpoint of the run's limiter (:func:`runner.core.limits.request_slot`): ``Endpoint(provider,
base_url, "")``, whose name is the provider (``wikipedia``, ``openmeteo``), so ``--max-rpm wikipedia=30`` limits it
(and a plain ``--max-rpm N`` limits it like every model endpoint); a 429 pauses it for every worker. A successful
answer is stored in the run's response cache (``--cache``, :func:`runner.core.cache.current_cache`) under
:func:`~runner.core.cache.cache_key` of the provider, the URL and the query, unless the cache policy is ``off``: a
rerun with the same cache replays it without a request, which is the only way a run with live tools is
reproducible (the live pages and forecasts change).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import structlog

from runner.core.backoff import Backoff, is_retryable_status
from runner.core.cache import ResponseCache, cache_key, current_cache
from runner.core.limits import Endpoint, request_slot, retry_after_seconds
from runner.solutions.tools import ToolError

DEFAULT_TIMEOUT_S = 10.0
"""Seconds one request may take (connect, send, wait for and read the answer)."""
ATTEMPTS = 3
"""Tries of a request answered with 408, 409, 429 or 5xx, or that failed to connect or timed out."""
MAX_WAIT_S = 10.0
"""The longest wait between tries (a longer ``Retry-After`` ends the call with an error the model reads)."""
BACKOFF = Backoff(initial_delay=1.0, max_delay=MAX_WAIT_S)
"""The waits between tries, unless the API says how long (:class:`runner.core.backoff.Backoff`: 1 s, then 2 s...)."""
USER_AGENT = "ray-bench-runner/live-tools (an LLM-agent benchmark runner; https://pypi.org/project/ray-bench-runner)"
"""Sent with every request: Wikimedia's User-Agent policy asks clients to identify themselves."""


async def _sleep(seconds: float) -> None:
    """The wait between tries (a seam for tests, as :mod:`runner.models._retry` has)."""
    await asyncio.sleep(seconds)


class JSONClient:
    """GET requests to one JSON API.

    Args:
        provider: the API's name in limits and the cache (``wikipedia``, ``openmeteo``).
        url: the API's URL (its overridable base).
        timeout: seconds one request may take.

    A client holds no connection between calls, so it pickles to Ray workers and works from any event loop.
    """

    def __init__(self, provider: str, url: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.provider = provider
        self.url = url
        self.timeout = timeout

    @property
    def endpoint(self) -> Endpoint:
        """The endpoint of the run's rate limits: ``provider`` at ``url``."""
        return Endpoint(self.provider, self.url, "")

    def key(self, params: Mapping[str, Any]) -> str:
        """The cache key of a GET of ``params`` (their order does not matter)."""
        return cache_key(self.provider, self.url, "", {"method": "GET", "params": dict(params)})

    async def get(self, params: Mapping[str, Any], check: Callable[[Any], str | None] | None = None) -> Any:
        """The decoded JSON answer to ``GET url?params``, from the run's cache when it holds it.

        Args:
            params: the query.
            check: says what is wrong with a decoded answer (``None``: nothing), for APIs that report errors with
                a 200 (MediaWiki's ``{"error": ...}``); such an answer raises and is not cached.

        Raises:
            ToolError: no usable answer after :data:`ATTEMPTS` tries (a status that is not retried, such as 400 or
                404, ends at once), or an answer that is not JSON; the message, for the model, says what happened.
        """
        cache = current_cache()
        usable_cache = cache if cache is not None and cache.policy != "off" else None
        key = self.key(params)
        if usable_cache is not None:
            entry = await _cached(usable_cache, key)
            if entry is not None:
                return entry["json"]
        problem = ""
        for attempt in range(1, ATTEMPTS + 1):
            wait: float | None = None
            async with request_slot(self.endpoint, 0) as answer:
                try:
                    async with httpx.AsyncClient(timeout=self.timeout, headers={"User-Agent": USER_AGENT}) as client:
                        response = await client.get(self.url, params=dict(params))
                except httpx.TimeoutException:
                    problem = f"no answer within {self.timeout:g} s"
                    response = None
                except httpx.TransportError as exc:
                    problem = f"cannot connect ({type(exc).__name__})"
                    response = None
                else:
                    answer.set(response.status_code, response.headers)
            if response is not None:
                if response.is_success:
                    try:
                        data = response.json()
                    except ValueError:
                        raise ToolError(f"{self.provider} answered something that is not JSON") from None
                    refused = check(data) if check is not None else None
                    if refused:
                        raise ToolError(f"{self.provider} refused the request: {refused}")
                    if usable_cache is not None:
                        await _store(usable_cache, key, {"provider": self.provider, "url": self.url,
                                                         "params": dict(params), "json": data,
                                                         "created_at": time.time()})
                    return data
                problem = f"HTTP {response.status_code}{_reason(response)}"
                if not is_retryable_status(response.status_code):
                    break
                wait = retry_after_seconds(response.headers)
                if wait is not None and wait > MAX_WAIT_S:
                    problem += f", and it asks to wait {wait:.0f} s"
                    break
            if attempt < ATTEMPTS:
                await _sleep(BACKOFF.delay(attempt, wait))
        raise ToolError(f"{self.provider} ({self.url}) gave no answer: {problem}")


def _reason(response: httpx.Response) -> str:
    """``: <reason>`` from an error answer's JSON (OpenMeteo's ``reason``, MediaWiki's ``error.info``), or ``""``."""
    try:
        data = response.json()
    except ValueError:
        return ""
    if isinstance(data, dict):
        if isinstance(data.get("reason"), str):
            return f": {data['reason']}"
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("info"), str):
            return f": {error['info']}"
    return ""


async def _cached(cache: ResponseCache, key: str) -> dict[str, Any] | None:
    try:
        entry = await asyncio.to_thread(cache.get, key)
    except Exception as exc:  # noqa: BLE001 - a broken cache must not fail the tool: ask the API
        structlog.get_logger("runner.tools").warning("tool.cache_unreadable", key=key, error=str(exc)[:200])
        return None
    return entry if isinstance(entry, dict) and "json" in entry else None


async def _store(cache: ResponseCache, key: str, entry: dict[str, Any]) -> None:
    try:
        await asyncio.to_thread(cache.put, key, entry)
    except Exception as exc:  # noqa: BLE001 - the answer is good even when it cannot be cached
        structlog.get_logger("runner.tools").warning("tool.cache_unwritable", key=key, error=str(exc)[:200])
