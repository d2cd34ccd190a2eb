"""The ``lm-eval`` solution: each worker builds lm-evaluation-harness's own model class once and answers every
document it gets with it, the requests of the documents in flight gathered into the model's batches.

The model class is the engine (the runner writes no inference loop of its own; :mod:`runner.benchmarks.lmeval.routes`
says which class answers which ``--model``):

- ``hf`` (``HFLM``) in the worker, on the GPUs Ray gave it (``cuda``) or the CPU, for ``transformers:`` models;
- ``local-completions`` / ``local-chat-completions`` for HTTP models: the worker's own vLLM or SGLang replica, or the
  run's ``--model-base-url``. Their requests travel the runner's HTTP path (:func:`runner.models.post_json`: the
  replica the run serves, followed across restarts; the run's limiter; its retries), and ``until`` is applied to
  the answer here as ``HFLM`` applies it (``transformers serve`` with continuous batching ignores ``stop``).

Batching: one model call at a time runs for ``HFLM`` (on the one thread that loaded the model, so the worker's event
loop goes on) and takes every
request queued of one request type; the model class sorts and cuts them into ``batch_size`` batches itself. An HTTP
model takes up to ``batch_size`` requests per call and ``num_concurrent`` calls at once. A call that fails is tried
again document by document, so one bad document is that document's error record, not its neighbours'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import functools
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.benchmarks.lmeval.bars import no_bars
from runner.benchmarks.lmeval.routes import Route
from runner.core import loaded
from runner.core.errors import ConfigError
from runner.core.limits import spend
from runner.core.plugin import declare
from runner.core.scope import current_scope, repeat_seed
from runner.core.served import embedded_folder
from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.core.usage import record_usage

SETTLE_PASSES = 64
"""Event-loop turns the batcher waits, at most, for the documents in flight to queue their requests before a call
(it stops at the first two turns in which nothing new came)."""


Used = tuple[int | None, int | None, Literal["hit", "miss"] | None]
"""One request's usage: input tokens, output tokens (``None``: unknown) and how the response cache took it
(``"hit"``: it answered, no request was sent; ``"miss"``: cacheable, not held; ``None``: not asked)."""


@dataclass
class _Unit:
    """The requests of one request type of one document (of one repeat of the run), waiting for the model."""

    request_type: str
    instances: list[Any]
    future: asyncio.Future[list[list[Any]]]
    context: contextvars.Context
    repeat: int = 0
    usage: list[Used] = field(default_factory=list)


class DocumentBatcher:
    """Gathers the requests of the documents in flight on one worker into calls of an lm-eval model class.

    Args:
        call: ``call(request_type, instances) -> (responses, usage)``, blocking (run in a thread): the model class's
            method of that name on ``instances`` (each repeated ``repeats`` times, as lm-eval's evaluator clones
            them), and each instance's :data:`Used`. A call runs in the context of its first document (its item's
            scope: limiter, cache, repeat).
        max_calls: calls in flight at once (1 for an in-process model).
        max_requests: instances per call (``None``: every queued one of its type).
        by_repeat: a call takes the documents of one repeat of the run only (an HTTP model: one request carries one
            seed, its repeat's, :func:`runner.core.scope.repeat_seed`); ``False``: of any repeat.
    """

    def __init__(self, call: Callable[[str, list[Any]], tuple[list[Any], list[Used]]],
                 max_calls: int = 1, max_requests: int | None = None,
                 threads: concurrent.futures.ThreadPoolExecutor | None = None, by_repeat: bool = False) -> None:
        self.call = call
        self.max_calls = max_calls
        self.max_requests = max_requests
        self.by_repeat = by_repeat
        # The calls' own threads: with one, an in-process model always computes on the thread it was loaded on (torch's
        # OpenMP team is per calling thread: a model called from the default executor's changing threads ran 30 %
        # slower on 2 cores than from one thread).
        self.threads = threads or concurrent.futures.ThreadPoolExecutor(max_calls, thread_name_prefix="lm-eval-model")
        self._queue: deque[_Unit] = deque()
        self._running = 0
        self._wake: asyncio.Event | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._calls: set[asyncio.Task[None]] = set()

    async def submit(self, instances: list[Any]) -> tuple[list[list[Any]], list[Used]]:
        """The responses of one document's ``instances`` (a list of ``repeats`` responses per instance, in order)
        and each instance's usage (its ``repeats`` requests together).

        Raises:
            Exception: what the model class raised on this document's requests alone.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # First use, or another event loop (the sequential executor gives the items a loop of its own when a time
            # limit is set, and a fresh one after it abandons a blocked item's): a queue of this loop.
            self._loop, self._queue, self._running, self._dispatcher = loop, deque(), 0, None
            self._wake = asyncio.Event()
        by_type: dict[str, list[int]] = {}
        for position, instance in enumerate(instances):
            by_type.setdefault(instance.request_type, []).append(position)
        units = []
        for request_type, positions in by_type.items():
            unit = _Unit(request_type, [instances[p] for p in positions], loop.create_future(),
                         contextvars.copy_context(), current_scope().repeat)
            units.append((positions, unit))
            self._queue.append(unit)
        assert self._wake is not None
        self._wake.set()
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = loop.create_task(self._dispatch(), name="lm-eval batcher")
        resps: list[list[Any]] = [[] for _ in instances]
        usage: list[Used] = [(0, 0, None)] * len(instances)
        for positions, unit in units:
            answers = await unit.future
            for position, answer, used in zip(positions, answers, unit.usage):
                resps[position], usage[position] = answer, used
        return resps, usage

    async def _dispatch(self) -> None:
        """Start calls while requests wait; end once none waits and none runs (the next document starts it again), so
        no task is left pending when the loop closes."""
        assert self._wake is not None
        while True:
            self._wake.clear()
            await self._settle()
            while self._queue and self._running < self.max_calls:
                batch = self._take()
                self._running += 1
                call = asyncio.get_running_loop().create_task(self._run(batch))
                self._calls.add(call)  # the loop keeps only weak references to its tasks
                call.add_done_callback(self._calls.discard)
            if not self._queue and not self._running:
                return
            await self._wake.wait()

    async def _settle(self) -> None:
        """Let the documents in flight queue their requests: yield until two turns bring nothing new."""
        quiet, size = 0, len(self._queue)
        for _ in range(SETTLE_PASSES):
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._queue) == size else 0
            size = len(self._queue)
            if quiet >= 2:
                return

    def _take(self) -> list[_Unit]:
        """The oldest unit and every queued unit of its request type (and repeat, :attr:`by_repeat`), up to
        :attr:`max_requests` instances."""
        request_type, repeat = self._queue[0].request_type, self._queue[0].repeat
        batch, kept, count = [], deque(), 0
        while self._queue:
            unit = self._queue.popleft()
            fits = self.max_requests is None or not batch or count + len(unit.instances) <= self.max_requests
            same = unit.request_type == request_type and (not self.by_repeat or unit.repeat == repeat)
            if same and fits:
                batch.append(unit)
                count += len(unit.instances)
            else:
                kept.append(unit)
        self._queue = kept
        return batch

    async def _run(self, batch: list[_Unit]) -> None:
        try:
            try:
                await self._answer(batch)
            except Exception:  # noqa: BLE001 - retried per document below, each failure to its own document
                if len(batch) == 1:
                    raise
                for unit in batch:
                    try:
                        await self._answer([unit])
                    except Exception as exc:  # noqa: BLE001 - this document's error
                        if not unit.future.done():
                            unit.future.set_exception(exc)
        except Exception as exc:  # noqa: BLE001 - the document's error record
            for unit in batch:
                if not unit.future.done():
                    unit.future.set_exception(exc)
        finally:
            self._running -= 1
            if self._wake is not None:
                self._wake.set()

    async def _answer(self, batch: list[_Unit]) -> None:
        flat: list[Any] = []
        for unit in batch:
            for instance in unit.instances:
                flat.extend([instance] * max(1, instance.repeats or 1))
        loop = asyncio.get_running_loop()
        answers, usage = await loop.run_in_executor(
            self.threads, functools.partial(batch[0].context.run, self.call, batch[0].request_type, flat))
        if len(answers) != len(flat):
            raise RuntimeError(f"the model answered {len(answers)} of {len(flat)} requests")
        position = 0
        for unit in batch:
            resps, used = [], []
            for instance in unit.instances:
                count = max(1, instance.repeats or 1)
                resps.append(list(answers[position:position + count]))
                used.append(_together(usage[position:position + count]))
                position += count
            unit.usage = used
            if not unit.future.done():
                unit.future.set_result(resps)


