"""When and how long to wait before trying a model call again.

This is the one retry policy of a model call, and :meth:`Attempts.run <runner.models._attempts.Attempts.run>` its one
loop. The run's traffic control (:mod:`runner.traffic`) never sends a request again: it paces every worker's
requests to an endpoint, pauses them all after a refusal for rate for the server's wait (the same wait as a retry's
here, :attr:`RateSignal.retry_s <runner.core.limits.RateSignal.retry_s>`), and adapts the endpoint's rate to the
refusals (:mod:`runner.traffic.backoff`).

Retried: HTTP 408 (request timeout), 409 (conflict), 429 (rate limit) and every 5xx, plus connection failures and
read timeouts, the set the OpenAI Python client itself retries (``openai._base_client.BaseClient._should_retry``);
but not a 429 that says the account's quota is used up (:data:`QUOTA_CODES`), which no wait restores.
The schedule is the run's one backoff policy (:class:`runner.core.backoff.Backoff`: capped exponential backoff
with jitter), so that many Ray workers hitting one rate limit do not retry in lockstep; unless the server says how
long to wait (``Retry-After`` in seconds or as an HTTP date, the non-standard ``retry-after-ms``, or, for a refusal
for rate, the reset of the ``x-ratelimit-*`` limit it says is used up), which is then honoured exactly.

We retry here rather than in the OpenAI client (built with ``max_retries=0``) so that every retry is logged with its
reason and delay, and so that attempts and delays are settings of the run.
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from runner.core.backoff import RETRYABLE_STATUS, Backoff, is_retryable_status
from runner.core.limits import retry_after_seconds

__all__ = ["QUOTA_CODES", "RETRYABLE_STATUS", "RetryPolicy", "is_retryable_status", "refusal_cause",
           "retry_after_seconds", "sleep"]

QUOTA_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted", "organization_spend_limit_exceeded",
                         "project_spend_limit_exceeded", "organization_usage_limit_exceeded"})
"""The ``code`` or ``type`` of a 429's error body that means the account ran out of credit or reached a spend or usage
limit (OpenAI's error-codes guide: the type ``insufficient_quota``, the code naming which limit); OpenAI says that
retrying such an error does not restore access, so it is not retried."""

# Tests replace this to observe the delays chosen without waiting for them.
_sleep = asyncio.sleep


def refusal_cause(body: object) -> tuple[str | None, bool]:
    """Why a server refused, from an error body (the ``error`` object, as the OpenAI client unwraps it, or vLLM's
    top-level one): its ``code``, else its ``type``, when a string (``None``: neither); and whether the refusal
    means a used-up quota (:data:`QUOTA_CODES`)."""
    if not isinstance(body, dict):
        return None, False
    named = [value for value in (body.get("code"), body.get("type")) if isinstance(value, str) and value]
    return (named[0] if named else None), any(name in QUOTA_CODES for name in named)


class RetryPolicy(Backoff):
    """How a model call is retried: the run's backoff (:class:`~runner.core.backoff.Backoff`, whose fields it has:
    ``initial_delay``, ``multiplier``, ``max_delay``, ``jitter``) and how many tries.

    Args:
        max_attempts: tries in all, the first included (1: no retry).
        max_retry_after: the longest server-requested wait (``Retry-After``) honoured, in seconds; a server asking
            for more ends the call with an error instead of stalling the run.
    """

    max_attempts: int = Field(default=5, ge=1)
    max_retry_after: float = Field(default=120.0, ge=0)


async def sleep(seconds: float) -> None:
    """Wait ``seconds`` (through a hook tests replace)."""
    await _sleep(seconds)
