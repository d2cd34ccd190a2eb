"""A reply policy for the scripted model server: answers the toy benchmark's arithmetic questions correctly.

With it, a run of ``--solution chat`` against the scripted server (which stands in for a model server, since no
model can run here) scores 1.0, so a test can tell a correct end-to-end path from a broken one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.solutions.calculator import evaluate, extract_expression
from runner.models import ChatModel, ChatRequest, MockReply, user_message


def arithmetic(request: ChatRequest) -> MockReply:
    """The value of the arithmetic question in the last user message, as text (usage: 1 output token)."""
    question = str((request.last_message("user") or user_message("")).get("content", ""))
    return MockReply(content=str(evaluate(extract_expression(question))))


def prompt_words(request: ChatRequest) -> int:
    """The input tokens the scripted server reports for ``request`` (it counts words)."""
    return sum(len(str(message.get("content") or "").split()) for message in request.messages)


@solution_factory
def impatient_chat(model: str, model_base_url: str | None = None,
                   timeout: float = 1.0) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """The ``chat`` solution with a model timeout of ``timeout`` seconds (``-S timeout=0.5``): a test can make a
    stalled request time out without waiting the default 300 s."""
    chat_model = ChatModel.from_name(model, base_url=model_base_url, timeout=timeout)

    async def solve(task: Task) -> SolutionOutput:
        reply = await chat_model.chat([user_message(str(task.input))])
        return SolutionOutput(success=True, output=reply.text)

    return solve
