"""Token counts the model layer makes itself, with a served model's own tokenizer, for a call whose server reported
none.

A streamed answer carries its usage only where the server sends it: ``transformers serve`` 5.17 ends every stream with
it, 5.25 only when the request asks (``stream_options.include_usage``, which the model layer always sends), and a
server may send none at all. The tokens of such a call are not lost where the run serves the model with its tokenizer
published (:attr:`runner.core.served.ServedEndpoint.tokenizer`, loaded once per process by
:mod:`runner.core.tokenizers`): the prompt is counted as the context check counts it (the model's chat template with
the generation prompt, :func:`runner.models._context_check.prompt_tokens`, as ``transformers serve`` builds it), and
the answer as its text re-encoded, plus the end-of-turn token of a model that stopped by itself. The reply's usage
then says ``counted_by="runner"``, and the item's record counts the call in ``calls_counted_by_runner``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.core import tokenizers
from runner.models._context_check import prompt_tokens
from runner.models._types import ChatReply, Usage

_SELF_STOPPED = ("stop", "tool_calls")
"""Finish reasons of a model that ended its turn itself, by generating its end-of-turn token, which the server counts
among the answer's tokens (``transformers serve`` counts every generated token) and no decoded text shows."""


def answer_tokens(source: str, reply: ChatReply) -> int | None:
    """Tokens of ``reply``'s answer by the tokenizer at ``source`` (a local model directory or a Hugging Face id):
    its reasoning, text and tool calls (name and arguments as written) encoded without special tokens, plus one for
    the end-of-turn token when the model stopped by itself (``finish_reason`` ``stop`` or ``tool_calls``). The
    server's own count is of the ids it generated, which the decoded text may not re-encode to exactly, and of the
    markup of reasoning and tool calls, which the text lacks: this may differ from it by a few tokens. ``None`` when
    the tokenizer cannot be loaded."""
    found = tokenizers.load(source)
    if found is None:
        return None
    tokenizer = found[0]
    parts = [reply.reasoning, reply.content, *(call.name + call.raw_arguments for call in reply.tool_calls)]
    text = "".join(part for part in parts if part)
    encoded = len(tokenizer.encode(text, add_special_tokens=False)) if text else 0
    return encoded + (reply.finish_reason in _SELF_STOPPED)


def with_counted_usage(source: str, reply: ChatReply, messages: Sequence[Mapping[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None, prompt: int | None = None) -> ChatReply:
    """``reply`` with the counts its server did not report counted by the tokenizer at ``source``, and its usage
    marked ``counted_by="runner"``; unchanged when the server reported both, or when the tokenizer cannot be loaded
    (the counts then stay unknown, and the call is counted in ``calls_without_usage``).

    Args:
        source: where the served model's tokenizer loads from (a local directory or a Hugging Face id).
        reply: the server's answer, put together (:mod:`runner.models._stream`) when it was streamed.
        messages, tools: the request's OpenAI chat messages and tool definitions, as sent.
        prompt: the prompt's tokens when already counted (the context check counts them before sending), else
            counted here.
    """
    usage = reply.usage
    if usage.input_tokens is not None and usage.output_tokens is not None:
        return reply
    input_tokens = usage.input_tokens
    if input_tokens is None:
        input_tokens = prompt if prompt is not None else prompt_tokens(source, messages, tools)
    output_tokens = usage.output_tokens if usage.output_tokens is not None else answer_tokens(source, reply)
    if input_tokens is None or output_tokens is None:
        return reply
    counted = Usage(input_tokens=input_tokens, output_tokens=output_tokens, counted_by="runner")
    return reply.model_copy(update={"usage": counted})
