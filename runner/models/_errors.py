"""Errors of model calls.

A :class:`ModelError` is a :class:`~runner.core.errors.RunnerError`: before a run (the CLI's preflight check) it is
one line on stderr and exit status 2; inside a solution or metric during a run, the engine turns it into an error
record for that task (or an error result for that metric), and the run goes on. A :class:`ModelProtocolError` says
that the server does not speak the OpenAI chat API at all, so every further call will fail the same way.
"""

from __future__ import annotations

import re
from typing import ClassVar

from runner.core.errors import RunnerError


class ModelError(RunnerError):
    """A model call that failed for good: the server cannot be reached, refused the request, or kept failing after
    the retries. The message is one line naming the model, the URL and the fix.

    Args:
        message: the line.
        status: the HTTP status the server answered with, when it answered.
        retryable: whether the failure was of a kind that is retried (rate limit, server error, connection).
        error_code: a stable reason that the run's record keeps as ``error.code`` when it ends a work item. For a
            failure that every further call to the server will meet: ``quota_exhausted`` (HTTP 429, the account's
            quota is used up), ``rate_limited`` (HTTP 429 on every attempt), ``protocol_error``
            (:class:`ModelProtocolError`); the engine stops a run after a few in a row (``runner.engine.watch``).
            For a failure of this request only: ``no_choice`` (a well-formed reply that holds no choice, such as a
            provider's content filter answering ``200`` with ``choices: []``), which never stops a run.
            ``context_length_exceeded`` (the conversation is longer than the model's context) never leaves the
            model: the call returns an empty reply with that finish reason instead.
    """

    protocol_error: ClassVar[bool] = False
    """Whether the error says the server speaks another protocol (see :class:`ModelProtocolError`)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 error_code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.error_code = error_code


class ModelProtocolError(ModelError):
    """A server answer that cannot be read as the OpenAI API, whatever the request: an HTML page, text or an empty
    body where JSON was due, JSON of another API (Ollama's native ``/api/chat``, a FastAPI ``{"detail": ...}``), a
    completion without choices, or a message whose content has a shape no known server sends
    (``docs/models.md`` lists the shapes that are read). It is never retried.

    Its :attr:`protocol_error` flag is ``True``: one such error means that every call to that server will fail the
    same way, so a driver counts them and stops the run after the first few, with one line naming the server and
    the shape, rather than writing an error record per task.

    Args:
        message: the line, naming the model, the URL, the shape and the likely fix.
        model: the model's ``provider:model`` name.
        url: the URL that answered (the API root and the path, e.g. ``http://host/v1/chat/completions``).
        shape: what came back, in words (``text/html: an HTML page titled 'Welcome'``,
            ``content is a dict with keys a, b``).
    """

    protocol_error: ClassVar[bool] = True

    def __init__(self, message: str, *, model: str = "", url: str = "", shape: str = "",
                 status: int | None = None) -> None:
        super().__init__(message, status=status, retryable=False, error_code="protocol_error")
        self.model = model
        self.url = url
        self.shape = shape


class StructuredOutputError(ModelError):
    """A reply that does not parse into the requested structure (after the repair attempts)."""


class UnreadableReply(ValueError):
    """Raised by the reply readers (``_body``, ``_replies``) for an answer that is not the OpenAI API; the model
    turns it into a :class:`ModelProtocolError` with its name and URL.

    Args:
        shape: what came back, in words.
        hint: the likely fix, when the shape suggests one (``None``: the model's default advice about the URL).
    """

    def __init__(self, shape: str, hint: str | None = None) -> None:
        super().__init__(shape)
        self.shape = shape
        self.hint = hint


class ErrorReply(ValueError):
    """Raised by the reply reader for a body that carries an error (``{"error": {...}}``) with a success status,
    as some gateways send; the model turns it into a :class:`ModelError`.

    Args:
        detail: the error's message.
        status: the HTTP-like code in the error, when it has an integer one (e.g. 502 for an upstream failure).
    """

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


class NoChoice(ValueError):
    """Raised by the reply reader for a well-formed chat completion that holds no choice (``choices: []``, or a choice
    with a ``finish_reason`` and no message): the provider answered, but gave no reply to this request (a content
    filter, typically); the model turns it into a :class:`ModelError` with ``error_code`` ``no_choice``.

    Args:
        reason: the provider's reason in words (``prompt_filter_results: hate filtered (high)``, an error object's
            message), or ``None`` when it gave none.
        status: the HTTP-like code of an error object that came with it, when it has an integer one.
    """

    def __init__(self, reason: str | None, status: int | None = None) -> None:
        super().__init__(reason or "no reason given")
        self.reason = reason
        self.status = status


CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
"""The finish reason of a reply to a conversation longer than the model's context (OpenAI's error code of the same
name): the model could not answer it, and no retry can change that."""

_CONTEXT_PHRASES = re.compile(
    r"maximum context length"                     # OpenAI; vLLM: "This model's maximum context length is 4096 tokens"
    r"|context[ _]length[ _]exceeded"             # OpenAI's code, LiteLLM's ContextWindowExceededError text
    r"|too long to fit into the model"            # vLLM >= 0.6: "The prompt (total length N) is too long to fit..."
    r"|longer than the model'?s context length"   # SGLang: "The input (N tokens) is longer than the model's context..."
    r"|exceeds? the (?:model'?s? )?(?:maximum )?(?:context|sequence) length"  # TGI, llama.cpp, SGLang variants
    r"|prompt is too long"                        # Anthropic-style gateways
    r"|input (?:prompt )?\(?\d+ tokens\)? is too long",  # vLLM: "Input prompt (N tokens) is too long and exceeds..."
    re.IGNORECASE,
)


def exceeds_context(detail: str, body: object = None) -> bool:
    """Whether an error answer says that the request is longer than the model's context: its ``code`` is
    ``context_length_exceeded`` (OpenAI), or its message says so in one of the engines' phrasings (vLLM, SGLang,
    TGI, llama.cpp, OpenAI; matched case-insensitively)."""
    if isinstance(body, dict) and CONTEXT_LENGTH_EXCEEDED in (body.get("code"), body.get("type")):
        return True
    return bool(_CONTEXT_PHRASES.search(detail))


def one_line(text: object, limit: int = 300) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` characters (for error messages)."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
