"""The CLI's model wiring: the ``AGENT_CHAT_MODEL_NAME`` fallback for ``--model``, the preflight check of the
run's models (``--model`` and ``--user-model``), and the provider listing of ``python -m runner list``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunConfig
from runner.engine.plugins import available_solutions, resolve
from runner.engine.solution import SolutionSpec
from runner.models import PROVIDERS, ChatModel

MODEL_ENV = "AGENT_CHAT_MODEL_NAME"
"""The environment variable naming the agent's model when ``--model`` is not given (as on BeeAI's evaluation page)."""


def with_model_default(config: RunConfig, benchmark: BenchmarkBase) -> RunConfig:
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


def preflight(model: str | None, base_url: str | None = None) -> None:
    """Check before a run starts that ``model`` can be used: a known provider, its API key set, its server up.

    Raises:
        ConfigError: an unknown provider, a missing API key, an unreadable mock script.
        ModelError: the server refuses connections, rejects the key, or does not serve the model.
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
                     user_model_base_url: str | None = None) -> None:
    """:func:`preflight` for every model of a run: the agent's and, when it is another model or another server, the
    simulated user's (a ``user_model`` equal to ``model`` without its own URL is the agent's model itself).

    Raises:
        ConfigError, ModelError: as :func:`preflight`, for the first model that fails.
    """
    preflight(model, base_url)
    if user_model is not None and not (user_model == model and user_model_base_url in (None, base_url)):
        preflight(user_model, user_model_base_url)


def provider_lines() -> Iterator[str]:
    """Lines for ``list``: each provider's name and description, then its default URL and the variables it reads."""
    for name, provider in sorted(PROVIDERS.items()):
        yield f"  {name:<16} {provider.description}"
        variables = [v for v in (provider.api_key_env, provider.base_url_env) if v]
        details = [provider.default_base_url or "", f"env: {', '.join(variables)}" if variables else ""]
        if any(details):
            yield f"  {'':<16} " + "  ".join(d for d in details if d)
