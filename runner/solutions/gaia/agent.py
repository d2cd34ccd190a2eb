"""The GAIA baseline agent (``--solution gaia-agent``, the benchmark's default agent): native tool calling through
:mod:`runner.models`, with local tools (read the attached file, a calculator, Python in a subprocess) and, when the
user turns them on, live web tools (``-S tools=wikipedia,openmeteo``, :mod:`runner.solutions.web`).

The system prompt is GAIA's own (:data:`GAIA_SYSTEM_PROMPT`), followed by one paragraph on the tools. Loop
(:func:`runner.solutions.tool_loop.run_tool_loop`): the model is called with the tools; each call is run and its
result (or error) fed back; a reply without tool calls that holds ``FINAL ANSWER:`` ends the task (otherwise the model
is asked once more for it). After ``max_turns`` calls with tools, one last call without tools asks for the answer. The output is a submission line's fields:
``{"model_answer": <the text after the last "FINAL ANSWER:">, "reasoning_trace": <the last reply>}``; a model that
never gives the template's answer has ``model_answer`` ``None`` (the leaderboard scores it as the text "None").
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from runner.benchmarks.gaia.attachments import Attachment
from runner.core.errors import ConfigError
from runner.core.plugin import declare
from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.models import ChatModel, system_message, user_message
from runner.solutions.gaia.tools import DEFAULT_PYTHON_TIMEOUT_S, Workspace
from runner.solutions.tool_loop import run_tool_loop
from runner.solutions.tools import ToolError
from runner.solutions.web import LiveTools, check_timeout
from runner.solutions.web.http import DEFAULT_TIMEOUT_S
from runner.solutions.web.wikipedia import WIKIPEDIA_URL

GAIA_SYSTEM_PROMPT = (
    "You are a general AI assistant. I will ask you a question. Report your thoughts, and finish your answer with "
    "the following template: FINAL ANSWER: [YOUR FINAL ANSWER]. YOUR FINAL ANSWER should be a number OR as few "
    "words as possible OR a comma separated list of numbers and/or strings. If you are asked for a number, don't "
    "use comma to write your number neither use units such as $ or percent sign unless specified otherwise. If you "
    "are asked for a string, don't use articles, neither abbreviations (e.g. for cities), and write the digits in "
    "plain text unless specified otherwise. If you are asked for a comma separated list, apply the above rules "
    "depending of whether the element to be put in the list is a number or a string."
)
"""GAIA's system prompt, verbatim: the paper (Mialon et al., 2023, arXiv:2311.12983, Figure 2) and the leaderboard
space's ``content.py`` (``SUBMISSION_TEXT``, https://huggingface.co/spaces/gaia-benchmark/leaderboard)."""

TOOLS_PROMPT = (
    "You can call tools: read_file reads the attached file (or another file of your working directory) as text, "
    "calculator evaluates arithmetic, and python runs a program in your working directory.{live} Use them as the "
    "question needs. When you know the answer, reply without calling a tool and end your reply with the template."
)
LIVE_PROMPT = " {names} reach the internet."
RETRY_PROMPT = "Finish your answer with the template: FINAL ANSWER: [YOUR FINAL ANSWER]."
FINAL_PROMPT = "You have used all your tool calls. " + RETRY_PROMPT

DEFAULT_MAX_TURNS = 20
_FINAL = re.compile(r"FINAL ANSWER\s*:\s*(?:\*\*)?", re.IGNORECASE)


def parse_final_answer(text: str | None) -> str | None:
    """The answer after the last ``FINAL ANSWER:`` in ``text`` (any case; markdown bold around the marker
    tolerated): its first non-empty line, stripped; ``None`` when there is no marker or nothing after it."""
    if not text:
        return None
    matches = list(_FINAL.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():]
    for line in rest.splitlines():
        if line.strip():
            return line.strip().removesuffix("**").strip() or None
    return None


def system_prompt(live: LiveTools) -> str:
    """GAIA's system prompt and the paragraph on the tools (naming the live ones when on)."""
    extra = LIVE_PROMPT.format(names=", ".join(live.names)) if live else ""
    return GAIA_SYSTEM_PROMPT + "\n\n" + TOOLS_PROMPT.format(live=extra)


def user_prompt(task: Task) -> str:
    """The question, and where its attached file is."""
    attachment: Attachment | None = (task.metadata or {}).get("attachment")
    question = str(task.input)
    if attachment is None:
        return question
    return (f"{question}\n\nAttached file: {attachment.name} (in your working directory: read it with read_file, "
            f"or open it by that name in python).")


async def _call_tool(name: str, arguments: dict[str, Any], workspace: Workspace, live: LiveTools) -> Any:
    if name in workspace.names:
        return await workspace.run(name, arguments)
    if name in live.names:
        return await live.run(name, arguments)
    raise ToolError(f"there is no tool {name!r}; use one of {', '.join(workspace.names + live.names)}")


