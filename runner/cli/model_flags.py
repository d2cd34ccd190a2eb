"""The CLI's model wiring: the ``AGENT_CHAT_MODEL_NAME`` fallback for ``--model``, the judge model's fallbacks, the
preflight check of the run's models (``--model``, ``--user-model``, ``--judge-model``), and the provider listing
of ``python -m runner list``."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Iterator
from typing import Any

from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunConfig
from runner.core.errors import ConfigError
from runner.engine.plugins import available_solutions, resolve
from runner.engine.solution import SolutionSpec
from runner.models import PROVIDERS, ChatModel

MODEL_ENV = "AGENT_CHAT_MODEL_NAME"
"""The environment variable naming the agent's model when ``--model`` is not given (as on BeeAI's evaluation page)."""

JUDGE_ENV = "EVAL_CHAT_MODEL_NAME"
"""The environment variable naming the judge model when ``--judge-model`` is not given (as on BeeAI's evaluation
page)."""

JUDGE_ARGS = ("judge_model", "judge_base_url")


def with_model_default(config: RunConfig, benchmark: BenchmarkBase | type[BenchmarkBase]) -> RunConfig:
    """``config`` with ``model`` taken from ``$AGENT_CHAT_MODEL_NAME`` when it has none and a model is wanted.

    A model is wanted when no solution is named and the benchmark has a default agent, or when the named solution
    takes a ``model`` argument; a run of a solution without one (e.g. ``reference``) ignores the variable, so its
    configuration (and fingerprint) does not change with the environment.

    Raises:
        PluginError: the named solution cannot be resolved.
    """
    name = os.environ.get(MODEL_ENV, "").strip()
    if config.model is not None or not name:
        return config
    if config.solution is None:
        wanted = getattr(benchmark, "default_solution", None) is not None
    else:
        target, _ = resolve(config.solution, available_solutions(), "solution")
        wanted = SolutionSpec(target=target).accepts("model")
    return config.model_copy(update={"model": name}) if wanted else config


def takes_judge(benchmark: Any) -> bool:
    """Whether a benchmark (its class, factory or an instance) takes ``judge_model`` (it has LLM-judged metrics)."""
    target = benchmark if callable(benchmark) and not isinstance(benchmark, BenchmarkBase) else type(benchmark)
    try:
        return "judge_model" in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False


def with_judge_default(config: RunConfig, benchmark: Any) -> RunConfig:
    """``config`` with its effective judge: ``--judge-model``, else ``$EVAL_CHAT_MODEL_NAME``, else the agent's
    ``--model`` (BeeAI's order); ``judge_base_url`` defaults to ``model_base_url`` when the judge is the agent's
    model. A benchmark without judged metrics keeps no judge; ``-B judge_model=...`` wins over all of these.

    Raises:
        ConfigError: ``--judge-model`` or ``--judge-base-url`` for a benchmark that has no judged metrics.
    """
    if not takes_judge(benchmark):
        if config.judge_model or config.judge_base_url:
            raise ConfigError(f"benchmark {config.benchmark!r} has no LLM-judged metrics; drop --judge-model and "
                              "--judge-base-url")
        return config
    if config.benchmark_args.get("judge_model"):
        return config.model_copy(update={"judge_model": config.benchmark_args["judge_model"],
                                         "judge_base_url": config.benchmark_args.get("judge_base_url")})
    judge = config.judge_model or os.environ.get(JUDGE_ENV, "").strip() or config.model
    base_url = config.judge_base_url
    if base_url is None and judge == config.model:
        base_url = config.model_base_url
    return config.model_copy(update={"judge_model": judge or None, "judge_base_url": base_url})


def judge_args(config: RunConfig) -> dict[str, str]:
    """The benchmark constructor arguments that carry the judge (none without a judge)."""
    return {name: getattr(config, name) for name in JUDGE_ARGS if getattr(config, name)}


def preflight(model: str | None, base_url: str | None = None) -> None:
    """Check before a run starts that ``model`` can be used: a known provider, its API key set, its server up.

    Raises:
        ConfigError: an unknown provider, a missing API key, an unreadable mock script.
        ModelError: the server refuses connections, rejects the key, or does not serve the model.
        ModelProtocolError: the URL answers something else than the OpenAI API (a web page, text, nothing).
    """
    if not model:
        return
    chat = ChatModel.from_name(model, base_url=base_url)

    async def check() -> None:
        try:
            await chat.check()
        finally:
            await chat.aclose()

    asyncio.run(check())


def preflight_models(model: str | None, base_url: str | None = None, user_model: str | None = None,
                     user_model_base_url: str | None = None, judge_model: str | None = None,
                     judge_base_url: str | None = None) -> None:
    """:func:`preflight` for every model of a run: the agent's and, when they are other models or other servers,
    the simulated user's (a ``user_model`` equal to ``model`` without its own URL is the agent's model itself) and
    the judge's (whose URL is already settled by :func:`with_judge_default`).

    Raises:
        ConfigError, ModelError: as :func:`preflight`, for the first model that fails.
    """
    preflight(model, base_url)
    checked = {(model, base_url)}
    if user_model is not None and not (user_model == model and user_model_base_url in (None, base_url)):
        preflight(user_model, user_model_base_url)
        checked.add((user_model, user_model_base_url))
    if judge_model is not None and (judge_model, judge_base_url) not in checked:
        preflight(judge_model, judge_base_url)


def provider_lines() -> Iterator[str]:
    """Lines for ``list``: each provider's name and description, then its default URL and the variables it reads."""
    for name, provider in sorted(PROVIDERS.items()):
        yield f"  {name:<16} {provider.description}"
        variables = [v for v in (provider.api_key_env, provider.base_url_env) if v]
        details = [provider.default_base_url or "", f"env: {', '.join(variables)}" if variables else ""]
        if any(details):
            yield f"  {'':<16} " + "  ".join(d for d in details if d)
