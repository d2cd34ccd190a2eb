"""Scripted ``/v1/completions`` answers in the shapes the engines send, for the scripted OpenAI-compatible server.

A stand-in because vLLM and SGLang need a GPU, which the test machines lack; the answers have the shape vLLM's
OpenAI server gives (``vllm/entrypoints/openai/serving_completion.py``): for ``echo`` with ``logprobs`` and
``max_tokens=1``, one choice per prompt whose ``logprobs`` holds the prompt's tokens and the generated one, with
``token_logprobs`` ``None`` for the first token and ``top_logprobs`` a dict per token (the sampled token and the most
likely one). The "model" is a fixed function of the token ids, so any two clients get the same numbers.
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


class Completions:
    """``ScriptedModelServer.completions`` answering as vLLM does (``honours_stop``), or as ``transformers serve``
    with continuous batching does (``honours_stop=False``: ``stop`` ignored; ``token_prompts=False``: a prompt of
    token ids refused with 400, as transformers 5.17's ``/v1/completions`` refuses it).

    Attributes:
        bodies: every request body received.
        refuse: a substring of a text prompt, or a token id of a token prompt, whose request is answered 400.
    """

    def __init__(self, *, honours_stop: bool = True, token_prompts: bool = True) -> None:
        self.honours_stop = honours_stop
        self.token_prompts = token_prompts
        self.bodies: list[dict[str, Any]] = []
        self.refuse: Any = None

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
                choices.append({"index": index, "text": "", "finish_reason": "length", "stop_reason": None,
                                "logprobs": {"tokens": [str(t) for t in tokens], "token_logprobs": lps,
                                             "top_logprobs": top, "text_offset": list(range(len(tokens)))}})
                completion_tokens += 1
            else:
                text = _cut(ANSWER, body.get("stop")) if self.honours_stop else ANSWER
                choices.append({"index": index, "text": text, "finish_reason": "stop", "logprobs": None})
                completion_tokens += len(text.split())
        return {"id": "cmpl-scripted", "object": "text_completion", "created": 0, "model": body.get("model"),
                "choices": choices, "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                              "total_tokens": prompt_tokens + completion_tokens}}


def models_list(name: str = "scripted") -> dict[str, Any]:
    """``GET /v1/models`` as vLLM answers it, with the model's context (``max_model_len``)."""
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "vllm",
                                        "max_model_len": CONTEXT}]}
