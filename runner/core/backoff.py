"""The one backoff policy: how long to wait before trying an operation again, for every retry loop of the run.

Model calls (:class:`runner.models.RetryPolicy`, which adds how many tries and the longest server-requested wait),
record writes through a storage outage (:mod:`runner.storage.outage`) and the live tools' requests
(:mod:`runner.solutions.web.http`) each keep their own loop, because each ends differently (an error record, a
:class:`~runner.core.errors.StorageOutage`, a message the model reads), but wait by this schedule.

The schedule is capped exponential backoff with jitter, as in AWS's Architecture Blog post "Exponential Backoff And
Jitter" (Marc Brooker, 2015) and OpenAI's rate-limit guide ("retrying with exponential backoff"): after failed try
``n`` (1-based) wait up to ``min(max_delay, initial_delay * multiplier ** (n - 1))`` seconds, less a random share of
up to ``jitter`` of it (``jitter=1`` is that post's "full jitter", 0.5 its "equal jitter"), so that many workers that
failed together do not come back together; unless the server said how long to wait (``Retry-After``:
:func:`runner.core.limits.retry_after_seconds`), which is then honoured exactly.

Which failures are worth another try is each caller's (HTTP: :func:`is_retryable_status`; storage:
:func:`runner.storage.error_kinds.is_transient`).
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth another try besides every 5xx: request timeout, conflict, rate limit (the set the OpenAI
Python client retries, ``openai._base_client.BaseClient._should_retry``)."""


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another try: 408, 409, 429 or any 5xx."""
    return status in RETRYABLE_STATUS or status >= 500


class Backoff(BaseModel):
    """A capped exponential backoff with jitter (the schedule: see the module's docstring).

    Args:
        initial_delay: seconds before the second try.
        multiplier: each further delay is this many times the previous one (>= 1).
        max_delay: the longest computed delay, in seconds.
        jitter: a computed delay is reduced by a random share of up to this fraction (0: exact delays; 0 to 1).

    Raises:
        pydantic.ValidationError: a negative delay, a multiplier under 1 or a jitter outside 0 to 1.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_delay: float = Field(default=1.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_delay: float = Field(default=30.0, ge=0)
    jitter: float = Field(default=0.25, ge=0, le=1)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based): ``retry_after`` (seconds) when the server
        gave one, else ``min(max_delay, initial_delay * multiplier ** (attempt - 1))`` less a random share of up to
        ``jitter`` of it."""
        if retry_after is not None:
            return retry_after
        # The exponent is capped: past it every delay is max_delay anyway, and a float power would overflow.
        base = min(self.max_delay, self.initial_delay * self.multiplier ** min(attempt - 1, 64))
        return base * (1.0 - self.jitter * random.random())
