"""Which of lm-evaluation-harness's own model classes answers a run's documents, and what that engine can answer.

A run names its model as any run does (``--model``, ``--model-base-url``); the route is decided once, from those and
the benchmark's ``endpoint`` argument, on the driver (to refuse what cannot work before anything is written, and to
render chat templates as the worker's model class will) and again on every worker (to build the model class):

==================================================  ==================================  ============================
the run's model                                     lm-eval model class                 prompt log-probabilities
==================================================  ==================================  ============================
``transformers:NAME`` (the embedded model, a hub    ``hf`` (``HFLM``) inside the        yes
id, a folder), no URL                               worker, on its GPUs or the CPU
``vllm:NAME`` / ``sglang:NAME``, no URL             ``local-completions`` at the        yes (``echo`` + ``logprobs``)
                                                    worker's replica, token ids
``transformers:NAME`` with ``--model-base-url``     ``local-completions``, text         no: ``transformers serve``
                                                    prompts                             ignores ``echo``/``logprobs``
any other ``provider:NAME`` (``--model-base-url``   ``local-completions``               as the endpoint allows
or the provider's URL)                              (``-B endpoint=chat``:              (``chat``: no)
                                                    ``local-chat-completions``)
==================================================  ==================================  ============================
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from runner.core.config import EMBEDDED_MODEL
from runner.core.engines import ENGINE_FACTS
from runner.core.errors import BenchmarkError
from runner.core.limits import model_key

LOGPROB_TYPES = ("loglikelihood", "loglikelihood_rolling", "multiple_choice")
"""lm-eval output types whose requests need the log-probabilities of a prompt's tokens."""

ENDPOINTS = ("completions", "chat")
"""``-B endpoint=``: the API an HTTP model is reached through (lm-eval's ``local-completions`` or
``local-chat-completions``)."""

Kind = Literal["hf", "completions", "chat"]

MODEL_CLASSES = {"hf": "hf", "completions": "local-completions", "chat": "local-chat-completions"}
"""lm-eval's registered name of each route's model class (its ``--model``)."""


@dataclass(frozen=True)
class Route:
    """How one run's documents reach its model.

    Args:
        model: the model as the run names it (``provider:name``): its usage key in records.
        kind: ``hf`` (lm-eval's ``HFLM`` in the worker), ``completions`` or ``chat`` (lm-eval's
            ``local-completions`` / ``local-chat-completions`` over the runner's HTTP path).
        source: what loads the weights or the tokenizer: a Hugging Face id or a folder; ``""`` for the embedded
            model, whose converted folder each machine makes itself (:func:`runner.serving.embedded.model_dir`).
        base_url: the endpoint's API root when the run was given one; ``None``: the replica the run serves on each
            worker (``vllm:``/``sglang:``), or no server (``hf``), or the provider's default.
        engine: the engine in words, for messages (``vLLM``, ``transformers serve``...).
        prompt_logprobs: whether the engine returns the log-probabilities of a prompt's tokens, which
            ``loglikelihood``, ``loglikelihood_rolling`` and ``multiple_choice`` tasks need.
        token_prompts: whether prompts are sent as token ids (lm-eval's ``tokenized_requests``); ``transformers
            serve`` refuses them (400).
    """

    model: str
    kind: Kind
    source: str
    base_url: str | None
    engine: str
    prompt_logprobs: bool
    token_prompts: bool

    @property
    def provider_name(self) -> str:
        """The provider part of :attr:`model` (``vllm``)."""
        return model_key(self.model).partition(":")[0]

    def refuse_logprob_tasks(self, output_types: dict[str, str]) -> None:
        """Refuse tasks that need prompt log-probabilities when this engine returns none.

        Args:
            output_types: task name -> lm-eval ``output_type``.

        Raises:
            BenchmarkError: the first such task, the engine, and the way out.
        """
        if self.prompt_logprobs:
            return
        needing = [name for name, output_type in output_types.items() if output_type in LOGPROB_TYPES]
        if not needing:
            return
        more = f" (and {len(needing) - 1} more)" if len(needing) > 1 else ""
        name = model_key(self.model).partition(":")[2]
        if self.kind == "chat" and self.provider_name != "transformers":
            raise BenchmarkError(
                f"lm-eval task {needing[0]!r}{more} is {output_types[needing[0]]}, which needs the log-probabilities "
                f"of the prompt's tokens, and a chat endpoint returns none; drop -B endpoint=chat (the completions "
                f"endpoint of vLLM and SGLang returns them)")
        raise BenchmarkError(
            f"lm-eval task {needing[0]!r}{more} is {output_types[needing[0]]}, which needs the log-probabilities of "
            f"the prompt's tokens, and {self.model} through {self.engine} returns none; evaluate it with "
            f"--model vllm:{name} or --model sglang:{name} (replicas the run starts on the workers' GPUs), or with "
            f"--model transformers:{name} and no --model-base-url (lm-eval's HFLM inside each worker)")


