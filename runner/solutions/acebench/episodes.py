"""ACEBench agent episodes: ``agent_multi_step`` (the agent alone) and ``agent_multi_turn`` (the agent and a
simulated user), driven against the task's :class:`~runner.benchmarks.acebench.ACEEnvironment`.

The loop follows the authors' ``multi_step_inference`` and ``multi_turn_inference``
(``model_inference/apimodel_inference.py``, fork zeppombal/ACEBench at c9391d0): the agent's reply goes to the
executor when it holds calls and to the user otherwise; the simulated user opens the conversation and answers the
agent's messages; ``finish conversation`` from either ends the episode; at most ``max_turns`` messages (agent
replies, execution results and user replies; 40 there) follow the opening request. Choices of ours, documented in
``docs/acebench.md``: calls are executed before a ``finish conversation`` in the same reply stops the episode;
in multi-step a reply without a call gets one reminder, and a second one in a row ends the episode.

Two ways to call the functions:

- text (the official protocol): the agent writes ``[ApiName(key='value')]``; the first bracketed call list of the
  reply is run with :meth:`~runner.benchmarks.acebench.environment.ACEEnvironment.execute` (which records it for process accuracy) and the results come
  back as a user message;
- native: the functions are offered as tools (function calling); each tool call runs through
  :meth:`~runner.benchmarks.acebench.environment.ACEEnvironment.call` and its result comes back as a tool message.
"""

from __future__ import annotations

import re
from typing import Any

from runner.solutions.acebench.prompts import agent_system_prompt, execution_message, texts_for, user_simulator_prompt
from runner.solutions.acebench.texts import FINISH
from runner.benchmarks.acebench.calls import CallSyntaxError, first_outermost_brackets, format_calls
from runner.benchmarks.acebench.environment import parse_executable
from runner.core.solution import SolutionOutput
from runner.core.task import Task
from runner.core.trajectory import tool_call_step
from runner.models import ChatModel, ChatReply, assistant_message, system_message, tool_message, user_message

