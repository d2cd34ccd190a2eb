"""The options of a chat model, defined once: what ``ChatModel.from_name`` / :func:`~runner.models.model_from_name`
take, and what each provider's implementation receives (:meth:`~runner.models._openai.OpenAICompatibleModel.for_provider`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from runner.core.errors import ConfigError
from runner.models._retry import RetryPolicy


@dataclass(frozen=True)
class ModelOptions:
    """How to reach and call one model.

    Args:
        base_url: the server's API root (e.g. ``http://10.0.0.5:8000/v1``); default: the model the run serves itself
            in this process (:mod:`runner.core.served`), else the provider's environment variable, else its
            default (see ``docs/models.md``).
        api_key: the key; default: the provider's environment variable.
        timeout: seconds one HTTP request may take in all, however its bytes arrive (default 300); a request past
            it is retried like a connection failure.
        retry: the :class:`RetryPolicy` (default: 5 attempts, exponential backoff from 1 s).
        temperature, max_tokens, seed: defaults for every call that does not set them (``None``: the server's).
        mock_policy: for the bare name ``mock`` only: the reply policy to use instead of the default one (a
            registered policy name, a script path, a callable or a ``MockScript``), so that a benchmark's agent can
            make ``--model mock`` run its own scripted episode.
    """

    base_url: str | None = None
    api_key: str | None = None
    timeout: float | None = None
    retry: RetryPolicy | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    mock_policy: Any = None

    @classmethod
    def of(cls, options: dict[str, Any]) -> ModelOptions:
        """The options named in ``options`` (keyword arguments of ``from_name``).

        Raises:
            ConfigError: a name that is not an option (the message lists them).
        """
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"unknown model option {unknown[0]!r}; a model takes: {', '.join(sorted(known))}")
        return cls(**options)

    @property
    def call_defaults(self) -> dict[str, Any]:
        """``temperature``, ``max_tokens`` and ``seed``: the defaults of every call."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}
