"""The errors an HTTP model's calls end with: each failure of the server, the client or the answer, mapped to one
:class:`~runner.models._model_errors.ModelError` line that names the model, the URL, what happened and the fix.

:class:`ModelFailures` holds what those lines need of the model (its name, provider, timeout, whether its URL was
given); every method takes the :class:`~runner.models._route.Route` of the attempt that failed, so an error names
the URL that attempt used. :class:`~runner.models._openai.OpenAICompatibleModel` builds one when it needs it, from
its attributes at that moment. This module imports ``openai`` and ``httpx``: only the HTTP model loads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import openai

from runner.core.config import SERVABLE_PROVIDERS
from runner.models._body import json_body
from runner.models._model_errors import (CONTEXT_LENGTH_EXCEEDED, ErrorReply, ModelError, ModelProtocolError, NoChoice,
                                         UnreadableReply, error_message, exceeds_context, one_line)
from runner.models._providers import Provider
from runner.models._retry import is_retryable_status, refusal_cause
from runner.models._route import Route


@dataclass(frozen=True)
class ModelFailures:
    """The error of each way a call of one model fails (see the module's docstring).

    Args:
        name: the model's ``provider:model`` name, as every message begins.
        provider: the provider's name (``vllm``): a model of a provider the run can serve, built without a URL, is
            told ``--serve`` when it cannot connect.
        spec: the :class:`~runner.models._providers.Provider`, whose environment variables the fixes name.
        timeout: the model timeout of one request, in seconds, as timeout errors quote it.
        pinned: whether the model was given its base URL (then ``--serve`` is not suggested).
    """

    name: str
    provider: str
    spec: Provider
    timeout: float
    pinned: bool

    def protocol_error(self, route: Route, response: httpx.Response, exc: UnreadableReply) -> ModelProtocolError:
        """One line for an answer that is not the OpenAI API: the model, the URL, what came back and the fix.

        Args:
            route: the attempt's route: its URL is named, and the request's path is shown below its API root.
            response: the answer, whose request's method and path are named and whose status the error keeps.
            exc: what the reader found (its ``shape``, and its ``hint`` or else advice about the URL).
        """
        request = response.request
        path = _path(route, request)
        return ModelProtocolError(
            f"{self.name} at {route.url}: {request.method} {path} answered {exc.shape}, not the OpenAI API; "
            f"{exc.hint or _url_hint(route)}",
            model=self.name, url=str(request.url), shape=exc.shape, status=response.status_code,
        )

    def missing_route(self, route: Route, exc: openai.APIStatusError) -> ModelProtocolError | None:
        """The error for a 404, 405 or 501 whose body is not JSON (a web page, a proxy's text, nothing): no route of
        the OpenAI API at this URL, since the API's own errors, an unknown model's 404 included, are JSON. ``None``
        for any other answer."""
        if exc.status_code not in (404, 405, 501):
            return None
        try:
            json_body(exc.response)
        except UnreadableReply as unreadable:
            return self.protocol_error(
                route, exc.response, UnreadableReply(f"HTTP {exc.status_code} {unreadable.shape}", unreadable.hint))
        return None

    def undecodable(self, route: Route, exc: httpx.DecodingError) -> ModelProtocolError:
        """The error for a body that does not decode as its ``Content-Encoding`` says (a broken gzip stream)."""
        request = exc.request
        path = _path(route, request)
        shape = f"a body that does not decode as its Content-Encoding says ({one_line(exc, 100)})"
        return ModelProtocolError(
            f"{self.name} at {route.url}: {request.method} {path} answered {shape}, not the OpenAI API; "
            "something between here and the server garbles the body; reach the server without that proxy",
            model=self.name, url=str(request.url), shape=shape,
        )

    def timeout_error(self, route: Route, attempts: int) -> ModelError:
        """The error for a request past :attr:`timeout` on its last attempt (the whole answer had not arrived);
        ``attempts``: the tries made, each of which ran past it. Retryable."""
        tries = f" (each of {attempts} attempts)" if attempts > 1 else ""
        if route.served:
            fix = ("its replica, served by this run, is overloaded or its answers are long (each request was "
                   "cancelled there); lower --concurrency, set max_tokens (-S max_tokens=N), or raise the model "
                   "timeout")
        else:
            fix = "check that it is healthy and not trickling its answers, or raise the model timeout"
        return ModelError(
            f"{self.name}: the server at {route.url} did not finish answering within {self.timeout:g} s{tries}, the "
            f"model timeout of one request; {fix}",
            retryable=True,
        )

    def connection_error(self, route: Route, exc: openai.APIConnectionError, attempts: int) -> ModelError:
        """The error for a connection that failed on the last of ``attempts`` tries (or timed out:
        :meth:`timeout_error`). Retryable."""
        if isinstance(exc, openai.APITimeoutError):
            return self.timeout_error(route, attempts)
        tries = f" after {attempts} attempt(s)" if attempts > 1 else ""
        cause = one_line(exc.__cause__ or exc, 120)
        serve = ("; or have the run start it on its workers: --serve "
                 f"{self.name}") if self.provider in SERVABLE_PROVIDERS and not self.pinned else ""
        return ModelError(
            f"{self.name}: cannot connect to the model server at {route.url}{tries} ({cause}); "
            f"start the server or point --model-base-url at it{self._env_hint('base')}{serve}",
            retryable=True,
        )

    def status_error(self, route: Route, exc: openai.APIStatusError, attempts: int, uses_tools: bool) -> ModelError:
        """The error for an error status that ends a call after ``attempts`` tries: what the server said, and the
        fix (``uses_tools``: the request offered tools, so a refusal of tool calling is named as such). A refusal
        for the context's length has ``error_code`` ``context_length_exceeded``; a 429 is :meth:`refusal`'s."""
        status = exc.status_code
        body = exc.body
        # The client unwraps {"error": {...}} (OpenAI, Ollama); vLLM sends {"message": ...} at the top level; a body
        # that is not JSON (a proxy's HTML error page) is described rather than quoted.
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            detail = one_line(body["message"], 200)
        else:
            try:
                json_body(exc.response)
                detail = one_line(exc.message, 200)
            except UnreadableReply as unreadable:
                detail = unreadable.shape
        where = f"{self.name} at {route.url}"
        if exceeds_context(exc.message, body):
            said = one_line(error_message(body) or detail, 200)
            return ModelError(f"{where}: HTTP {status}: {said}; the conversation is longer than the model's context",
                              status=status, error_code=CONTEXT_LENGTH_EXCEEDED)
        if status == 429:
            return self.refusal(route, exc, detail, attempts)
        if status in (401, 403):
            fix = f"check the API key{self._env_hint('key')}"
        elif status == 404:
            fix = ("check the model name and the base URL (it should end with /v1); "
                   "'python -m runner list' shows the providers")
        elif status == 503:
            fix = (f"the server stayed unavailable for {_tries(attempts)}; check the server, lower the request rate "
                   "(--max-rpm, --concurrency), or resume the run once it is healthy")
        elif is_retryable_status(status):
            fix = f"the server failed {_tries(attempts)}; check the server's logs, or resume the run once it is healthy"
        elif uses_tools and any(word in detail.lower() for word in ("tool choice", "tool_choice", "tool-call-parser")):
            # vLLM without tool calling: '"auto" tool choice requires --enable-auto-tool-choice and
            # --tool-call-parser to be set'; not any 400 that names a tool (a refused history, a bad schema).
            fix = ("the server refused tool calling; for vLLM start it with --enable-auto-tool-choice "
                   "--tool-call-parser <parser for the model>")
        else:
            fix = "the server rejected the request"
        # A 404 in the API's own JSON: the server does not serve this model (vLLM's "The model `x` does not exist",
        # OpenAI's model_not_found); every further call of the run will meet it.
        return ModelError(f"{where}: HTTP {status}: {detail}; {fix}", status=status,
                          retryable=is_retryable_status(status),
                          error_code="model_not_found" if status == 404 else None)

    def refusal(self, route: Route, exc: openai.APIStatusError, detail: str, attempts: int) -> ModelError:
        """The error for a 429 that ends a call: why the server refuses (the body's code or type, e.g.
        ``insufficient_quota``), and the fix: a quota to restore (``error_code`` ``quota_exhausted``, not retryable),
        else a rate to lower (``rate_limited``). ``detail``: the server's message, one line."""
        cause, quota = refusal_cause(exc.body)
        why = f" ({cause})" if cause else ""
        if quota:
            fix = "the account's quota is used up and no wait restores it: add credits or raise its limits"
        else:
            fix = (f"it refused {_tries(attempts)}; lower the request rate (--max-rpm, --concurrency) or resume the run "
                   "once its limit resets")
        return ModelError(f"{self.name} at {route.url}: the server refuses with HTTP 429{why}: {detail}; {fix}",
                          status=429, retryable=not quota, error_code="quota_exhausted" if quota else "rate_limited")

    def no_choice(self, route: Route, response: httpx.Response, exc: NoChoice) -> ModelError:
        """The error for a well-formed answer without a choice (``error_code`` ``no_choice``, or ``rate_limited``
        when the error that came with it has code 429): this request's error, retryable only when that code is."""
        status = exc.status
        why = f" ({exc.reason})" if exc.reason else " and no reason"
        return ModelError(
            f"{self.name} at {route.url}: the server answered HTTP {response.status_code} with no choice{why}; "
            "the provider gave no reply to this request (a content filter, typically): this item is an error "
            "and the run goes on; change or drop the item, or the provider's filter settings",
            status=status,
            retryable=status is not None and is_retryable_status(status),
            error_code="rate_limited" if status == 429 else "no_choice",
        )

    def error_reply(self, route: Route, response: httpx.Response, exc: ErrorReply) -> ModelError:
        """The error for a success status whose body carries an error: ``context_length_exceeded`` when it says the
        conversation is too long, else the error's own, retryable when its code is."""
        status = exc.status
        if exceeds_context(exc.detail):
            return ModelError(f"{self.name} at {route.url}: the server answered HTTP {response.status_code} with an "
                              f"error: {exc.detail}; the conversation is longer than the model's context",
                              status=status, error_code=CONTEXT_LENGTH_EXCEEDED)
        return ModelError(
            f"{self.name} at {route.url}: the server answered HTTP {response.status_code} with an error"
            f"{f' {status}' if status else ''}: {exc.detail}",
            status=status,
            retryable=status is not None and is_retryable_status(status),
            error_code="rate_limited" if status == 429 else None,
        )

    def _env_hint(self, what: str) -> str:
        variable = self.spec.base_url_env if what == "base" else self.spec.api_key_env
        return f" (or set {variable})" if variable else ""


def _tries(attempts: int) -> str:
    """``all 3 attempts``, or ``the call`` for one."""
    return f"all {attempts} attempts" if attempts > 1 else "the call"


def _path(route: Route, request: httpx.Request) -> str:
    """The request's path below ``route``'s API root (``/chat/completions``)."""
    return request.url.path.removeprefix(httpx.URL(route.base_url).path.rstrip("/"))


def _url_hint(route: Route) -> str:
    """The fix for a server that answers something else than the OpenAI API at ``route``'s API root."""
    if "/v1" in httpx.URL(route.base_url).path:
        return "check that --model-base-url is the root of an OpenAI-compatible API"
    return f"is the URL missing /v1? (e.g. --model-base-url {route.url}/v1)"
