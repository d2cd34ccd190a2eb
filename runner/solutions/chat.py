"""The built-in ``chat`` solution: one chat call per task, the task's input as the user message.

The smallest model-driven solution, for benchmarks whose answer is the model's text (``--solution chat --model
vllm:Qwen/Qwen2.5-7B-Instruct``) and for checking a model server end to end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runner.core.plugin import declare
from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.models import ChatModel, system_message, user_message


@declare("chat", needs={"model", "model_base_url"})
@solution_factory
def chat(
    model: str,
    model_base_url: str | None = None,
    system_prompt: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """Build the solution (once per worker): answer ``str(task.input)`` with the model's reply text.

    Args:
        model: ``provider:model`` (see ``docs/models.md``).
        model_base_url: the model server's API root (``--model-base-url``).
        system_prompt: an optional system message before the task's input (``-S system_prompt=...``).
        temperature, max_tokens: sampling settings (``None``: the server's defaults).
        seed: a sampling seed sent with every call (``-S seed=N``; ``None``: none, so each repeat of a task is a
            sample of its own). Every repeat then sends the same seed: a server that honours it (vLLM) answers a
            sampled request alike in each, and the report says so.

    Returns:
        ``solve(task)``: output = the reply text; trajectory = the messages and the reply (with the model's
        reasoning under ``reasoning`` when it sent some); meta = the served model name and the finish reason.

    Raises:
        ConfigError: an unknown provider or a missing API key (when the worker builds it).
    """
    chat_model = ChatModel.from_name(model, base_url=model_base_url, temperature=temperature, max_tokens=max_tokens,
                                     seed=seed)

    async def solve(task: Task) -> SolutionOutput:
        messages = [system_message(system_prompt)] if system_prompt else []
        messages.append(user_message(str(task.input)))
        reply = await chat_model.chat(messages)
        return SolutionOutput(
            success=True,
            output=reply.text,
            trajectory=[*messages, reply.to_message(reasoning=True)],
            meta={"model": reply.model, "finish_reason": reply.finish_reason},
        )

    return solve
