"""A successful HTTP answer of a model's server read into its :class:`~runner.models._types.ChatReply`: the body
(:mod:`runner.models._body`, :mod:`runner.models._replies`), checked against the request that was sent
(:mod:`runner.models._asked`), told to the run's limiter, and any answer that is not a reply turned into the model's
error (:class:`~runner.models._failures.ModelFailures`).

:class:`ReplyReader` holds what that needs of the model (its names and its failures);
:class:`~runner.models._openai.OpenAICompatibleModel` builds one when it reads an answer, and
:func:`runner.models.post_json` reads its raw requests' answers with the same one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from runner.core.limits import Answer
from runner.models._asked import chat_mismatch, completion_mismatch, ignored_option
from runner.models._body import json_body
from runner.models._failures import ModelFailures
from runner.models._model_errors import CONTEXT_LENGTH_EXCEEDED, ErrorReply, ModelError, NoChoice, UnreadableReply
from runner.models._replies import read_completion, read_text_completion
from runner.models._route import Route
from runner.models._types import ChatReply, Usage


@dataclass(frozen=True)
class ReplyReader:
    """The reader of one model's answers (see the module's docstring).

    Args:
        name: the model's ``provider:model`` name, as errors and logs give it.
        provider: the provider's name, which an ``ignored_option`` error names.
        model: the model name as the server knows it: the reply's ``model`` when the body names none.
        failures: the model's errors (:class:`~runner.models._failures.ModelFailures`).
    """

    name: str
    provider: str
    model: str
    failures: ModelFailures

    def answered(self, route: Route, response: httpx.Response, answer: Answer, turn: int,
                 body: object = None, asked: Mapping[str, Any] | None = None) -> ChatReply:
        """The reply in a successful answer (``body``: its JSON when already read, as a stream is), checked against
        the request ``asked`` (:meth:`reply`), with the status, headers and tokens told to the limiter
        (:class:`~runner.core.limits.Answer`): an error body's own status when it has one, so a 429 in a body
        slows every worker as a 429 status does.

        Raises:
            ModelProtocolError, ModelError: as :meth:`reply`.
        """
        answer.set(response.status_code, response.headers)
        try:
            reply = self.reply(route, response, turn, body, asked)
        except ModelError as exc:
            if exc.status is not None:
                # An error body with status 200 (its code says what happened: a 429 is a refusal for rate).
                answer.set(exc.status, response.headers)
            raise
        answer.tokens = reply.usage.total_tokens
        return reply

    def reply(self, route: Route, response: httpx.Response, turn: int, body: object = None,
              asked: Mapping[str, Any] | None = None, path: str = "chat/completions") -> ChatReply:
        """The reply in a successful ``/chat/completions`` answer (see :mod:`runner.models._replies`), or the first
        choice of a ``/completions`` one (``path``).

        Args:
            route: the attempt's route, whose URL errors name.
            response: the answer (its status, and its body when ``body`` is ``None``).
            turn: how many assistant messages the request held (ids of tool calls that came without one).
            body: the answer's JSON when already read (a streamed answer put together), else read from ``response``.
            asked: the request body sent, which the reply is checked against (:mod:`runner.models._asked`);
                ``None``: not checked.
            path: ``chat/completions`` or ``completions``, below the API root.

        Raises:
            ModelProtocolError: the body is not an OpenAI chat completion.
            ModelError: the body carries an error (retryable when its code is), or holds no choice (``error_code``
                ``no_choice``: this request's error, not retried unless an error code that is retryable came with
                it, and never counted towards stopping a run), or lacks what ``asked`` asked for (``error_code``
                ``ignored_option``: the engine ignores a request option; not retried).
        """
        try:
            data = json_body(response) if body is None else body
            if path == "completions":
                reply = read_text_completion(data, model=self.model)
            else:
                reply = read_completion(data, turn=turn, model=self.model)
            mismatch = None
            if asked is not None and isinstance(data, Mapping):
                mismatch = (completion_mismatch if path == "completions" else chat_mismatch)(asked, data)
            if mismatch is not None:
                raise ignored_option(self.name, route.url, path, mismatch, data, self.provider)
            return reply
        except UnreadableReply as exc:
            raise self.failures.protocol_error(route, response, exc) from None
        except NoChoice as exc:
            raise self.failures.no_choice(route, response, exc) from None
        except ErrorReply as exc:
            raise self.failures.error_reply(route, response, exc) from None

    def too_long(self, route: Route, detail: str) -> ChatReply:
        """The reply to a conversation longer than the model's context: the item's answer, not a failure of the
        server (as Inspect AI's stop reason ``model_length``). The solution sees an empty reply, no tokens, and the
        reason ``context_length_exceeded``; never retried. ``detail``: why, one line, logged with ``route``'s URL."""
        structlog.get_logger("runner.models").warning("model.context_length_exceeded", model=self.name,
                                                      url=route.url, detail=detail)
        return ChatReply(content="", finish_reason=CONTEXT_LENGTH_EXCEEDED, model=self.model,
                         usage=Usage(input_tokens=0, output_tokens=0))
