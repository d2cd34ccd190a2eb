"""Solutions and benchmarks used by tests that run ``python -m runner`` in a subprocess (importable by path)."""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from runner import BenchmarkBase, Headline, MetricBase, MetricType, RunResults, SolutionOutput, Task, solution_factory
from runner.solutions.calculator import calculator
from runner.benchmarks.toy import NumericMatch

CALLS_ENV = "RUNNER_TEST_CALLS"
DELAY_ENV = "RUNNER_TEST_DELAY"


def counting_calculator(task: Task) -> float:
    """The calculator, appending ``<task id> <pid>`` to the file named by ``$RUNNER_TEST_CALLS`` on every call
    (flushed to disk before answering) and sleeping ``$RUNNER_TEST_DELAY`` seconds, so tests can count executions
    and kill a run midway."""
    path = os.environ[CALLS_ENV]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{task.id} {os.getpid()}\n")
        handle.flush()
        os.fsync(handle.fileno())
    time.sleep(float(os.environ.get(DELAY_ENV, "0")))
    return calculator(task)


class SquaresBenchmark(BenchmarkBase):
    """``n`` tasks "What is i * i?" with no ``__len__`` (the plan counts them)."""

    def __init__(self, n: int = 5) -> None:
        super().__init__(name="squares", description="squares")
        self.n = n

    def __iter__(self) -> Iterator[Task]:
        for i in range(self.n):
            yield Task(id=f"sq/{i}", input=f"What is {i} * {i}?", ground_truth=i * i, metrics=[NumericMatch(i * i)],
                       tags={"category": "even" if i % 2 == 0 else "odd"})


def flaky_calculator(task: Task) -> float:
    """The calculator, raising on every task whose id ends in 3 while ``$RUNNER_TEST_FAIL`` is set (an outage)."""
    if os.environ.get("RUNNER_TEST_FAIL") and task.id.endswith("3"):
        raise ConnectionError("model server unavailable")
    return calculator(task)


STUBBORN_TRIES: Counter[str] = Counter()
"""Tries of :func:`stubborn_calculator` per task id in this process (a test clears it)."""


def stubborn_calculator(task: Task) -> float:
    """The calculator, except on tasks whose id ends in 1: their first two tries raise (counted in this process) and
    the third answers one too many, as an agent whose retried answers are worse."""
    if not task.id.endswith("1"):
        return calculator(task)
    STUBBORN_TRIES[task.id] += 1
    if STUBBORN_TRIES[task.id] <= 2:
        raise ConnectionError(f"try {STUBBORN_TRIES[task.id]} failed")
    return calculator(task) + 1


class IdsBenchmark(BenchmarkBase):
    """Tasks "What is i * i?" whose ids are the comma-separated ``ids`` (``-B ids=a,b,a``): a custom benchmark with
    a duplicated or empty id, as a user might write by mistake."""

    def __init__(self, ids: str = "a,b,c") -> None:
        super().__init__(name="ids", description="ids")
        self.ids = ids.split(",")

    def __iter__(self) -> Iterator[Task]:
        for i, task_id in enumerate(self.ids):
            yield Task(id=task_id, input=f"What is {i} * {i}?", ground_truth=i * i, metrics=[NumericMatch(i * i)])


class BrokenAgent:
    """A solution class whose constructor raises, as one that needs hardware this machine lacks would."""

    def __init__(self) -> None:
        raise RuntimeError("no GPU on this machine")

    def __call__(self, task: Task) -> float:
        return calculator(task)


class Distance(MetricBase):
    """``abs(int(answer) - gold)`` of the answer's ASCII digits, however many (traceroot-py's metric that met an
    answer of 400 nines, PR #161); ``None`` for an answer without digits."""

    def __init__(self, gold: int) -> None:
        super().__init__(name="distance")
        self.gold = gold

    def __call__(self, solution: SolutionOutput) -> int | None:
        digits = "".join(re.findall(r"[0-9]+", str(solution.output)))
        return abs(int(digits) - self.gold) if digits else None


class AnswerAndGold(MetricBase):
    """A ``CORPUS`` metric's per-item pair ``[int(answer), gold]`` (``None`` for an answer without digits): the
    benchmark's headline is the share of pairs that agree."""

    def __init__(self, gold: int) -> None:
        super().__init__(name="answer_and_gold", metric_type=MetricType.CORPUS)
        self.gold = gold

    def __call__(self, solution: SolutionOutput) -> list[int | None]:
        digits = "".join(re.findall(r"[0-9]+", str(solution.output)))
        return [int(digits) if digits else None, self.gold]


class DistanceBenchmark(BenchmarkBase):
    """``n`` tasks "What is i * i?" scored by :class:`Distance` and :class:`AnswerAndGold`; the headline is the
    share of exact answers, from the corpus pairs."""

    def __init__(self, n: int = 6) -> None:
        super().__init__(name="distance", description="distance")
        self.n = n

    def __iter__(self) -> Iterator[Task]:
        for i in range(self.n):
            yield Task(id=f"d{i}", input=f"What is {i} * {i}?", ground_truth=i * i,
                       metrics=[Distance(i * i), AnswerAndGold(i * i)])

    def score(self, results: RunResults) -> Headline:
        pairs = [row.scores["answer_and_gold"] for row in results.rows if "answer_and_gold" in row.scores]
        return Headline(score=sum(answer == gold for answer, gold in pairs) / len(pairs))


ECHO_TOOL = {"name": "echo", "description": "Say the text back.",
             "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
BROKEN_API = '"\\udc00 from the API"'
"""What :func:`echo_agent`'s tool adds to each answer: a JSON string holding a lone low surrogate, as a web API that
cut a pair sends it (decoded with ``json.loads``)."""


@solution_factory
def echo_agent(model: str, model_base_url: str | None = None) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """An agent with one tool, ``echo``: asks the model, runs each tool call it makes (answering the call's ``text``
    and :data:`BROKEN_API`'s text), sends the results back and answers with the model's next reply. Output: that
    reply's text; trajectory: the conversation; meta: the arguments of each tool call."""
    from runner.models import ChatModel, tool_message, user_message  # the model clients, for this solution only

    chat_model = ChatModel.from_name(model, base_url=model_base_url)

    async def solve(task: Task) -> SolutionOutput:
        conversation: list[Any] = [user_message(str(task.input))]
        reply = await chat_model.chat(conversation, tools=[ECHO_TOOL])
        calls = list(reply.tool_calls)
        conversation.append(reply.to_message())
        for call in calls:
            said = {"echoed": call.arguments.get("text"), "api": json.loads(BROKEN_API)}
            conversation.append(tool_message(call.id, said, name=call.name))
        if calls:
            reply = await chat_model.chat(conversation, tools=[ECHO_TOOL])
            conversation.append(reply.to_message())
        return SolutionOutput(output=reply.text, trajectory=conversation,
                              meta={"tool_arguments": [call.arguments for call in calls]})

    return solve


@solution_factory
def model_skill(model: str, model_base_url: str | None = None) -> Callable[[Task], float]:
    """The calculator, as good as its model's name says: ``mock`` answers every task, any other model none of the
    tasks whose id ends in an even digit (a matrix whose models truly differ; the model is never called)."""

    def solve(task: Task) -> float:
        answer = calculator(task)
        return answer + 1 if model != "mock" and task.id[-1] in "02468" else answer

    return solve
