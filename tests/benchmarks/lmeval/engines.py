"""Scripted ``/v1/completions`` answers in the shapes the engines send, for the scripted OpenAI-compatible server.

A stand-in because vLLM and SGLang need a GPU, which the test machines lack; the answers have the shape vLLM's
OpenAI server gives (``vllm/entrypoints/openai/serving_completion.py``): for ``echo`` with ``logprobs`` and
``max_tokens=1``, one choice per prompt whose ``logprobs`` holds the prompt's tokens and the generated one, with
``token_logprobs`` ``None`` for the first token and ``top_logprobs`` a dict per token (the sampled token and the most
likely one). The "model" is a fixed function of the token ids, so any two clients get the same numbers.

:data:`SHAPES` gives the other engines' answers to the same request, as their code writes them (read in December
2026): SGLang honours ``echo`` as vLLM does (its choices carry ``matched_stop``); the others ignore it and return the
generated token's log-probability only, or none.
"""

from __future__ import annotations

from typing import Any

CONTEXT = 2048
"""The context the scripted server lists as ``max_model_len`` (as vLLM's ``/v1/models`` does)."""
ANSWER = " Paris is the answer\nQuestion: and more text after the stop"


def logprob(prefix: list[int], token: int) -> float:
    """The scripted log-probability of ``token`` after ``prefix``."""
    return -(((sum(prefix[-3:]) * 31 + token * 17) % 97) / 10.0) - 0.01


def _prompts(body: dict[str, Any]) -> list[Any]:
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
        return [prompt]
    return list(prompt or [])


def _cut(text: str, stop: list[str] | None) -> str:
    cuts = [text.find(term) for term in stop or [] if term and term in text]
    return text[:min(cuts)] if cuts else text


SHAPES = {
    "vLLM": "honours echo: the prompt's tokens and the generated one (serving_completion.py); choices carry stop_reason",
    "SGLang": "honours echo as vLLM does (openai_api/serving_completions.py); choices carry matched_stop",
    "an OpenAI-style server": "ignores echo: logprobs of the generated token only, in the legacy shape (the issue's "
                              "one log-probability for a 21-token prompt)",
    "llama.cpp": "ignores echo (llama.cpp#27174): logprobs {'content': [...]} of the generated token, "
                 "system_fingerprint its build, 'timings' (tools/server/server-task.cpp to_json_oaicompat)",
    "TGI": "ignores echo: logprobs a list of the generated tokens' values (router/src/lib.rs CompletionComplete), "
           "system_fingerprint its version",
    "Ollama": "ignores echo and logprobs on /v1/completions: no logprobs, system_fingerprint fp_ollama",
    "transformers serve": "ignores echo and logprobs (UNUSED_LEGACY_COMPLETION_FIELDS in cli/serving/completion.py): "
                          "no logprobs key (exclude_none)",
}
"""Each engine's answer to ``echo`` with ``logprobs`` on ``/v1/completions``, as :class:`Completions` sends it."""

HONOURS_ECHO = ("vLLM", "SGLang")


def _echo_choice(shape: str, index: int, tokens: list[int], lps: list[float | None],
                 top: list[dict[str, float] | None]) -> dict[str, Any]:
    """One prompt's choice of an ``echo`` + ``logprobs`` answer in ``shape``'s form (:data:`SHAPES`)."""
    choice: dict[str, Any] = {"index": index, "text": "", "finish_reason": "length"}
    generated, last = tokens[-1], lps[-1]
    if shape in HONOURS_ECHO:
        choice["logprobs"] = {"tokens": [str(t) for t in tokens], "token_logprobs": lps, "top_logprobs": top,
                              "text_offset": list(range(len(tokens)))}
        choice["stop_reason" if shape == "vLLM" else "matched_stop"] = None
    elif shape == "an OpenAI-style server":
        choice["logprobs"] = {"tokens": [str(generated)], "token_logprobs": [last], "top_logprobs": [top[-1]],
                              "text_offset": [0]}
    elif shape == "llama.cpp":
        choice["logprobs"] = {"content": [{"id": generated, "token": str(generated), "bytes": [49], "logprob": last,
                                           "top_logprobs": [{"id": generated, "token": str(generated),
                                                             "bytes": [49], "logprob": last}]}]}
    elif shape == "TGI":
        choice["logprobs"] = [last]
    return choice


