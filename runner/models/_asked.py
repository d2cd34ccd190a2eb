"""A reply checked against its request: what the request asked for and the reply lacks, because the engine ignored a
request option it does not support (ggml-org/llama.cpp#27174: an engine that ignores ``echo`` answers a 21-token
prompt with one log-probability, and every choice of a multiple-choice task then scores 0.0).

A reply that lacks what its request asked for cannot be scored: lm-eval's ``local-completions`` sums
``token_logprobs[ctxlen:-1]``, which is 0.0 over a list shorter than the prompt, and the task's accuracy becomes the
share of gold answers in position 0. So before a reply is used, three things are checked, each against the request
that was sent (a field the model layer left out for the provider is not asked for):

- ``echo`` with ``logprobs`` on ``/completions``: each prompt's choice carries ``logprobs.token_logprobs`` for every
  token of the prompt and the one generated (``len(prompt) + 1`` values for a prompt of token ids; at least two for a
  text prompt, whose length only the server's tokenizer knows), as vLLM and SGLang answer;
- ``n``: as many choices as ``n`` times the prompts (one choice per prompt of a batch when ``n`` is not sent);
- a forced tool call (``tool_choice`` ``required`` or a named function) on ``/chat/completions``: the reply holds a
  tool call, whose ``arguments`` parse as JSON (vLLM and OpenAI constrain a forced call's arguments to its schema,
  so arguments that do not parse say that the engine ignored the forcing). A call the model chose itself
  (``tool_choice`` ``auto``) may carry broken JSON: that is the model's answer, which an agent shows the model
  (:attr:`~runner.models.ToolCall.parse_error`).

:func:`engine_of` names the engine from the reply's own marks, so that the error says which server ignored the
option even when it was reached under another provider's name (``--model vllm:x`` pointed at llama.cpp).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.models._model_errors import ModelError

IGNORED_OPTION = "ignored_option"
"""The error code (``error.code`` in a record) of a reply that lacks what its request asked for
(:func:`completion_mismatch`, :func:`chat_mismatch`); :mod:`runner.engine.watch` stops a run whose items fail with it
in a row."""


@dataclass(frozen=True)
class Mismatch:
    """What a reply lacks of what its request asked for.

    Args:
        option: the request option the engine ignored (``echo``, ``n``, ``tool_choice``).
        asked: what the request asked for, in words (``the log-probability of each of the prompt's 21 tokens``).
        field: the reply's field that should hold it (``choices[0].logprobs.token_logprobs``).
        found: what that field held, in words (``1 value``, ``null``, ``missing``).
    """

    option: str
    asked: str
    field: str
    found: str

    def describe(self) -> str:
        """``the request asked for X with `option`, and FIELD holds Y``."""
        return f"the request asked for {self.asked} with `{self.option}`, and {self.field} holds {self.found}"


def _prompts(prompt: Any) -> list[Any]:
    """The prompts of a ``/completions`` body: one string or token list, or a list of them."""
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
        return [prompt]
    return list(prompt) if isinstance(prompt, list) else []


def _n(request: Mapping[str, Any]) -> int:
    """The ``n`` a request asked for (``extra_body``'s too), 1 when none."""
    extra = request.get("extra_body")
    value = request.get("n", extra.get("n") if isinstance(extra, Mapping) else None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _choices(reply: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    choices = reply.get("choices")
    return [choice for choice in choices if isinstance(choice, Mapping)] if isinstance(choices, list) else []


def _count_mismatch(request: Mapping[str, Any], choices: list[Mapping[str, Any]], prompts: int) -> Mismatch | None:
    """The reply's choices against ``n`` times the prompts, when either is above 1 (a reply with no choice at all to
    one prompt is the reader's ``no_choice``)."""
    n = _n(request)
    if (n == 1 and prompts == 1) or len(choices) == n * prompts:
        return None
    if n == 1:
        return Mismatch("prompt", f"one choice for each of its {prompts} prompts", "choices", f"{len(choices)}")
    per = f" for each of its {prompts} prompts" if prompts > 1 else ""
    return Mismatch("n", f"{n} choices{per}", "choices", f"{len(choices)}")


def completion_mismatch(request: Mapping[str, Any], reply: Mapping[str, Any]) -> Mismatch | None:
    """What a ``/completions`` reply lacks of what ``request`` (the body sent) asked for; ``None`` when nothing.

    Args:
        request: the request body (``prompt``: a string, token ids, or a list of them; ``echo``, ``logprobs``, ``n``).
        reply: the decoded JSON answer (status 200).
    """
    prompts = _prompts(request.get("prompt"))
    choices = _choices(reply)
    counted = _count_mismatch(request, choices, max(len(prompts), 1))
    if counted is not None:
        return counted
    if not (request.get("echo") and request.get("logprobs") is not None and request.get("logprobs") is not False):
        return None
    by_index = {choice.get("index", position): choice for position, choice in enumerate(choices)}
    for position, prompt in enumerate(prompts):
        choice = by_index.get(position)
        field = f"choices[{position}].logprobs.token_logprobs"
        if choice is None:
            return Mismatch("echo", "one choice per prompt", "choices", f"no choice {position}")
        tokens = len(prompt) if isinstance(prompt, list) else None
        asked = (f"the log-probability of each of the prompt's {tokens} tokens" if tokens is not None
                 else "the log-probabilities of the prompt's tokens")
        logprobs = choice.get("logprobs")
        if not isinstance(logprobs, Mapping):
            what = ("missing" if "logprobs" not in choice else
                    f"a list of {len(logprobs)} values (the generated tokens only)" if isinstance(logprobs, list)
                    else _words(logprobs))
            return Mismatch("echo", asked, f"choices[{position}].logprobs", what)
        values = logprobs.get("token_logprobs")
        if not isinstance(values, list):
            if isinstance(logprobs.get("content"), list):
                return Mismatch("echo", asked, field, f"nothing: logprobs holds 'content' with "
                                f"{len(logprobs['content'])} generated token(s) only")
            return Mismatch("echo", asked, field, "missing" if "token_logprobs" not in logprobs else _words(values))
        needed = tokens + 1 if tokens is not None else 2
        if len(values) < needed:
            return Mismatch("echo", asked, field, f"{len(values)} value{'s' if len(values) != 1 else ''}")
    return None


def chat_mismatch(request: Mapping[str, Any], reply: Mapping[str, Any]) -> Mismatch | None:
    """What a ``/chat/completions`` reply lacks of what ``request`` (the body sent) asked for: ``n`` choices, and a
    forced tool call with arguments that parse as JSON; ``None`` when nothing.

    Args:
        request: the request body (``n`` or ``extra_body.n``, ``tools``, ``tool_choice``).
        reply: the decoded JSON answer, already read as a chat completion (it has at least one choice).
    """
    choices = _choices(reply)
    counted = _count_mismatch(request, choices, 1)
    if counted is not None:
        return counted
    choice = request.get("tool_choice")
    forced = choice == "required" or (isinstance(choice, Mapping) and choice.get("type") == "function")
    if not request.get("tools") or not forced or not choices:
        return None
    asked = "a call of the tool it named" if isinstance(choice, Mapping) else "a tool call"
    message = choices[0].get("message")
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    if isinstance(calls, Mapping):
        calls = [calls]
    if not isinstance(calls, list) or not calls:
        return Mismatch("tool_choice", asked, "choices[0].message.tool_calls", "no call")
    for index, call in enumerate(calls):
        function = call.get("function", call) if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, Mapping):
            continue
        if not isinstance(arguments, str) or not _is_json_object(arguments):
            return Mismatch("tool_choice", f"{asked} whose arguments are a JSON object",
                            f"choices[0].message.tool_calls[{index}].function.arguments", _words(arguments))
    return None


def _is_json_object(text: str) -> bool:
    """Whether ``text`` is a JSON object, or a JSON string that encodes one (as ``transformers serve`` sends them,
    transformers#45057); blank arguments are an empty object (as the reader takes them)."""
    if not text.strip():
        return True
    try:
        value = json.loads(text)
        if isinstance(value, str):
            value = json.loads(value)
    except ValueError:
        return False
    return isinstance(value, dict)


def _words(value: Any) -> str:
    """A JSON value in a few words for a message: ``null``, ``a str 'abc...'``, ``a list of 3``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string that is not a JSON object ({shown!r})"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


_LLAMA_CPP_BUILD = re.compile(r"^b\d+-[0-9a-f]+$")
_TGI_VERSION = re.compile(r"^\d+\.\d+\.\d+-(native|sha-[0-9a-f]+)")


def engine_of(reply: Mapping[str, Any]) -> str | None:
    """The engine that sent ``reply``, from its marks; ``None`` when it carries none.

    Marks: llama.cpp's ``timings`` object and its build in ``system_fingerprint`` (``b6123-1a2b3c4``,
    ``tools/server/server-task.cpp``); TGI's version in ``system_fingerprint`` (``3.3.4-native``,
    ``router/src/lib.rs``); Ollama's ``fp_ollama``; vLLM's ``stop_reason`` in a choice and ``prompt_logprobs``
    (``vllm/entrypoints/openai/protocol.py``); SGLang's ``matched_stop`` in a choice. ``transformers serve``'s
    replies carry no mark of their own.
    """
    fingerprint = reply.get("system_fingerprint")
    fingerprint = fingerprint if isinstance(fingerprint, str) else ""
    choices = _choices(reply)
    if isinstance(reply.get("timings"), Mapping) or _LLAMA_CPP_BUILD.match(fingerprint):
        return "llama.cpp"
    if _TGI_VERSION.match(fingerprint):
        return "TGI"
    if fingerprint == "fp_ollama":
        return "Ollama"
    if any("matched_stop" in choice for choice in choices):
        return "SGLang"
    if "prompt_logprobs" in reply or any("stop_reason" in choice for choice in choices):
        return "vLLM"
    return None


FIXES = {
    "echo": "the task needs the log-probabilities of the prompt's tokens: use an engine that returns them for `echo` "
            "with `logprobs` (vLLM, SGLang: --model vllm:NAME or sglang:NAME), or run the model in the workers "
            "(--model transformers:NAME without --model-base-url)",
    "n": "ask for one choice per request (drop `n`)",
    "prompt": "send one prompt per request (-B batch_size=1)",
    "tool_choice": "use an engine that constrains a forced tool call to its schema (vLLM started with "
                   "--enable-auto-tool-choice, SGLang), or let the model choose (tool_choice auto)",
}
"""The way out of each ignored option, for the error's line."""

ENGINES = {"transformers": "transformers serve", "ollama": "Ollama"}
"""The engine in words of a provider whose replies carry no mark of the engine (:func:`engine_of`) and whose name is
the engine's; a ``vllm:`` or ``sglang:`` model's replies always carry their engine's mark, so one without it is
another server reached under that name (``vllm`` fits any OpenAI-compatible server)."""


def ignored_option(model: str, url: str, path: str, mismatch: Mismatch, reply: Mapping[str, Any],
                   provider: str) -> ModelError:
    """The error of a reply that lacks what its request asked for: one line naming the model, the URL, the engine
    (:func:`engine_of`, else the provider's), the option it ignores, the missing field and the way out; code
    :data:`IGNORED_OPTION`, not retried (the engine answers every such request alike).

    Args:
        model: the model's ``provider:model`` name; url: its API root as messages show it; path: ``completions`` or
            ``chat/completions``; mismatch: what is missing; reply: the decoded answer; provider: the model's
            provider.
    """
    engine = engine_of(reply) or ENGINES.get(provider) or "an OpenAI-compatible server whose reply names no engine"
    return ModelError(
        f"{model} at {url}: the engine ({engine}) ignores `{mismatch.option}`: POST /{path}: {mismatch.describe()}; "
        f"the reply cannot be scored: {FIXES.get(mismatch.option, 'use an engine that honours it')}",
        error_code=IGNORED_OPTION)
