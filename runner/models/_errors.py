"""Errors of model calls.

A :class:`ModelError` is a :class:`~runner.core.errors.RunnerError`: before a run (the CLI's preflight check) it is
one line on stderr and exit status 2; inside a solution or metric during a run, the engine turns it into an error
record for that task (or an error result for that metric), and the run goes on.
"""

from __future__ import annotations

import re

from runner.core.errors import RunnerError


class ModelError(RunnerError):
    """A model call that failed for good: the server cannot be reached, refused the request, or kept failing after
    the retries. The message is one line naming the model, the URL and the fix.

    Args:
        message: the line.
        status: the HTTP status the server answered with, when it answered.
        retryable: whether the failure was of a kind that is retried (rate limit, server error, connection).
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class StructuredOutputError(ModelError):
    """A reply that does not parse into the requested structure (after the repair attempts)."""


def one_line(text: object, limit: int = 300) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` characters (for error messages)."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
