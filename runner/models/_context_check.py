"""The context check of a served model whose server does not make it itself.

vLLM and SGLang refuse a conversation longer than the model's context with a 400 that the model layer reads as the
item's answer (``context_length_exceeded``). ``transformers serve`` with continuous batching does not: such a
request never returns, and the server grows until it stops answering every other request (docs/models.md). For a
replica of that engine the run therefore counts the prompt's tokens itself, with the model's own tokenizer and chat
template, before the request is sent, and answers ``context_length_exceeded`` without sending it, as vLLM would:
when the prompt's tokens plus the output allowed (``max_tokens``) exceed the context (vLLM's
``OpenAIServing._validate_input``).

The tokenizer is loaded once per process and tokenizer source (:mod:`runner.core.tokenizers`), while the replica's
server starts, not on an item's first call (``transformers.AutoTokenizer``; the server has it on the node already,
as it serves the same path or Hugging Face id); the context is the model's ``max_position_embeddings``
(``AutoConfig``), else the tokenizer's ``model_max_length`` when it is a real bound.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from runner.core import tokenizers


def context_tokens(source: str) -> int | None:
    """The context, in tokens, of the model whose tokenizer is at ``source``; ``None`` when it cannot be known."""
    found = tokenizers.load(source)
    return None if found is None else found[1]


def prompt_tokens(source: str, messages: Sequence[Mapping[str, Any]],
                  tools: Sequence[Mapping[str, Any]] | None = None) -> int | None:
    """Tokens of the prompt the server builds from ``messages`` (OpenAI chat messages) and ``tools`` (OpenAI tool
    definitions): the model's chat template with the generation prompt, tokenized. A template that cannot take these
    messages (some refuse tool calls or tool messages) falls back to the tokens of the messages' JSON, which is
    longer than any template's rendering of them. ``None`` when the tokenizer cannot be loaded."""
    found = tokenizers.load(source)
    if found is None:
        return None
    tokenizer = found[0]
    try:
        ids = tokenizer.apply_chat_template(list(messages), tools=list(tools) if tools else None,
                                            add_generation_prompt=True, tokenize=True)
        if isinstance(ids, Mapping) or hasattr(ids, "keys"):  # a BatchEncoding in some versions
            ids = ids["input_ids"]
        return len(ids)
    except Exception:  # noqa: BLE001 - the template's own refusal; count the raw conversation instead
        text = json.dumps({"messages": list(messages), "tools": list(tools or [])}, ensure_ascii=False, default=str)
        return len(tokenizer.encode(text, add_special_tokens=False))


class Fit(NamedTuple):
    """What :func:`fit` found: ``why`` a request does not fit (``None`` when it fits or cannot be counted), the
    ``room`` left for the answer beside the prompt, and the ``prompt``'s tokens (both ``None`` when the request
    cannot be counted)."""

    why: str | None
    room: int | None
    prompt: int | None


def fit(source: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None) -> Fit:
    """Whether a request fits the context of the model whose tokenizer is at ``source``, with the prompt counted
    once.

    Returns:
        ``(why, room, prompt)``: ``why`` is one line naming the counts when the prompt's tokens plus ``max_tokens``
        (0 when not given) exceed the context (vLLM's rule), else ``None``; ``room`` is the tokens left for the
        answer beside the prompt (the context less the prompt); ``prompt`` the prompt's tokens (:func:`prompt_tokens`,
        which the model layer also records as the call's input when the server reports no usage). ``room`` and
        ``prompt`` are ``None`` when the request cannot be counted, and then ``why`` is ``None`` too.
    """
    context = context_tokens(source)
    if context is None:
        return Fit(None, None, None)
    prompt = prompt_tokens(source, messages, tools)
    if prompt is None:
        return Fit(None, None, None)
    if prompt + (max_tokens or 0) <= context:
        return Fit(None, context - prompt, prompt)
    return Fit(f"this model's maximum context length is {context} tokens; the request has {prompt} in its prompt "
               f"and asks for {max_tokens or 0} more (counted before sending: the server does not refuse it)",
               context - prompt, prompt)


def exceeds(source: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
            max_tokens: int | None) -> str | None:
    """Why a request does not fit the context of the model whose tokenizer is at ``source`` (one line naming the
    counts), or ``None`` when it fits or cannot be counted (:func:`fit`)."""
    return fit(source, messages, tools, max_tokens).why

