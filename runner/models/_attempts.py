"""The attempt loop of an HTTP model's call: each try's route, limiter permit and deadline, the failures that are
tried again (per :class:`~runner.models._retry.RetryPolicy`) and the error that ends a call
(:class:`~runner.models._failures.ModelFailures`), and the wait for a restarting replica the run serves.

:class:`Attempts` holds what the loop needs of the model; :class:`~runner.models._openai.OpenAICompatibleModel`
builds one per call from its attributes at that moment, and :func:`runner.models.post_json` sends its raw requests
through the same loop.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx
import openai
import structlog

from runner.core.limits import Answer, RateSignal, request_slot
from runner.core.served import pending as served_pending
from runner.core.usage import record_timeout
from runner.models import _retry
from runner.models._failures import ModelFailures
from runner.models._model_errors import ModelError, exceeds_context
from runner.models._retry import RetryPolicy, is_retryable_status, refusal_cause
from runner.models._route import Route

REPLICA_FAILED = "replica_failed"
"""The error code of a call to a model the run serves whose replica failed for good: the run stops on it."""
REPLICA_POLL_S = 0.5
"""Seconds between two looks at a restarting replica by a call that waits for it."""

SERVED_TIMEOUT_ATTEMPTS = 2
"""Attempts of a call to a replica the run serves that end past the model timeout before the call fails, the first
included, whatever ``retry.max_attempts`` says: a replica that did not answer in time is overloaded (a busy CPU, a
full batch), and each further try adds one more request to it. The abandoned request was cancelled there (streamed,
or closed: :attr:`~runner.core.served.ServedEndpoint.stream`), so the one retry does not run beside it."""

R = TypeVar("R")


@dataclass(frozen=True)
class Attempts:
    """The attempts of one model's calls (see the module's docstring).

    Args:
        name: the model's ``provider:model`` name: the served table's key, and how logs and usage name it.
        retry: how many tries, and the waits between them.
        timeout: the deadline of one request, in seconds, from sending it to the last byte of its answer.
        pinned: whether the model was given its base URL (then no served replica is waited for).
        route: where a request sent now goes (the model's :meth:`~runner.models._openai.OpenAICompatibleModel.route`),
            called once at the start of every try.
        failures: the errors a call ends with.
    """

    name: str
    retry: RetryPolicy
    timeout: float
    pinned: bool
    route: Callable[[], Route]
    failures: ModelFailures

    async def run(self, call: Callable[[Route, Answer], Awaitable[R]], *, uses_tools: bool = False,
                  tokens: int = 0) -> R:
        """``await call(route, answer)``, retried on 408/409/429/5xx, connection failures and retryable model errors
        (an error body with such a code) per :attr:`retry`; not a 429 that says the quota is used up
        (:data:`~runner.models._retry.QUOTA_CODES`), nor a refusal of a conversation longer than the model's context
        whatever its status (:data:`~runner.models._model_errors.CONTEXT_REFUSALS`).

        The one retry loop of a model call: ``retry.max_attempts`` tries in all, and between two of them the wait of
        :meth:`RetryPolicy.delay <runner.models._retry.RetryPolicy.delay>`, which is the server's own wait when its
        answer gave one, read as the run's limiter reads it (:attr:`RateSignal.retry_s
        <runner.core.limits.RateSignal.retry_s>`): the endpoint's pause for every worker then ends as the retry
        goes, and holds it back no further. The limiter paces requests; it never sends one again.

        Each try first waits for a restarting replica (:meth:`replica_ready`), then takes its :class:`Route` (one
        read of the served table) and uses it alone: the URL, the body's model name (given to ``call``), the
        limiter's endpoint and the URL its errors name. A try past the model timeout is cancelled (its connection
        closed, so the server can stop generating for it) and counted in the item's usage (``timeouts``); a call to
        a replica the run serves fails after :data:`SERVED_TIMEOUT_ATTEMPTS` of them, whatever the policy's
        attempts.

        Each try holds a permit of the run's limiter (:func:`runner.core.limits.request_slot`: the endpoint's rate,
        tokens per minute, connections and pauses, shared by every worker) for a request of about ``tokens`` tokens;
        ``call`` fills in the :class:`~runner.core.limits.Answer` (status, headers, tokens used), and a failed status
        is filled in here, so a 429 slows every worker, not only this one. ``uses_tools``: the request offers tools
        (:meth:`ModelFailures.status_error <runner.models._failures.ModelFailures.status_error>`).

        Raises:
            ModelError: a failure that is not retried, or the last attempt's failure.
            ModelProtocolError: a body that does not decode as its ``Content-Encoding`` says, or a 404, 405 or 501
                that is not JSON (:meth:`ModelFailures.missing_route
                <runner.models._failures.ModelFailures.missing_route>`); never retried.
        """
        log = structlog.get_logger("runner.models")
        attempts = self.retry.max_attempts
        timeouts = 0
        for attempt in range(1, attempts + 1):
            await self.replica_ready()
            route = self.route()
            try:
                async with request_slot(route.endpoint, tokens) as answer:
                    try:
                        return await self.within_deadline(call(route, answer))
                    except openai.APIStatusError as exc:
                        answer.set(exc.status_code, exc.response.headers)
                        raise
            except (openai.APIStatusError, openai.APIConnectionError, asyncio.TimeoutError, ModelError) as exc:
                timed_out = isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError))
                if timed_out:
                    timeouts += 1
                    record_timeout(self.name)
                last = attempt == attempts or (timed_out and route.served and timeouts >= SERVED_TIMEOUT_ATTEMPTS)
                wait, reason = self._retry_wait(route, exc, attempt, last, uses_tools)
            delay = self.retry.delay(attempt, wait)
            shown = min(attempts, SERVED_TIMEOUT_ATTEMPTS) if reason == "timeout" and route.served else attempts
            log.warning("model.retry", model=self.name, url=route.url, reason=reason, attempt=attempt,
                        attempts=shown, delay_s=round(delay, 3))
            await _retry.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def _retry_wait(self, route: Route, exc: Exception, attempt: int, last: bool,
                    uses_tools: bool) -> tuple[float | None, str]:
        """For try number ``attempt`` that failed with ``exc`` on ``route``: the seconds the server asked to wait
        (``None``: it said nothing) and the reason the log gives, when the call is tried again.

        Raises:
            ModelError: the error the call ends with: ``exc`` is not retried, or ``last`` (no try is left, or a
                served replica ran past the model timeout :data:`SERVED_TIMEOUT_ATTEMPTS` times).
            ModelProtocolError: as :meth:`run`.
        """
        failures = self.failures
        if isinstance(exc, openai.APIStatusError):
            missing = failures.missing_route(route, exc)
            if missing is not None:
                raise missing from exc
            status = exc.status_code
            wait = RateSignal.from_answer(status, exc.response.headers).retry_s
            quota = status == 429 and refusal_cause(exc.body)[1]
            # A refusal for the context's length, whatever its status (Xinference sends vLLM's as a 500).
            over = exceeds_context(exc.message, exc.body)
            if not is_retryable_status(status) or last or quota or over:
                raise failures.status_error(route, exc, attempt, uses_tools) from exc
            if wait is not None and wait > self.retry.max_retry_after:
                raise ModelError(
                    f"{self.name} at {route.url}: HTTP {status}, and the server asks to wait {wait:.0f} s, "
                    f"more than the {self.retry.max_retry_after:.0f} s allowed; lower the request rate "
                    "(fewer --workers or --concurrency) or resume the run later",
                    status=status, retryable=True, error_code="rate_limited" if status == 429 else None,
                ) from exc
            return wait, f"HTTP {status}"
        if isinstance(exc, openai.APIConnectionError):
            if isinstance(exc.__cause__, httpx.DecodingError):
                raise failures.undecodable(route, exc.__cause__) from exc
            if last:
                raise failures.connection_error(route, exc, attempt) from exc
            return None, "timeout" if isinstance(exc, openai.APITimeoutError) else "connection failed"
        if isinstance(exc, asyncio.TimeoutError):
            if last:
                raise failures.timeout_error(route, attempt) from exc
            return None, "timeout"
        assert isinstance(exc, ModelError)
        if not exc.retryable or last:
            raise exc
        return None, f"error {exc.status} in the body"

    async def within_deadline(self, request: Awaitable[R]) -> R:
        """``await request``, cancelled after :attr:`timeout` seconds in all (``asyncio.TimeoutError``): the
        deadline of one HTTP request, which a server that trickles its answer cannot stretch, since the HTTP
        client's timeouts restart with every byte (openai/openai-python#2599)."""
        if sys.version_info >= (3, 11):
            # In the calling task (wait_for would run the request in a task of its own).
            async with asyncio.timeout(self.timeout):
                return await request
        return await asyncio.wait_for(request, self.timeout)

    async def replica_ready(self) -> None:
        """Wait while this model's replica, served by the run in this process, starts again after a failure (a call
        in flight when it died is retried here and waits instead of failing; :mod:`runner.core.served`). Returns at
        once for a model given its URL (:attr:`pinned`).

        Raises:
            ModelError: the replica failed for good (``error_code`` ``replica_failed``: the run stops, and the same
                command with ``--rerun-failed`` redoes the items it failed), or was not ready again within its
                start-up time.
        """
        if self.pinned:
            return
        deadline = None
        while True:
            state = served_pending(self.name)
            if state is None:
                return
            if isinstance(state, str):
                raise ModelError(f"{self.name}: {state}", error_code=REPLICA_FAILED)
            deadline = deadline if deadline is not None else time.monotonic() + state
            if time.monotonic() >= deadline:
                raise ModelError(f"{self.name}: its replica was not ready again within {state:g} s "
                                 "(--model-startup-timeout)", error_code=REPLICA_FAILED)
            await asyncio.sleep(REPLICA_POLL_S)