_MARKS = {"llama.cpp": {"system_fingerprint": "b6123-1a2b3c4", "timings": {"prompt_n": 21, "predicted_n": 1}},
          "TGI": {"system_fingerprint": "3.3.4-native"}, "Ollama": {"system_fingerprint": "fp_ollama"}}
"""Top-level fields each engine adds to its answers."""


class Completions:
    """``ScriptedModelServer.completions`` answering as vLLM does (``honours_stop``), or as ``transformers serve``
    with continuous batching does (``honours_stop=False``: ``stop`` ignored; ``token_prompts=False``: a prompt of
    token ids refused with 400, as transformers 5.17's ``/v1/completions`` refuses it).

    Attributes:
        bodies: every request body received.
        tokens: the tokens its answers reported in ``usage`` (prompt and completion), summed: the server's own count.
        shape: the engine whose answer to ``echo`` with ``logprobs`` it sends (:data:`SHAPES`).
        refuse: a substring of a text prompt, or a token id of a token prompt, whose request is answered 400.
    """

    def __init__(self, *, honours_stop: bool = True, token_prompts: bool = True, shape: str = "vLLM") -> None:
        self.honours_stop = honours_stop
        self.token_prompts = token_prompts
        self.shape = shape
        self.bodies: list[dict[str, Any]] = []
        self.refuse: Any = None
        self.tokens = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        from tests.support.model_server import RawAnswer

        self.bodies.append(body)
        prompts = _prompts(body)
        if not self.token_prompts and any(isinstance(p, list) for p in prompts):
            return RawAnswer(400, b'{"error": {"message": "prompt must be a string", "code": 400}}',
                             {"Content-Type": "application/json"})
        if self.refuse is not None and any(self.refuse in p for p in prompts):
            return RawAnswer(400, b'{"error": {"message": "scripted refusal of this prompt", "code": 400}}',
                             {"Content-Type": "application/json"})
        choices, prompt_tokens, completion_tokens = [], 0, 0
        for index, prompt in enumerate(prompts):
            ids = prompt if isinstance(prompt, list) else [ord(c) % 500 for c in prompt]
            prompt_tokens += len(ids)
            if body.get("echo") and body.get("logprobs"):
                generated = (sum(ids) * 13) % 1000
                tokens = [*ids, generated]
                lps: list[float | None] = [None] + [logprob(tokens[:i], tokens[i]) for i in range(1, len(tokens))]
                top: list[dict[str, float] | None] = [None] + [
                    {str(tokens[i]): lps[i], "argmax": max(lps[i], -0.5)} for i in range(1, len(tokens))]  # type: ignore
                choices.append(_echo_choice(self.shape, index, tokens, lps, top))
                completion_tokens += 1
            else:
                text = _cut(ANSWER, body.get("stop")) if self.honours_stop else ANSWER
                choices.append({"index": index, "text": text, "finish_reason": "stop", "logprobs": None})
                completion_tokens += len(text.split())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        self.tokens += prompt_tokens + completion_tokens
        return {"id": "cmpl-scripted", "object": "text_completion", "created": 0, "model": body.get("model"),
                "choices": choices, "usage": usage, **_MARKS.get(self.shape, {})}


def models_list(name: str = "scripted") -> dict[str, Any]:
    """``GET /v1/models`` as vLLM answers it, with the model's context (``max_model_len``)."""
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "vllm",
                                        "max_model_len": CONTEXT}]}