def cut_at_stop(text: str, until: list[str]) -> str:
    """``text`` up to the first of the stop sequences ``until``, as ``HFLM.generate_until`` cuts its generations
    (``for term in until: s = s.split(term)[0]``): for servers that do not apply ``stop`` themselves."""
    for term in until:
        if term:
            text = text.split(term)[0]
    return text


_POSTED: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("lm_eval_posted", default=None)
"""The answers (:class:`runner.models.Posted`) of the HTTP requests of the model call running in this context: the
transport adds each, the call reads their usage."""


def _together(used: list[Used]) -> Used:
    """The usage of several requests (an instance's repeats): the sums (unknown when one is), ``"hit"`` when the
    cache answered them all, ``"miss"`` when one was a cacheable miss."""
    inputs, outputs, caches = [u[0] for u in used], [u[1] for u in used], [u[2] for u in used]
    cache: Literal["hit", "miss"] | None = (
        "hit" if caches and all(c == "hit" for c in caches) else "miss" if "miss" in caches else None)
    return (None if None in inputs else sum(i for i in inputs if i is not None),
            None if None in outputs else sum(o for o in outputs if o is not None), cache)


def apportion(total: int, weights: list[float]) -> list[int]:
    """``total`` split into whole parts in proportion to ``weights`` (all equal when they sum to 0), which sum to
    ``total`` exactly: the largest-remainder method (Hamilton's), each part the floor of its share and the units left
    to the largest remainders, the earliest first on a tie."""
    if not weights:
        return []
    weights = weights if sum(weights) > 0 else [1.0] * len(weights)
    whole = sum(weights)
    exact = [total * weight / whole for weight in weights]
    parts = [int(share) for share in exact]
    for index in sorted(range(len(exact)), key=lambda i: parts[i] - exact[i])[:total - sum(parts)]:
        parts[index] += 1
    return parts


