"""The built-in HotpotQA agent (``--solution hotpotqa-agent``, the benchmark's default agent): native tool calling
through :mod:`runner.models`, with a ``context_lookup`` tool standing in for Wikipedia and a calculator.

It is BeeAI's evaluation agent (beeai-framework ``python/examples/evaluation/agent.py``: a multi-hop QA role,
"answer in JSON with answer, tool_used, supporting_titles, supporting_sentences, reasoning_explanation") on an
offline document collection: ``context_lookup`` reads the task's own paragraphs (``task.metadata["context"]``),
so a run needs no network but the model's. BeeAI's agent reads live Wikipedia and OpenMeteo instead; ``-S
tools=wikipedia,openmeteo`` adds those (:mod:`runner.solutions.web`: live, so not reproducible unless every answer
comes from the run's ``--cache``).

Loop (:func:`runner.solutions.tool_loop.run_tool_loop`): the model is called with both tools; each tool call is
run and its result (or its error, including arguments that are not valid JSON) is fed back; a reply without tool
calls is the answer when it holds a JSON object with ``answer`` (else the model is asked once more for that JSON).
After ``max_turns`` calls with tools, one last call without tools asks for the answer (its whole text when it holds
no such JSON). Every tool call lands in the trajectory with its arguments and
result (:mod:`runner.core.trajectory`), where ``tool_usage`` counts them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from runner.core.errors import ConfigError
from runner.core.plugin import declare
from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.core.trajectory import tool_calls
from runner.models import ChatModel, parse_json, system_message, user_message
from runner.solutions.tool_loop import run_tool_loop
from runner.solutions.tools import CALCULATOR_TOOL, CONTEXT_LOOKUP_TOOL, ContextLookup, ToolError, calculator
from runner.solutions.web import LiveTools, check_timeout
from runner.solutions.web.http import DEFAULT_TIMEOUT_S
from runner.solutions.web.wikipedia import WIKIPEDIA_URL

ANSWER_FORMAT = (
    '{"answer": "<concise, specific answer only (e.g., \'Delhi\')>", '
    '"supporting_titles": ["<title 1>", "<title 2>"], '
    '"supporting_sentences": ["<sentence 1, copied exactly>", "<sentence 2, copied exactly>"], '
    '"supporting_facts": [["<title 1>", <sentence id>], ["<title 2>", <sentence id>]], '
    '"reasoning_explanation": [{"step": 1, "logic": "The reasoning step"}]}'
)

SYSTEM_PROMPT = (
    "You are an expert Multi-hop Question Answering (QA) agent. Your primary role is to extract and combine "
    "information from the provided context to answer the user's question.\n"
    "RULES and CONSTRAINTS:\n"
    "1. SOURCE ADHERENCE (NO HALLUCINATION): Your final answer MUST be based ONLY on the articles you read with "
    "the context_lookup tool. Do not use external knowledge.\n"
    "2. MULTI-HOP: Read every article the question needs, one context_lookup call per article; use the "
    "calculator for arithmetic.\n"
    "3. FINAL FORMAT: When you have the answer, reply with a single, valid JSON object and nothing else, with the "
    "keys answer, supporting_titles, supporting_sentences, supporting_facts and reasoning_explanation. The answer "
    "must be concise and specific (e.g. just 'Delhi', not a full sentence; 'yes' or 'no' for a yes/no "
    "question). supporting_sentences are the sentences that justify the answer, copied exactly; "
    "supporting_facts name them as [title, sentence id].\n"
    "4. THE JSON SCHEMA: " + ANSWER_FORMAT
)

LIVE_SOURCE_RULE = (
    "1. SOURCE ADHERENCE (NO HALLUCINATION): Your final answer MUST be based ONLY on the articles you read with "
    "the context_lookup or wikipedia_page tools and on the results of your other tools. Do not use external "
    "knowledge."
)
"""Rule 1 when live tools are on (the default prompt's rule 1 names context_lookup only)."""

RETRY_PROMPT = "Reply now with only the JSON object of your final answer: " + ANSWER_FORMAT
FINAL_PROMPT = "You have used all your tool calls. " + RETRY_PROMPT

TOOLS = [CONTEXT_LOOKUP_TOOL, CALCULATOR_TOOL]

DEFAULT_MAX_TURNS = 10


def parse_answer(text: str | None) -> dict[str, Any] | None:
    """The JSON object with an ``answer`` in a model's reply (code fences and prose around it tolerated), or
    ``None``."""
    try:
        value = parse_json(text)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("answer") is not None:
        return value
    return None


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def final_output(answer: dict[str, Any], trajectory: list[Any], lookup: ContextLookup) -> dict[str, Any]:
    """The agent's output in BeeAI's answer format.

    ``tool_used`` is counted from the trajectory (``[{"tool", "times_used"}]``, BeeAI's shape), not taken from the
    model. Valid ``supporting_facts`` (``[title, sentence id]`` in the collection) are kept; when the model gave
    facts but no sentences, the sentences are read from the collection; missing titles come from the facts.
    """
    paragraphs = dict(lookup.paragraphs)
    facts = []
    for fact in _as_list(answer.get("supporting_facts")):
        if isinstance(fact, (list, tuple)) and len(fact) == 2 and isinstance(fact[1], int) \
                and 0 <= fact[1] < len(paragraphs.get(str(fact[0]), [])):
            facts.append([str(fact[0]), fact[1]])
    sentences = [str(s) for s in _as_list(answer.get("supporting_sentences"))]
    if not sentences and facts:
        sentences = [paragraphs[title][sent_id].strip() for title, sent_id in facts]
    titles = [str(t) for t in _as_list(answer.get("supporting_titles"))] or list(dict.fromkeys(t for t, _ in facts))
    counts = Counter(step["name"] for step in tool_calls(trajectory))
    output = {
        "answer": str(answer.get("answer")).strip(),
        "tool_used": [{"tool": name, "times_used": times} for name, times in counts.items()],
        "supporting_titles": titles,
        "supporting_sentences": sentences,
        "reasoning_explanation": answer.get("reasoning_explanation", []),
    }
    if facts:
        output["supporting_facts"] = facts
    return output


def system_prompt(live: LiveTools | None = None) -> str:
    """The agent's system prompt: :data:`SYSTEM_PROMPT`, with rule 1 naming the live article tool when live tools
    are on."""
    if not live:
        return SYSTEM_PROMPT
    default_rule = SYSTEM_PROMPT.split("\n")[2]
    return SYSTEM_PROMPT.replace(default_rule, LIVE_SOURCE_RULE)


async def run_tool(call_name: str, arguments: dict[str, Any], lookup: ContextLookup,
                   live: LiveTools | None = None) -> Any:
    """The result of one tool call.

    Raises:
        ToolError: an unknown tool or arguments the tool refuses (a live tool also when its API gave no answer).
    """
    if call_name == CONTEXT_LOOKUP_TOOL["name"]:
        return lookup(arguments)
    if call_name == CALCULATOR_TOOL["name"]:
        return calculator(arguments)
    if live and call_name in live.names:
        return await live.run(call_name, arguments)
    names = [CONTEXT_LOOKUP_TOOL["name"], CALCULATOR_TOOL["name"], *(live.names if live else [])]
    raise ToolError(f"there is no tool {call_name!r}; use one of {', '.join(names)}")


async def answer_question(model: ChatModel, task: Task, max_turns: int = DEFAULT_MAX_TURNS,
                          live: LiveTools | None = None) -> SolutionOutput:
    """Run the agent on one task (see the module docstring), with the live tools of ``live`` besides its own.

    Returns:
        output: BeeAI's answer format (:func:`final_output`); trajectory: every tool call (with arguments, result
        and error) and the assistant's texts; meta: ``turns`` (model calls), ``stopped`` (``answer`` or
        ``max_turns``) and the served ``model``.

    Raises:
        ModelError: the model failed for good (the task becomes an error record).
    """
    lookup = ContextLookup((task.metadata or {}).get("context"))

    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        return await run_tool(name, arguments, lookup, live)

    messages: list[Any] = [system_message(system_prompt(live)), user_message(str(task.input))]
    outcome = await run_tool_loop(model, messages, TOOLS + (live.definitions if live else []), tool, parse_answer,
                                  max_turns=max_turns, retry_prompt=RETRY_PROMPT, final_prompt=FINAL_PROMPT)
    answer = outcome.answer
    if answer is None:  # the last call gave no JSON answer either: its text is the answer
        answer = {"answer": outcome.reply.text if outcome.reply else None}
    return SolutionOutput(
        success=True,
        output=final_output(answer, outcome.trajectory, lookup),
        trajectory=outcome.trajectory,
        meta=outcome.meta,
    )


@declare("hotpotqa-agent", needs={"model", "model_base_url"})
@solution_factory
def hotpotqa_agent(
    model: str,
    model_base_url: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    tools: str | list[str] | None = None,
    tool_timeout: float = DEFAULT_TIMEOUT_S,
    wikipedia_url: str = WIKIPEDIA_URL,
    openmeteo_url: str | None = None,
) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """Build the agent (once per worker).

    Args:
        model: ``provider:model`` (see ``docs/models.md``); bare ``mock`` plays a scripted episode of this agent
            (the ``mock:hotpotqa`` policy, :mod:`runner.benchmarks.hotpotqa.mock`).
        model_base_url: the model server's API root (``--model-base-url``).
        max_turns: model calls with tools before the last call that must answer (``-S max_turns=...``).
        temperature: sampling temperature (default 0, for repeatable runs; ``None``: the server's).
        max_tokens: the most output tokens per call (``None``: the server's).
        tools: live tools to add, as BeeAI's agent has them (``wikipedia``, ``openmeteo``; a list or
            comma-separated; default none: the agent reaches no network but its model's).
        tool_timeout: seconds per request of a live tool.
        wikipedia_url: the MediaWiki Action API the Wikipedia tools call.
        openmeteo_url: one root for Open-Meteo's geocoding and forecast APIs (default: the public hosts).

    Returns:
        ``solve(task)`` -> :func:`answer_question`.

    Raises:
        ConfigError: an unknown provider, a missing API key, or a bad argument (:func:`check_arguments`).
    """
    check_arguments(max_turns=max_turns, tools=tools, tool_timeout=tool_timeout)
    chat_model = ChatModel.from_name(model, base_url=model_base_url, temperature=temperature, max_tokens=max_tokens,
                                     mock_policy="hotpotqa")
    live = LiveTools(tools, tool_timeout, wikipedia_url, openmeteo_url)

    async def solve(task: Task) -> SolutionOutput:
        return await answer_question(chat_model, task, max_turns, live)

    return solve


def check_arguments(max_turns: int = DEFAULT_MAX_TURNS, tools: Any = None, tool_timeout: float = DEFAULT_TIMEOUT_S,
                    **_: Any) -> None:
    """Refuse bad ``-S`` values before anything is written (called by ``SolutionSpec.check``).

    Raises:
        ConfigError: ``max_turns`` that is not an integer of at least 1, an unknown live tool, or a
            ``tool_timeout`` that is not a positive number.
    """
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ConfigError(f"hotpotqa-agent: max_turns must be an integer of at least 1, got {max_turns!r}")
    check_timeout(tool_timeout)
    LiveTools(tools, tool_timeout)


hotpotqa_agent.check_arguments = check_arguments  # type: ignore[attr-defined]
