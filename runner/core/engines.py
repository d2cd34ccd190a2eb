"""What each engine the run can serve does, in one table: one frozen :class:`EngineFacts` per engine.

Serving (:mod:`runner.serving.engines`, which adds only command lines and log phrasings), the model layer's
providers (:mod:`runner.models._providers`), the served endpoints' defaults (:mod:`runner.core.served`) and
lm-eval's routes (:mod:`runner.benchmarks.lmeval.routes`) all read it, so a fact about an engine is written once.
Each fact names where it was read (the engine's source or docs; docs/models.md has the full table with versions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class EngineFacts:
    """What one engine's server does.

    Args:
        name: the provider prefix that selects it (``vllm``, ``sglang``, ``transformers``).
        title: its name in messages (``vLLM``).
        needs_gpu: whether it cannot run without a GPU (a replica with no GPU ids is refused).
        lists_served_name: whether ``/v1/models`` lists exactly the name it serves (so readiness and the model
            layer's preflight check it there); ``transformers serve`` lists the Hugging Face cache instead.
        checks_context: whether it refuses a conversation longer than the model's context (a 400 the model layer
            reads as the item's answer); otherwise the model layer counts the prompt's tokens before sending it.
        cancels_on_disconnect: whether it stops generating for a plain (non-streamed) request whose client closed
            the connection; otherwise only a streamed answer is cancelled, and the model layer streams every call.
        default_max_tokens: the output limit, in tokens, the runner gives a call that sets none.
        structured_mode: how a structured call asks for JSON (``json_schema``; ``prompt`` where the server ignores
            response formats).
        dropped_params: request fields the server rejects or silently ignores, left out of every request.
        prompt_logprobs: whether its completions route returns the log-probabilities of a prompt's tokens
            (``echo`` with ``logprobs``), which lm-eval's log-likelihood tasks need.
        token_prompts: whether its completions route takes a prompt as token ids.
        reloads_in_place: whether a running server can load another checkpoint of the same architecture without a
            restart (:meth:`runner.serving.engines.Engine.swap`).
    """

    name: str
    title: str
    needs_gpu: bool = True
    lists_served_name: bool = True
    checks_context: bool = True
    cancels_on_disconnect: bool = True
    default_max_tokens: int = 4096
    structured_mode: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    dropped_params: frozenset[str] = frozenset()
    prompt_logprobs: bool = True
    token_prompts: bool = True
    reloads_in_place: bool = False


ENGINE_FACTS: dict[str, EngineFacts] = {facts.name: facts for facts in (
    # vLLM: with_cancellation on its routes; echo + logprobs and token-id prompts on /v1/completions; sleep mode
    # level 2 and reload_weights (docs.vllm.ai, "Sleep Mode"). Left alone it generates up to the context
    # (get_max_tokens: the context less the prompt), so the runner's limit leaves a reasoning model room.
    EngineFacts(name="vllm", title="vLLM", reloads_in_place=True),
    # SGLang: is_disconnected polled while it waits; /update_weights_from_disk (SGLang's docs).
    EngineFacts(name="sglang", title="SGLang", reloads_in_place=True),
    # transformers serve 5.17: continuous batching never returns a prompt longer than the context; only
    # _streaming (cli/serving/chat_completion.py) cancels; it ignores response_format (no constrained decoding), n,
    # logprobs and max_completion_tokens, and ignores or rejects tool_choice; /v1/completions ignores echo and
    # logprobs and refuses token-id prompts (400); /load_model and /reset swap an unpinned server's model
    # (cli/serving/server.py); 1024 is what it gives a model with no limit of its own.
    EngineFacts(name="transformers", title="transformers serve", needs_gpu=False, lists_served_name=False,
                checks_context=False, cancels_on_disconnect=False, default_max_tokens=1024, structured_mode="prompt",
                dropped_params=frozenset({"tool_choice", "n", "logprobs", "top_logprobs", "response_format",
                                          "max_completion_tokens"}),
                prompt_logprobs=False, token_prompts=False, reloads_in_place=True),
)}
"""Every engine the run can serve, by provider prefix, in the order docs and ``list`` show them."""
