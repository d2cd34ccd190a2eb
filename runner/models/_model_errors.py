"""Errors of model calls.

A :class:`ModelError` is a :class:`~runner.core.errors.RunnerError`: before a run (the CLI's preflight check) it is
one line on stderr and exit status 2; inside a solution or metric during a run, the engine turns it into an error
record for that task (or an error result for that metric), and the run goes on. A :class:`ModelProtocolError` says
that the server does not speak the OpenAI chat API at all, so every further call will fail the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
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
            (:class:`ModelProtocolError`), ``model_not_found`` (HTTP 404 in the API's JSON: the server serves no
            model of that name); the engine stops a run after a few in a row (``runner.engine.watch``).
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


@dataclass(frozen=True)
class ContextRefusal:
    """How one engine or API words its refusal of a request longer than the model's context.

    Args:
        engine: who sends it (``vLLM``, ``SGLang``, ``TGI``...).
        phrase: a regular expression found in the refusal's message (matched case-insensitively, anywhere).
        source: where the wording comes from: the engine's file and function, or the API's documentation or a
            recorded answer (``tests/models/test_served_models.py`` sends each as that engine's body).
    """

    engine: str
    phrase: str
    source: str


CONTEXT_REFUSALS: tuple[ContextRefusal, ...] = (
    ContextRefusal("vLLM, OpenAI", r"this model's maximum context length is",
                   "vllm/entrypoints/openai/serving_engine.py, OpenAIServing._validate_input (\"This model's maximum "
                   "context length is N tokens. However, you requested ...\"); vllm/entrypoints/renderer.py, "
                   "CompletionRenderer._create_tokens_prompt (\"... However, your request has N input tokens\"); "
                   "OpenAI's chat completions, code context_length_exceeded (chathub-dev/chathub#126)"),
    ContextRefusal("vLLM (V1 engine)", r"is longer than the maximum model length",
                   "vllm/v1/engine/input_processor.py (processor.py before), _validate_prompt_len: \"The decoder prompt "
                   "(length N) is longer than the maximum model length of M\", and \"... (length N) plus the number of "
                   "requested output tokens (at least 1) is longer than the maximum model length of M\"; "
                   "xorbitsai/inference#3785"),
    ContextRefusal("vLLM (V0 engine)", r"is too long to fit into the model",
                   "vllm/engine/llm_engine.py (0.6), LLMEngine._validate_model_input: \"The prompt (total length N) is "
                   "too long to fit into the model (context length M)\"; vllm-project/vllm#12165"),
    ContextRefusal("SGLang", r"is longer than the model's context length",
                   "python/sglang/srt/managers/tokenizer_manager.py, TokenizerManager._validate_one_request: \"The "
                   "input (N tokens) is longer than the model's context length (M tokens).\""),
    ContextRefusal("SGLang", r"requested token count exceeds the model's maximum context length",
                   "python/sglang/srt/managers/tokenizer_manager.py, TokenizerManager._validate_one_request: "
                   "\"Requested token count exceeds the model's maximum context length of M tokens. ...\""),
    ContextRefusal("TGI", r"`inputs` tokens \+ `max_new_tokens` must be <=",
                   "router/src/validation.rs, ValidationError::MaxTotalTokens, sent as HTTP 422 {\"error\": \"Input "
                   "validation error: ...\", \"error_type\": \"validation\"} (router/src/server.rs)"),
    ContextRefusal("TGI", r"`inputs` must have less than \d+ tokens",
                   "router/src/validation.rs, ValidationError::InputLength: \"`inputs` must have less than M tokens. "
                   "Given: N\""),
    ContextRefusal("llama.cpp server", r"exceeds the available context size",
                   "tools/server/server-context.cpp: \"request (N tokens) exceeds the available context size (M "
                   "tokens), try increasing it\", type exceed_context_size_error, HTTP 400 "
                   "(tools/server/server-common.cpp, format_error_response)"),
    ContextRefusal("llama.cpp server", r"is larger than the max context size",
                   "tools/server/server-context.cpp: \"input (N tokens) is larger than the max context size (M "
                   "tokens). skipping\" (a prompt it cannot split)"),
    ContextRefusal("Ollama", r"is longer than the context length",
                   "llm/llama_server.go: \"the prompt is longer than the context length currently available to the "
                   "model; shorten the prompt, ...\" (HTTP 400)"),
    ContextRefusal("Ollama", r"exceeds (?:the )?(?:model's )?(?:maximum )?context length",
                   "llm/llama_server.go, normalizeEmbeddingError: \"the input length exceeds the context length\"; "
                   "x/mlxrunner/pipeline.go: \"input length (N tokens) exceeds the model's maximum context length (M "
                   "tokens)\"; server/routes.go: \"input exceeds maximum context length ...\""),
    ContextRefusal("OpenAI", r"exceeds the context window of this model",
                   "the Responses and embeddings APIs: \"Your input exceeds the context window of this model. Please "
                   "adjust your input and try again.\" with code context_length_exceeded (recorded in "
                   "dyad-sh/dyad#1672)"),
    ContextRefusal("OpenRouter", r"maximum context length",
                   "\"This endpoint's maximum context length is N tokens. However, you requested about M tokens ...\" "
                   "(refly-ai/refly#1177)"),
    ContextRefusal("DashScope", r"range of input length should be",
                   "Alibaba Cloud Model Studio, Error codes (alibabacloud.com/help/en/model-studio/error-code): 400 "
                   "InvalidParameter \"Range of input length should be [1, xxx]\"; its compatible mode's body in "
                   "AsyncFuncAI/deepwiki-open#346"),
    ContextRefusal("Anthropic (through a gateway)", r"prompt is too long",
                   "Anthropic's invalid_request_error \"prompt is too long: N tokens > M maximum\" "
                   "(anthropics/claude-code#7866)"),
    ContextRefusal("Gemini (through a gateway)", r"input token count \(?\d*\)? ?exceeds the maximum number of tokens",
                   "Gemini's 400 INVALID_ARGUMENT \"The input token count (N) exceeds the maximum number of tokens "
                   "allowed (M).\" (google-gemini/gemini-cli#4118)"),
    ContextRefusal("LiteLLM", r"ContextWindowExceededError|context[ _]length[ _]exceeded",
                   "litellm/exceptions.py, ContextWindowExceededError (\"litellm.ContextWindowExceededError: ...\"), "
                   "and OpenAI's code quoted in a gateway's text"),
)
"""Every refusal of a request longer than the model's context that the runner recognises, with its source. The
engines the runner serves (vLLM, SGLang; ``transformers serve`` is counted before sending, :mod:`runner.models.
_context`) and the servers and APIs ``docs/models.md`` names."""

CONTEXT_CODES = frozenset({CONTEXT_LENGTH_EXCEEDED, "exceed_context_size_error"})
"""Error ``code`` or ``type`` values that say the same: OpenAI's ``context_length_exceeded``, llama.cpp server's
``exceed_context_size_error`` (tools/server/server-common.cpp)."""

_CONTEXT_PHRASES = re.compile("|".join(f"(?:{refusal.phrase})" for refusal in CONTEXT_REFUSALS), re.IGNORECASE)
_MESSAGE_KEYS = ("message", "detail", "error", "msg", "errors")
"""Where error bodies keep their message: OpenAI's ``error.message``, vLLM's and SGLang's top-level ``message``,
FastAPI's (Xinference's) ``detail``, TGI's ``error`` string, pydantic's ``detail[].msg``, Gemini's ``errors``."""