class _Model:
    """One worker's lm-eval model class and how its requests are called and counted."""

    def __init__(self, lm: Any, route: Route, tokens: Callable[[str], int | None]) -> None:
        self.lm, self.route, self.tokens = lm, route, tokens

    def call(self, request_type: str, instances: list[Any]) -> tuple[list[Any], list[Used]]:
        """``lm.<request_type>(instances)`` without lm-eval's progress bars (:func:`runner.benchmarks.lmeval.bars.
        no_bars`), its generations cut at their stop sequences for an HTTP model, and each instance's usage
        (:meth:`_usage`)."""
        method = getattr(self.lm, "loglikelihood" if request_type == "multiple_choice" else request_type)
        posted: list[Any] = []
        token = _POSTED.set(posted)
        try:
            with no_bars():  # lm-eval's request loops would draw a progress bar per call, that is per document
                answers = list(method(instances))
        finally:
            _POSTED.reset(token)
        if request_type == "generate_until" and self.route.kind != "hf":
            from lm_eval.models.utils import handle_stop_sequences

            eos = getattr(self.lm, "eos_string", None)
            answers = [cut_at_stop(answer, handle_stop_sequences(copy.deepcopy(instance.args[1]).get("until"), eos))
                       if isinstance(answer, str) else answer for answer, instance in zip(answers, instances)]
        return answers, self._usage(request_type, instances, answers, posted)

    def _usage(self, request_type: str, instances: list[Any], answers: list[Any], posted: list[Any]) -> list[Used]:
        """Each instance's usage in one call: the server's counts of the call's requests (``posted``), shared out
        among the instances in proportion to their tokens by the model's tokenizer (characters where it has none:
        a chat endpoint), so that they sum to what the server counted (one request may carry the prompts of several
        documents, and lm-eval sorts the requests by length); a call answered by the response cache alone costs
        nothing. Where a request's answer reported no usage, the tokenizer's counts (unknown without one)."""
        counted = []
        for instance, answer in zip(instances, answers):
            strings = [part for part in instance.args if isinstance(part, str)]
            counts = [self.tokens(text) for text in strings]
            used_in = None if None in counts else sum(c for c in counts if c is not None)
            used_out = self.tokens(answer) if request_type == "generate_until" and isinstance(answer, str) else 0
            counted.append((used_in, used_out, sizes_of(strings, answer)))
        if not posted:  # HFLM, in the worker: no request, the tokenizer's counts
            return [(used_in, used_out, None) for used_in, used_out, _ in counted]
        sent = [p for p in posted if p.cache != "hit"]
        if not sent:
            return [(0, 0, "hit")] * len(instances)
        cache: Literal["miss"] | None = "miss" if any(p.cache == "miss" for p in sent) else None
        if any(p.usage.input_tokens is None or p.usage.output_tokens is None for p in sent):
            return [(used_in, used_out, cache) for used_in, used_out, _ in counted]
        weights_in = [float(used_in) if used_in is not None else float(size[0]) for used_in, _, size in counted]
        weights_out = [float(used_out) + 1.0 if used_out is not None else float(size[1]) + 1.0
                       for _, used_out, size in counted]
        inputs = apportion(sum(p.usage.input_tokens for p in sent), weights_in)
        outputs = apportion(sum(p.usage.output_tokens for p in sent), weights_out)
        return [(i, o, cache) for i, o in zip(inputs, outputs)]


