"""The limiter interface between the model layer and the engine: model endpoints, what a server's answer says about
its rate limit, and the limiter the engine installs for the calls of a work item.

The model layer (:mod:`runner.models`) asks the current limiter (:func:`current_limiter`) for a permit before each
HTTP request (:func:`request_slot`), tells it how the request ended, and reports every call's tokens for the budget
(:func:`spend`). The engine installs the run's implementation in each work item's
:class:`~runner.core.scope.CallScope`: an in-process limiter when sequential, a client of one limiter actor per run
on Ray. So plug-ins see only this module, never the engine; without an installed limiter every call goes out at
once, as before.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from runner.core.scope import call_scope, current_scope

DEFAULT_PAUSE_S = 1.0
"""Seconds an endpoint pauses after a 429 that says nothing about when to come back."""
MAX_HEADER_PAUSE_S = 60.0
"""The longest pause taken from ``x-ratelimit-reset-*`` headers: they give the time until the limit is back to its
initial state (OpenAI's rate-limit guide), which may be minutes for tokens, while room for one request comes
sooner."""
CHARS_PER_TOKEN = 4
"""Characters per token of the estimate made before a request (OpenAI's rule of thumb for English text)."""


@dataclass(frozen=True)
class Endpoint:
    """Where model calls go: the provider, the API root and the model; rate limits and the cache are kept per
    endpoint, so an agent's model, its judge and a simulated user are limited apart even on one server.

    Args:
        provider: the provider's name (``openai``, ``vllm``...).
        base_url: the API root (``""`` for a model without a server, such as the mock).
        model: the model name the server knows.
    """

    provider: str
    base_url: str
    model: str

    @property
    def name(self) -> str:
        """``provider:model``: the model's name in usage, prices and per-model limits."""
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def key(self) -> str:
        """``provider:model@base_url``: the endpoint in the limiter's state and reports."""
        return f"{self.name}@{self.base_url}" if self.base_url else self.name


def model_key(name: str) -> str:
    """A model name as usage records it: ``provider:model`` with the provider in lower case, also for the
    ``provider/model`` spelling (the first ``:`` or ``/`` separates them, as for ``--model``)."""
    text = name.strip()
    cut = min((i for i in (text.find(":"), text.find("/")) if i >= 0), default=len(text))
    provider, model = text[:cut].lower(), text[cut + 1:].strip()
    return f"{provider}:{model}" if model else provider


class EndpointLimits(BaseModel):
    """Limits of one model endpoint, shared by every worker of a run.

    Args:
        max_rpm: requests per minute.
        max_tpm: tokens (input + output) per minute; a request is counted at its estimate
            (:func:`estimate_tokens`) until its reply says how many it used.
        max_connections: requests in flight at once.
    """

    model_config = ConfigDict(extra="forbid")

    max_rpm: float | None = Field(default=None, gt=0)
    max_tpm: float | None = Field(default=None, gt=0)
    max_connections: int | None = Field(default=None, ge=1)

    def merged(self, override: EndpointLimits | None) -> EndpointLimits:
        """These limits with the ones ``override`` sets replacing them."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_none=True))


class ModelPrice(BaseModel):
    """What a model costs, in USD per million tokens (``--price MODEL=IN,OUT``); the runner keeps no price list."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD of ``input_tokens`` and ``output_tokens``."""
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


@dataclass(frozen=True)
class RateSignal:
    """What one answer says about the endpoint's rate limit.

    Args:
        status: the HTTP status (``None``: no answer, a connection failure).
        limited: the server refused for rate (429, or 503 with ``Retry-After``).
        wait_s: seconds the server asks to wait (``Retry-After``, ``retry-after-ms``), else ``None``.
        exhausted_s: seconds until the limit resets when ``x-ratelimit-remaining-requests`` or ``-tokens`` is 0
            (from ``x-ratelimit-reset-*``, at most :data:`MAX_HEADER_PAUSE_S`), else ``None``.
    """

    status: int | None = None
    limited: bool = False
    wait_s: float | None = None
    exhausted_s: float | None = None

    @property
    def retry_s(self) -> float | None:
        """Seconds the server asks a failed request to wait before it is tried again, or ``None`` (it said nothing):
        its ``Retry-After`` (or ``retry-after-ms``), else, for a refusal for rate, the reset of the limit it says is
        used up. The model layer's retries wait this long (:class:`runner.models.RetryPolicy`), and the endpoint's
        pause for every worker is the same time (:attr:`pause_s`), so a retried refusal waits once."""
        if self.wait_s is not None:
            return self.wait_s
        return self.exhausted_s if self.limited else None

    @property
    def pause_s(self) -> float | None:
        """Seconds every worker should hold back the endpoint's requests, or ``None``: for a refusal the server's
        wait (:attr:`retry_s`), else :data:`DEFAULT_PAUSE_S`; for an answer that exhausted a limit, its reset."""
        if self.limited:
            retry = self.retry_s
            return retry if retry is not None else DEFAULT_PAUSE_S
        return self.exhausted_s

    @classmethod
    def from_answer(cls, status: int | None, headers: Mapping[str, str] | None) -> RateSignal:
        """Read an answer's status and headers (any case-insensitive mapping, or lower-case keys)."""
        headers = headers or {}
        wait = retry_after_seconds(headers)
        limited = status == 429 or (status == 503 and wait is not None)
        exhausted = None
        for kind in ("requests", "tokens"):
            remaining = _number(headers.get(f"x-ratelimit-remaining-{kind}"))
            reset = duration_seconds(headers.get(f"x-ratelimit-reset-{kind}"))
            if remaining is not None and remaining <= 0 and reset is not None:
                exhausted = max(exhausted or 0.0, min(reset, MAX_HEADER_PAUSE_S))
        return cls(status=status, limited=limited, wait_s=wait, exhausted_s=exhausted)


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date,
    RFC 9110 section 10.2.3).

    Args:
        headers: response headers (a case-insensitive mapping such as the HTTP client's, or lower-case keys).
        now: the current Unix time for an HTTP-date value (default: ``time.time()``).

    Returns:
        seconds (never negative), or ``None`` when neither header is present or parses.
    """
    if not headers:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_seconds(text: str | None) -> float | None:
    """Seconds of an ``x-ratelimit-reset-*`` value: OpenAI's durations (``1s``, ``6m0s``, ``12ms``, ``1h2m3.5s``) or
    a bare number of seconds; ``None`` when absent or unreadable."""
    if text is None:
        return None
    text = text.strip()
    plain = _number(text)
    if plain is not None:
        return max(0.0, plain)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def estimate_tokens(body: Mapping[str, Any], max_tokens: int | None = None) -> int:
    """Tokens a request will use, before it is sent: its JSON's characters / :data:`CHARS_PER_TOKEN` plus the
    output allowed (``max_tokens``), as the OpenAI Cookbook's ``api_request_parallel_processor.py`` counts a
    request against a tokens-per-minute limit; the reply's usage corrects it."""
    text = json.dumps(body, default=str, ensure_ascii=False)
    return math.ceil(len(text) / CHARS_PER_TOKEN) + (max_tokens or 0)


@dataclass
class Permit:
    """One request's leave to go: what :meth:`Limiter.acquire` hands out and :meth:`Limiter.report` takes back.

    Args:
        endpoint: the endpoint.
        tokens: the request's estimated tokens.
        booked: the tokens the limiter counted for it (its estimate, or a share of a batch).
        connection: whether it holds one of the endpoint's connection slots.
    """

    endpoint: Endpoint
    tokens: int = 0
    booked: float = 0.0
    connection: bool = False


@dataclass
class Answer:
    """How a request ended, filled in by the caller inside :func:`request_slot`: the HTTP ``status`` and
    ``headers`` (none: no answer), and the ``tokens`` (input + output) the server counted, ``None`` if unknown."""

    status: int | None = None
    headers: Mapping[str, str] | None = None
    tokens: int | None = None

    def set(self, status: int, headers: Mapping[str, str] | None, tokens: int | None = None) -> None:
        """Record the answer."""
        self.status, self.headers, self.tokens = status, headers, tokens


class Limiter(Protocol):
    """The run's traffic control, as the model layer sees it. Implementations are safe to call from any thread and
    any event loop (a sync solution's ``chat_sync`` runs its own)."""

    async def acquire(self, endpoint: Endpoint, tokens: int) -> Permit:
        """Wait until ``endpoint`` may take one more request of about ``tokens`` tokens (its rate, tokens per
        minute, connections and any pause allow it); the permit to report back."""
        ...

    def report(self, permit: Permit, signal: RateSignal, tokens: int | None) -> None:
        """How the request of ``permit`` ended (``tokens``: input + output as the server counted them, ``None``
        unknown); releases its connection slot. Never blocks."""
        ...

    def spend(self, model: str, input_tokens: int | None, output_tokens: int | None) -> None:
        """One model call's tokens (``None``: unknown), counted against the run's budget. Never blocks."""
        ...


@contextlib.contextmanager
def limiter_scope(limiter: Limiter | None) -> Iterator[None]:
    """Make ``limiter`` the current one inside the block (``None``: none); the rest of the current
    :class:`~runner.core.scope.CallScope` stays."""
    with call_scope(limiter=limiter):
        yield


def current_limiter() -> Limiter | None:
    """The limiter the engine installed for the current work item, or ``None``."""
    return current_scope().limiter


@contextlib.asynccontextmanager
async def request_slot(endpoint: Endpoint, tokens: int) -> AsyncIterator[Answer]:
    """Hold a permit of the current limiter for one request to ``endpoint`` (nothing without a limiter); the
    caller fills in the yielded :class:`Answer`, which is reported on the way out (no answer: a connection
    failure or a cancellation).

    Example::

        async with request_slot(endpoint, estimate_tokens(body)) as answer:
            response = await send(body)
            answer.set(response.status_code, response.headers, tokens=used)
    """
    limiter = current_scope().limiter
    answer = Answer()
    if limiter is None:
        yield answer
        return
    permit = await limiter.acquire(endpoint, tokens)
    try:
        yield answer
    finally:
        limiter.report(permit, RateSignal.from_answer(answer.status, answer.headers), answer.tokens)


def spend(model: str, input_tokens: int | None, output_tokens: int | None) -> None:
    """Count one call's tokens against the current limiter's budget (nothing without a limiter)."""
    limiter = current_scope().limiter
    if limiter is not None:
        limiter.spend(model, input_tokens, output_tokens)