FINISHED = "finished"
"""Stop reason: the agent said ``finish conversation``."""
USER_FINISHED = "user_finished"
"""Stop reason: the simulated user said ``finish conversation``."""
NO_CALL = "no_call"
"""Stop reason (multi-step): two replies in a row called nothing."""
TURN_LIMIT = "turn_limit"
"""Stop reason: ``max_turns`` messages were reached."""

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_ROLE_PREFIX = re.compile(r"^\s*(?:user|用户)\s*[:：]\s*", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """``text`` without the ``<think>...</think>`` blocks of reasoning models (also when the server dropped the
    opening tag: everything up to the last ``</think>`` goes)."""
    text = _THINK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


def says_finish(text: str) -> bool:
    """Whether ``text`` ends the episode (``finish conversation``, any case)."""
    return FINISH in text.lower()


def find_calls(text: str) -> str | None:
    """The first bracketed call list of a reply (``[f(a=1), g(b='x')]``) as the agent wrote it, or ``None`` when
    the reply holds no readable call (a message to the user, brackets around plain text)."""
    candidate = first_outermost_brackets(text)
    if candidate is None:
        return None
    try:
        parse_executable(candidate)
    except CallSyntaxError:
        return None
    return candidate


def _add_usage(usage: dict[str, dict[str, int]], role: str, reply: ChatReply) -> None:
    entry = usage.setdefault(role, {"input_tokens": 0, "output_tokens": 0, "calls": 0})
    entry["input_tokens"] += reply.usage.input_tokens or 0
    entry["output_tokens"] += reply.usage.output_tokens or 0
    entry["calls"] += 1


class UserSimulator:
    """The simulated user of a multi-turn task: its own conversation, where the agent's messages are ``user``
    turns and its own replies ``assistant`` turns, opened by the agent's greeting (as the authors' ``APIUSER``)."""

    def __init__(self, model: ChatModel, task_input: dict[str, Any], usage: dict[str, dict[str, int]]) -> None:
        self.model = model
        self.usage = usage
        self.messages = [system_message(user_simulator_prompt(task_input)),
                         user_message(texts_for(task_input.get("language", "en")).greeting)]

    async def reply(self) -> str:
        """The user's next line (reasoning and a leading ``user:`` label removed).

        Raises:
            ModelError: the user model failed for good.
        """
        reply = await self.model.chat(self.messages)
        _add_usage(self.usage, "user", reply)
        text = _ROLE_PREFIX.sub("", strip_reasoning(reply.text), count=1)
        self.messages.append(assistant_message(text))
        return text

    def hear(self, text: str) -> None:
        """Pass the agent's message to the user."""
        self.messages.append(user_message(text))


class Episode:
    """One agent task's run: the agent's conversation, the environment, the trajectory and the turn count.

    Args:
        task: an ``agent_multi_step`` or ``agent_multi_turn`` task (its environment in ``metadata``).
        model: the agent's model.
        user_model: the simulated user's model (multi-turn).
        native: call functions as tools rather than as text.
        max_turns: the most messages after the opening request (agent replies, execution results, user replies).

    Raises:
        ValueError: the task has no environment.
    """

    def __init__(self, task: Task, model: ChatModel, user_model: ChatModel, native: bool, max_turns: int) -> None:
        self.task_input: dict[str, Any] = task.input
        self.environment = (task.metadata or {}).get("environment")
        if self.environment is None:
            raise ValueError(f"agent task {task.id!r} has no environment in metadata['environment']")
        self.model, self.user_model = model, user_model
        self.native, self.max_turns = native, max_turns
        self.texts = texts_for(self.task_input.get("language", "en"))
        self.tools = [schema for _, schema in self.environment.tools()] if native else None
        self.messages: list[dict[str, Any]] = [system_message(agent_system_prompt(self.task_input, native))]
        self.trajectory: list[Any] = list(self.messages)
        self.usage: dict[str, dict[str, int]] = {}
        self.turns = 0
        self.last_reply = ""

    def _say(self, text: str) -> None:
        message = user_message(text)
        self.messages.append(message)
        self.trajectory.append(message)

    async def _agent(self) -> ChatReply:
        reply = await self.model.chat(self.messages, tools=self.tools)
        _add_usage(self.usage, "agent", reply)
        self.turns += 1
        self.messages.append(reply.to_message())
        self.trajectory.append(reply.to_message(reasoning=True))
        self.last_reply = strip_reasoning(reply.text)
        return reply

    def _execute(self, reply: ChatReply) -> bool:
        """Run the calls of ``reply``, record them and give back the results; ``False`` when it holds none."""
        if self.native:
            if not reply.tool_calls:
                return False
            for call in reply.tool_calls:
                error = call.parse_error
                if error is None:
                    result = self.environment.call(call.name, **call.arguments)
                else:
                    result = {"status": False, "message": error}
                self.messages.append(tool_message(call.id, result, name=call.name))
                self.trajectory.append(tool_call_step(call.name, call.arguments, result, error))
        else:
            text = find_calls(self.last_reply)
            if text is None:
                return False
            calls = parse_executable(text)
            results = self.environment.execute(text)
            for (name, arguments), result in zip(calls, results, strict=True):
                self.trajectory.append(tool_call_step(name, arguments, result))
            lines = [(format_calls([call]), result) for call, result in zip(calls, results, strict=True)]
            message = user_message(execution_message(self.texts, lines))
            self.messages.append(message)
        self.turns += 1
        return True

    async def run_multi_step(self) -> str:
        """The agent alone on the task's request; returns the stop reason."""
        self._say(str(self.task_input.get("question", "")))
        idle = 0
        while self.turns < self.max_turns:
            reply = await self._agent()
            executed = self._execute(reply)
            if says_finish(self.last_reply):
                return FINISHED
            if executed:
                idle = 0
                continue
            idle += 1
            if idle == 2:
                return NO_CALL
            if self.turns < self.max_turns:
                self._say(self.texts.no_call_reminder)
                self.turns += 1
        return TURN_LIMIT

    async def run_multi_turn(self) -> str:
        """The agent and the simulated user; returns the stop reason."""
        user = UserSimulator(self.user_model, self.task_input, self.usage)
        opening = await user.reply()
        self._say(opening)
        if says_finish(opening):
            return USER_FINISHED
        while self.turns < self.max_turns:
            reply = await self._agent()
            executed = self._execute(reply)
            if says_finish(self.last_reply):
                return FINISHED
            if executed or self.turns >= self.max_turns:
                continue
            user.hear(self.last_reply)
            answer = await user.reply()
            self.turns += 1
            self._say(answer)
            if says_finish(answer):
                return USER_FINISHED
        return TURN_LIMIT

    def output(self, stopped: str) -> SolutionOutput:
        """The episode as a :class:`SolutionOutput`: the last agent reply, the end state and the recorded calls."""
        multi_turn = "multi_turn" in str(self.task_input.get("category", ""))
        meta: dict[str, Any] = {"model": self.model.name, "tool_calling": "native" if self.native else "text",
                                "stopped": stopped, "turns": self.turns, "usage": self.usage}
        if multi_turn:
            meta["user_model"] = self.user_model.name
        return SolutionOutput(
            success=True,
            output={"reply": self.last_reply, "state": self.environment.state(), "calls": list(self.environment.calls)},
            trajectory=self.trajectory,
            meta=meta,
        )


async def run_agent_task(task: Task, model: ChatModel, user_model: ChatModel, native: bool,
                         max_turns: int) -> SolutionOutput:
    """Run one agent task to its end and return its output (the metrics then read the environment).

    Raises:
        ModelError: a model call failed for good (the engine makes it the task's error record).
        ValueError: the task has no environment.
    """
    episode = Episode(task, model, user_model, native, max_turns)
    if "multi_turn" in str(task.input.get("category", "")):
        stopped = await episode.run_multi_turn()
    else:
        stopped = await episode.run_multi_step()
    return episode.output(stopped)