async def solve_task(model: ChatModel, task: Task, live: LiveTools, max_turns: int = DEFAULT_MAX_TURNS,
                     python_timeout: float = DEFAULT_PYTHON_TIMEOUT_S) -> SolutionOutput:
    """Run the agent on one task (see the module docstring).

    Returns:
        output: ``{"model_answer", "reasoning_trace"}``; trajectory: every tool call (arguments, result, error)
        and the assistant's texts; meta: ``turns`` (model calls), ``stopped`` (``answer`` or ``max_turns``) and the
        served ``model``.

    Raises:
        ModelError: the model failed for good (the task becomes an error record).
    """
    with Workspace((task.metadata or {}).get("attachment"), python_timeout) as workspace:

        async def run_tool(name: str, arguments: dict[str, Any]) -> Any:
            return await _call_tool(name, arguments, workspace, live)

        messages: list[Any] = [system_message(system_prompt(live)), user_message(user_prompt(task))]
        outcome = await run_tool_loop(model, messages, workspace.definitions + live.definitions, run_tool,
                                      parse_final_answer, max_turns=max_turns, retry_prompt=RETRY_PROMPT,
                                      final_prompt=FINAL_PROMPT)
    reply = outcome.reply
    return SolutionOutput(
        success=True,
        output={"model_answer": outcome.answer, "reasoning_trace": reply.text if reply else None},
        trajectory=outcome.trajectory,
        meta=outcome.meta,
    )


@declare("gaia-agent", needs={"model", "model_base_url"}, mock_policy="runner.solutions.gaia.mock:policy",
         mock_name="gaia")
@solution_factory
def gaia_agent(
    model: str,
    model_base_url: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    python_timeout: float = DEFAULT_PYTHON_TIMEOUT_S,
    tools: str | list[str] | None = None,
    tool_timeout: float = DEFAULT_TIMEOUT_S,
    wikipedia_url: str = WIKIPEDIA_URL,
    openmeteo_url: str | None = None,
) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """Build the agent (once per worker).

    Args:
        model: ``provider:model`` (see ``docs/models.md``); bare ``mock`` plays a scripted episode of this agent
            (the ``mock:gaia`` policy, :mod:`runner.solutions.gaia.mock`).
        model_base_url: the model server's API root (``--model-base-url``).
        max_turns: model calls with tools before the last call that must answer (``-S max_turns=...``).
        temperature: sampling temperature (default 0, for repeatable runs; ``None``: the server's).
        max_tokens: the most output tokens per call (``None``: the server's).
        python_timeout: seconds one ``python`` tool call may run.
        tools: live tools to add (``wikipedia``, ``openmeteo``; a list or comma-separated; default none: the agent
            never reaches the internet but for its model).
        tool_timeout: seconds per request of a live tool.
        wikipedia_url: the MediaWiki Action API the Wikipedia tools call.
        openmeteo_url: one root for Open-Meteo's geocoding and forecast APIs (default: the public hosts).

    Returns:
        ``solve(task)`` -> :func:`solve_task`.

    Raises:
        ConfigError: an unknown provider, a missing API key, or a bad argument (:func:`check_arguments`).
    """
    check_arguments(max_turns=max_turns, python_timeout=python_timeout, tools=tools, tool_timeout=tool_timeout)
    chat_model = ChatModel.from_name(model, base_url=model_base_url, temperature=temperature, max_tokens=max_tokens,
                                     mock_policy="gaia")
    live = LiveTools(tools, tool_timeout, wikipedia_url, openmeteo_url)

    async def solve(task: Task) -> SolutionOutput:
        return await solve_task(chat_model, task, live, max_turns, python_timeout)

    return solve


def check_arguments(max_turns: int = DEFAULT_MAX_TURNS, python_timeout: float = DEFAULT_PYTHON_TIMEOUT_S,
                    tools: Any = None, tool_timeout: float = DEFAULT_TIMEOUT_S, **_: Any) -> None:
    """Refuse bad ``-S`` values before anything is written (called by ``SolutionSpec.check``).

    Raises:
        ConfigError: ``max_turns`` below 1, a ``python_timeout`` or ``tool_timeout`` that is not a positive number,
            or an unknown live tool.
    """
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ConfigError(f"gaia-agent: max_turns must be an integer of at least 1, got {max_turns!r}")
    if isinstance(python_timeout, bool) or not isinstance(python_timeout, (int, float)) or not python_timeout > 0:
        raise ConfigError(f"gaia-agent: python_timeout must be a positive number of seconds, got {python_timeout!r}")
    check_timeout(tool_timeout)
    LiveTools(tools, tool_timeout)


gaia_agent.check_arguments = check_arguments  # type: ignore[attr-defined]
