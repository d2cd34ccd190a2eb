"""Checks of a run's models before anything is written: the pre-flight that reaches each model's server
(:func:`preflight_models`), and the part of it that needs no server (:func:`check_model_names`, for ``submit``,
whose cluster's servers are often reachable only from inside the cluster)."""

from __future__ import annotations

import asyncio

from runner.models._base import ChatModel
from runner.models._providers import parse_model_name


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


def preflight_models(model: str | None = None, model_base_url: str | None = None, user_model: str | None = None,
                     user_model_base_url: str | None = None, judge_model: str | None = None,
                     judge_base_url: str | None = None) -> None:
    """:func:`preflight` for every model of a run: the agent's and, when they are other models or other servers,
    the simulated user's (a ``user_model`` equal to ``model`` without its own URL is the agent's model itself) and
    the judge's (whose URL is already settled by :func:`~runner.engine.request.model_defaults`).

    Raises:
        ConfigError, ModelError: as :func:`preflight`, for the first model that fails.
    """
    preflight(model, model_base_url)
    checked = {(model, model_base_url)}
    if user_model is not None and not (user_model == model and user_model_base_url in (None, model_base_url)):
        preflight(user_model, user_model_base_url)
        checked.add((user_model, user_model_base_url))
    if judge_model is not None and (judge_model, judge_base_url) not in checked:
        preflight(judge_model, judge_base_url)


def check_model_names(model: str | None = None, model_base_url: str | None = None, user_model: str | None = None,
                      user_model_base_url: str | None = None, judge_model: str | None = None,
                      judge_base_url: str | None = None) -> None:
    """What :func:`preflight_models` checks without reaching a server: each model's provider is known and the name
    names a model, and a provider that needs an API key finds it in this environment.

    Takes the same arguments as :func:`preflight_models` (the URLs are not used).

    Raises:
        ConfigError: an unknown provider, a name without a model, or a required API key not set (naming the
            variable).
    """
    for name in (model, user_model, judge_model):
        if name:
            provider, _ = parse_model_name(name)
            provider.api_key()