def _pieces(body: object, depth: int = 0) -> Iterator[tuple[str, str]]:
    """``("text", value)`` for every message string and ``("code", value)`` for every ``code`` or ``type`` string in an
    error body (a dict, a list of them, or a string), down to a few levels of nesting."""
    if depth > 4:
        return
    if isinstance(body, str):
        yield "text", body
    elif isinstance(body, list):
        for item in body[:8]:
            yield from _pieces(item, depth + 1)
    elif isinstance(body, dict):
        for key in ("code", "type", "error_type"):
            if isinstance(body.get(key), str):
                yield "code", body[key]
        for key in _MESSAGE_KEYS:
            if key in body:
                yield from _pieces(body[key], depth + 1)


def exceeds_context(detail: str, body: object = None) -> bool:
    """Whether an error answer says that the request is longer than the model's context, whatever its status and the
    shape of its body.

    Args:
        detail: the error's message as the client has it (it may quote the body).
        body: the answer's body: the decoded JSON (an OpenAI error object, ``{"detail": ...}``, ``{"error": "..."}``,
            vLLM's top-level ``{"message": ...}``, a list), or its text when it is not JSON; ``None``: unknown.

    Returns:
        ``True`` when a ``code`` or ``type`` in the body is one of :data:`CONTEXT_CODES`, or ``detail`` or a message
        in the body matches a phrase of :data:`CONTEXT_REFUSALS` (case-insensitively).
    """
    for kind, value in _pieces(body):
        if kind == "code" and value in CONTEXT_CODES:
            return True
        if kind == "text" and _CONTEXT_PHRASES.search(value):
            return True
    return bool(_CONTEXT_PHRASES.search(detail))


def error_message(body: object) -> str | None:
    """The first message an error body carries (see :func:`exceeds_context` for the shapes), or ``None``."""
    return next((value for kind, value in _pieces(body) if kind == "text" and value.strip()), None)


def one_line(text: object, limit: int = 300) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` characters (for error messages)."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