def sizes_of(strings: list[str], answer: Any) -> tuple[int, int]:
    """Characters of a request's prompt strings and of its answer (0 for a log-likelihood), the weights of its share
    of a call's tokens where no tokenizer counts them."""
    return sum(len(text) for text in strings), len(answer) if isinstance(answer, str) else 0


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _build_hf(route: Route, benchmark: Any) -> _Model:
    from lm_eval.models.huggingface import HFLM

    pretrained = route.source or embedded_folder()
    options = {"device": _device(), **benchmark.model_args}
    if benchmark.max_length is not None:
        options.setdefault("max_length", benchmark.max_length)
    lm = HFLM(pretrained=pretrained, batch_size=benchmark.batch_size, **options)
    return _Model(lm, route, lambda text: len(lm.tok_encode(text)))


def _hf_batcher(route: Route, benchmark: Any) -> DocumentBatcher:
    """``HFLM`` loaded on the one thread that will compute with it, behind a :class:`DocumentBatcher`."""
    model_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lm-eval-model")
    built = model_thread.submit(_build_hf, route, benchmark).result()
    return DocumentBatcher(built.call, threads=model_thread)


def _hf_key(route: Route, benchmark: Any) -> str:
    """What an ``HFLM`` built for ``benchmark`` depends on: the model, its arguments, batch size and length."""
    options = json.dumps({"model_args": benchmark.model_args, "max_length": benchmark.max_length,
                          "batch_size": benchmark.batch_size}, sort_keys=True, default=str)
    return f"lm-eval-hf:{route.model}:{route.source}:{options}"


