"""The ``acebench`` solution: a model answers ACEBench tasks in the format the authors' checker reads."""

from __future__ import annotations

from typing import Any, Literal

from runner.benchmarks.acebench.files import AGENT_CATEGORIES
from runner.core.errors import ConfigError
from runner.core.plugin import declare
from runner.core.solution import SolutionOutput
from runner.core.task import Task
from runner.models import ChatModel
from runner.solutions.acebench.episodes import run_agent_task, strip_reasoning
from runner.solutions.acebench.prompts import single_reply_messages

MOCK_POLICY = "acebench"
"""The mock policy that bare ``--model mock`` plays with this agent (:mod:`runner.solutions.acebench.mock`)."""
DEFAULT_MAX_TURNS = 40
"""The authors' ``max_dialog_turns`` (``model_inference/apimodel_inference.py``)."""


@declare("acebench", needs={"model", "model_base_url", "user_model", "user_model_base_url"},
         mock_policy="runner.solutions.acebench.mock:policy")
class ACEBenchAgent:
    """The model-driven ACEBench solution (``--solution acebench``, or ``--model X`` alone).

    Built once per worker (the engine calls the class with the run's arguments); an instance is stateless across
    tasks, so concurrent tasks can share it, and it pickles (its models travel without their HTTP clients).

    - normal and special tasks: one call; the reply text, with any ``<think>`` block removed, is the output
      (``[ApiName(key='value')]`` or one of the special sentences), scored by the official or strict checker;
    - ``agent_multi_step``: the agent calls functions against the task's environment until it says
      ``finish conversation`` or the turn limit;
    - ``agent_multi_turn``: the same, with a simulated user (``user_model``) who opens the conversation and answers
      the agent until one of them says ``finish conversation``.

    Args:
        model: the agent's model, ``provider:model`` (``--model``); bare ``mock`` plays ``mock:acebench``.
        model_base_url: its server's API root (``--model-base-url``).
        user_model: the simulated user's model (``--user-model``); default: the agent's model.
        user_model_base_url: the user model's API root (``--user-model-base-url``); default: the provider's
            (environment variable, else its default). A ``user_model`` equal to ``model`` without its own URL is
            the agent's model itself, on the agent's server.
        tool_calling: ``text`` (the authors' protocol: calls written as ``[ApiName(...)]`` in the reply) or
            ``native`` (function calling: the functions offered as tools) for agent tasks.
        max_turns: the most messages of an agent episode after the opening request: agent replies, execution
            results and user replies together (default 40, as the authors).
        temperature, max_tokens: sampling settings of both models (``None``: the server's defaults; the authors
            sample at 0.001 with 1000 tokens).

    Raises:
        ConfigError: an unknown ``tool_calling``, ``max_turns`` below 1, or a model that cannot be built (unknown
            provider, missing API key).
    """

    def __init__(
        self,
        model: str,
        model_base_url: str | None = None,
        user_model: str | None = None,
        user_model_base_url: str | None = None,
        tool_calling: Literal["text", "native"] = "text",
        max_turns: int = DEFAULT_MAX_TURNS,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.check_arguments(tool_calling=tool_calling, max_turns=max_turns)
        self.native = tool_calling == "native"
        self.max_turns = max_turns
        settings = {"temperature": temperature, "max_tokens": max_tokens, "mock_policy": MOCK_POLICY}
        self.model = ChatModel.from_name(model, base_url=model_base_url, **settings)
        same_server = user_model_base_url is None or user_model_base_url == model_base_url
        if user_model is None or (user_model == model and same_server):
            self.user_model = self.model
        else:
            self.user_model = ChatModel.from_name(user_model, base_url=user_model_base_url, **settings)

    @staticmethod
    def check_arguments(tool_calling: str = "text", max_turns: int = DEFAULT_MAX_TURNS, **_: Any) -> None:
        """Reject a bad ``tool_calling`` or ``max_turns`` (the CLI calls this before anything is written).

        Raises:
            ConfigError: naming the argument and the values it takes.
        """
        if tool_calling not in ("text", "native"):
            raise ConfigError(f"acebench: tool_calling={tool_calling!r}; use -S tool_calling=text or native")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"acebench: max_turns={max_turns!r}; use -S max_turns=N with a whole N of at least 1")

    async def __call__(self, task: Task) -> SolutionOutput:
        """Answer one ACEBench task.

        Raises:
            ModelError: a model call failed for good (the engine records the task as an error).
            ValueError: an agent task without its environment.
        """
        if task.input.get("category") in AGENT_CATEGORIES:
            return await run_agent_task(task, self.model, self.user_model, self.native, self.max_turns)
        messages = single_reply_messages(task.input)
        reply = await self.model.chat(messages)
        return SolutionOutput(
            success=True,
            output=strip_reasoning(reply.text),
            trajectory=[*messages, reply.to_message(reasoning=True)],
            meta={"model": self.model.name, "served_model": reply.model, "finish_reason": reply.finish_reason},
        )