def route(model: str, base_url: str | None = None, endpoint: str = "completions") -> Route:
    """The :class:`Route` of a run's ``--model`` and ``--model-base-url`` with ``-B endpoint=``.

    Raises:
        BenchmarkError: no model, or an unknown ``endpoint``.
    """
    if not model:
        raise BenchmarkError("the lm-eval benchmark evaluates a model: pass --model (e.g. --model "
                             "transformers:smollm2-135m-instruct, vllm:Qwen/Qwen2.5-7B-Instruct)")
    if endpoint not in ENDPOINTS:
        raise BenchmarkError(f"-B endpoint={endpoint!r}: use one of {', '.join(ENDPOINTS)}")
    key = model_key(model)
    provider, _, name = key.partition(":")
    chat = endpoint == "chat"
    if provider == "transformers" and base_url is None and not chat:
        return Route(model, "hf", "" if key == EMBEDDED_MODEL else name, None,
                     "Hugging Face transformers in each worker (lm-eval's HFLM)", True, True)
    if provider == "transformers" and base_url is None:
        raise BenchmarkError(f"-B endpoint=chat reaches a server, and {model} has none: start one (transformers "
                             "serve) and pass --model-base-url, or drop -B endpoint=chat to run the model in each "
                             "worker (lm-eval's HFLM)")
    facts = ENGINE_FACTS.get(provider)
    engine = facts.title if facts is not None else f"the {provider} endpoint"
    source = "" if key == EMBEDDED_MODEL else name
    if chat:
        return Route(model, "chat", source, base_url, f"{engine} (chat completions)", False, False)
    # An endpoint the runner does not serve is taken at its word: lm-eval's requests are checked against their
    # replies (runner.models._asked) when it ignores echo or logprobs.
    return Route(model, "completions", source, base_url, engine, facts is None or facts.prompt_logprobs,
                 facts is None or facts.token_prompts)


def tokenizer_source(route_: Route, resolve_embedded: Callable[[], str], tokenizer: str | None = None) -> str | None:
    """Where the route's tokenizer loads from: ``tokenizer`` (``-B model_args=tokenizer=...``), its source, the
    embedded model's folder (``resolve_embedded()``), or ``None`` for a chat endpoint (prompts are messages)."""
    if route_.kind == "chat":
        return None
    return tokenizer or route_.source or resolve_embedded()


@functools.cache
def _tokenizer(source: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


def chat_template(route_: Route, resolve_embedded: Callable[[], str], tokenizer: str | None = None
                  ) -> Callable[..., Any]:
    """The ``chat_template`` callable lm-eval's ``Task.build_all_requests`` takes, rendering as the worker's model
    class will: ``HFLM.apply_chat_template`` and ``TemplateAPI.apply_chat_template`` (lm-eval's own methods, run with
    the model's tokenizer only, so the driver loads no weights).

    Raises:
        BenchmarkError: the tokenizer cannot be loaded (not in the local cache while offline, gated without
            ``HF_TOKEN``).
    """
    from lm_eval.models.api_models import TemplateAPI
    from lm_eval.models.huggingface import HFLM

    source = tokenizer_source(route_, resolve_embedded, tokenizer)
    try:
        loaded = _tokenizer(source) if source is not None else None
    except Exception as exc:  # noqa: BLE001 - any loading failure is one line naming the model
        raise BenchmarkError(f"apply_chat_template needs {route_.model}'s tokenizer ({source}), which cannot be "
                             f"loaded ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                             "set HF_TOKEN for a gated model, or point HF_HOME at a cache that holds it") from None
    if route_.kind == "hf":
        holder: Any = _Holder(tokenizer=loaded, chat_template_args={})
        return functools.partial(HFLM.apply_chat_template, holder)
    holder = _Holder(tokenizer=loaded, tokenizer_backend="huggingface" if loaded is not None else None,
                     tokenized_requests=route_.token_prompts)
    return functools.partial(TemplateAPI.apply_chat_template, holder)


class _Holder:
    """The attributes a model class's ``apply_chat_template`` reads, without the model."""

    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def output_types(tasks: Iterable[Any]) -> dict[str, str]:
    """Task name -> ``output_type`` of lm-eval ``Task`` objects."""
    return {task.task_name: task.OUTPUT_TYPE for task in tasks}