def _build_http(route: Route, benchmark: Any, loops: dict[str, asyncio.AbstractEventLoop]) -> _Model:
    """lm-eval's ``local-completions`` (or ``local-chat-completions``) over the runner's HTTP path; its requests run
    on the worker's event loop (``loops["worker"]``, set by the first document), from the model call's thread."""
    from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI

    from runner.models import ChatModel, post_json

    model = ChatModel.from_name(route.model, base_url=route.base_url)
    path = "chat/completions" if route.kind == "chat" else "completions"

    def transport(payload: dict[str, Any]) -> dict[str, Any]:
        call = post_json(model, path, payload)  # type: ignore[arg-type]
        posted = asyncio.run_coroutine_threadsafe(call, loops["worker"]).result()
        answers = _POSTED.get()
        if answers is not None:
            answers.append(posted)
        return posted.body

    base = LocalChatCompletion if route.kind == "chat" else LocalCompletionsAPI
    options: dict[str, Any] = {"max_retries": 1, "num_concurrent": 1, "batch_size": benchmark.batch_size}
    tokenizer = None
    if route.kind != "chat":
        tokenizer = benchmark.model_args.get("tokenizer") or route.source or embedded_folder()
        options.update(tokenizer=tokenizer, tokenizer_backend="huggingface", tokenized_requests=route.token_prompts,
                       max_length=benchmark.max_length or _context_length(model, tokenizer))
    options.update(benchmark.model_args)
    try:
        lm = _over_transport(base)(transport, "seed" in benchmark.model_args, model=route.model,
                                   base_url="runner://model-layer", **options)
    except OSError as exc:
        raise ConfigError(
            f"lm-eval's local-completions counts and sends {route.model}'s prompts as token ids, with its tokenizer "
            f"{tokenizer!r}, which cannot be loaded here ({str(exc).splitlines()[0][:160]}); pass -B "
            "model_args=tokenizer=FOLDER_OR_HUB_ID, or set HF_TOKEN (a gated model) and HF_HOME (a cache that holds "
            "it)") from None
    if route.kind == "chat":
        return _Model(lm, route, lambda text: None)
    return _Model(lm, route, lambda text: len(lm.tok_encode(text)))


def _over_transport(base: type) -> type:
    """``base`` (an lm-eval API model class) whose requests go through ``transport(payload) -> body`` instead of
    ``requests.post``: lm-eval builds each payload and reads each answer, the runner sends it, with the seed of the
    item's repeat (:func:`repeat_seed`)."""

    class OverTransport(base):  # type: ignore[misc, valid-type]
        def __init__(self, transport: Callable[[dict[str, Any]], dict[str, Any]], explicit_seed: bool,
                     **kwargs: Any) -> None:
            self._transport = transport
            self._explicit_seed = explicit_seed
            super().__init__(**kwargs)

        def model_call(self, messages: Any, *, generate: bool = True, gen_kwargs: dict | None = None,
                       **kwargs: Any) -> dict | None:
            payload = self._create_payload(self.create_message(messages), generate=generate,
                                           gen_kwargs=copy.deepcopy(gen_kwargs), seed=self._seed,
                                           eos=self.eos_string, **kwargs)
            keep = self._explicit_seed or "seed" in (gen_kwargs or {})
            return self._transport(reseeded(payload, current_scope().repeat, keep=keep))

    OverTransport.__name__ = OverTransport.__qualname__ = f"Runner{base.__name__}"
    return OverTransport


def reseeded(payload: dict[str, Any], repeat: int, *, keep: bool) -> dict[str, Any]:
    """``payload`` with the seed of repeat ``repeat`` (:func:`runner.core.scope.repeat_seed` of its seed) when it
    samples (a temperature above 0): lm-eval sends its model's one seed (1234) in every request, so a server that
    honours ``seed`` (vLLM) answered every repeat of a run alike. Unchanged when ``keep`` (a seed the user gave in
    ``-B model_args=seed=N``, or one the task's or the run's ``gen_kwargs`` set, which lm-eval sends as it is), at
    temperature 0, and for repeat 0."""
    temperature = payload.get("temperature")
    seed = payload.get("seed")
    if keep or repeat == 0 or not isinstance(seed, int) or not isinstance(temperature, (int, float)) \
            or temperature <= 0:
        return payload
    return {**payload, "seed": repeat_seed(seed, repeat)}


def _context_length(model: Any, tokenizer: str | None) -> int:
    """The model's context in tokens: what its server lists (vLLM's and SGLang's ``max_model_len``), else its
    config's ``max_position_embeddings``, else lm-eval's default 2048."""
    import httpx

    served = getattr(model, "served", None)
    url = served.base_url if served is not None else getattr(model, "base_url", None)
    if url:
        try:
            listed = httpx.get(f"{url.rstrip('/')}/models", timeout=10.0, trust_env=served is None).json()
            for entry in listed.get("data", []):
                if isinstance(entry.get("max_model_len"), int):
                    return int(entry["max_model_len"])
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
    if tokenizer:
        try:
            from transformers import AutoConfig

            length = getattr(AutoConfig.from_pretrained(tokenizer), "max_position_embeddings", None)
            if isinstance(length, int):
                return length
        except Exception:  # noqa: BLE001 - the default below stands
            pass
    return 2048


@declare("lm-eval", needs={"model", "model_base_url", "benchmark"}, in_process_providers=("transformers",))
@solution_factory
def lm_eval_model(model: str, benchmark: Any, model_base_url: str | None = None
                  ) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """Build the worker's model (once per worker) and answer documents of the ``lm-eval`` benchmark.

    Args:
        model: the run's ``--model`` (see :mod:`runner.benchmarks.lmeval.routes`).
        benchmark: the run's :class:`~runner.benchmarks.lmeval.LMEvalBenchmark` (its ``batch_size``,
            ``model_args``, ``max_length``, ``num_concurrent`` and route).
        model_base_url: the run's ``--model-base-url``.

    Returns:
        ``solve(task)``: output ``{"resps": [[response per repeat] per request]}`` (a log-likelihood request's
        response is ``(log-probability, is greedy)``, a rolling one's a log-probability, a generation's its text);
        usage: per request, what the server counted for it (a request that carried several documents' prompts is
        shared out among them in proportion to their tokens), else the tokens of its prompt strings and of its
        generation by the model's tokenizer (``HFLM``, or a server that reports no usage); each counts against the
        run's budget.

    Raises:
        ConfigError: the benchmark is not ``lm-eval``.
    """
    route = getattr(benchmark, "route", None)
    if not isinstance(route, Route):
        raise ConfigError("the lm-eval solution answers the lm-eval benchmark only (-b lm-eval)")
    from lm_eval.api.instance import Instance
    from lm_eval.utils import set_torch_seed

    torch_seed = benchmark.options.seeds[2]
    if torch_seed is not None:
        set_torch_seed(torch_seed)
    loops: dict[str, asyncio.AbstractEventLoop] = {}
    # Built once, now: the worker reports ready with its model loaded, and a model that cannot be built (weights,
    # tokenizer) stops the run before it writes anything, rather than failing every document.
    if route.kind == "hf":
        # One HFLM per worker for every benchmark of the model (a matrix's cells): their documents share its batches.
        batcher = loaded.shared(_hf_key(route, benchmark), functools.partial(_hf_batcher, route, benchmark))
    else:
        built = _build_http(route, benchmark, loops)
        batcher = DocumentBatcher(built.call, max_calls=benchmark.num_concurrent, max_requests=benchmark.batch_size,
                                  by_repeat=True)

    async def solve(task: Task) -> SolutionOutput:
        loops["worker"] = asyncio.get_running_loop()  # where this document's HTTP requests run
        document = task.input
        instances = [Instance(request_type=request["request_type"], doc=document["doc"],
                              arguments=request["arguments"], idx=request["idx"],
                              metadata=(document["task"], document["doc_id"], request["repeats"]))
                     for request in document["requests"]]
        resps, usage = await batcher.submit(instances)
        for input_tokens, output_tokens, cache in usage:
            if cache == "hit":
                record_usage(route.model, cache="hit")
                continue
            record_usage(route.model, input_tokens, output_tokens, cache=cache)
            spend(route.model, input_tokens, output_tokens)
        return SolutionOutput(success=True, output={"resps": resps},
                              meta={"model": route.model, "engine": route.engine, "model_class": route.kind})

    return solve


