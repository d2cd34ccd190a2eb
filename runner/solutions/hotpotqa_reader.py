"""``hotpotqa-reader``: HotpotQA as reading comprehension, one chat call per question with its paragraphs in the
prompt, no tools; for models without native tool calling, such as the embedded SmolLM2
(``--model transformers:smollm2-135m-instruct``).

The paragraphs are the question's gold ones by default (``-S context=gold``: the paragraphs of its supporting titles,
the "gold paragraphs" reading of Yang et al., 2018, HotpotQA, section 5, which isolates reading from retrieval), or
all ten paragraphs of the distractor setting (``-S context=distractor``: the benchmark's own setting, with eight
distractors; prompts about four times longer). The reply's first line is the answer, scored by the official
``hotpot_evaluate_v1.py`` EM and F1 (:mod:`runner.benchmarks.hotpotqa.official`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runner.core.errors import ConfigError
from runner.core.plugin import declare
from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.models import ChatModel, system_message, user_message

CONTEXTS = ("gold", "distractor")
SYSTEM_PROMPT = ("You answer questions from the passages given. Reply with the answer only: a short phrase taken "
                 "from the passages (a name, a date, a number), or yes or no.")


def passages(task: Task, context: str) -> list[tuple[str, list[str]]]:
    """The ``(title, sentences)`` paragraphs of ``task`` shown to the model: with ``gold``, those of its supporting
    titles (all of them when the record names none); with ``distractor``, all of them, in the record's order."""
    record: Any = (task.metadata or {}).get("record")
    paragraphs = list((task.metadata or {}).get("context") or [])
    if context == "gold" and record is not None and record.distinct_titles:
        wanted = set(record.distinct_titles)
        paragraphs = [paragraph for paragraph in paragraphs if paragraph[0] in wanted] or paragraphs
    return paragraphs


def prompt(task: Task, context: str) -> str:
    """The user message: the paragraphs (``Title: sentences``), then the question."""
    shown = "\n\n".join(f"{title}: {' '.join(sentence.strip() for sentence in sentences)}"
                        for title, sentences in passages(task, context))
    return f"Passages:\n{shown}\n\nQuestion: {task.input}\nAnswer:"


def first_line(text: str) -> str:
    """The answer in a reply: its first non-empty line, without a leading ``Answer:``."""
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("Answer:").strip()
    return ""


@declare("hotpotqa-reader", needs={"model", "model_base_url"})
@solution_factory
def hotpotqa_reader(model: str, model_base_url: str | None = None, context: str = "gold",
                    temperature: float | None = 0.0, max_tokens: int | None = 32,
                    ) -> Callable[[Task], Awaitable[SolutionOutput]]:
    """Build the reader (once per worker).

    Args:
        model: ``provider:model`` (see ``docs/models.md``).
        model_base_url: the model server's API root (``--model-base-url``; none for a model the run serves).
        context: ``gold`` or ``distractor`` (see the module docstring).
        temperature: sampling temperature (default 0: repeatable).
        max_tokens: the most output tokens of the answer (default 32: a span, not an essay).

    Returns:
        ``solve(task)``: output ``{"answer": the reply's first line}``; trajectory: the messages and the reply.

    Raises:
        ConfigError: an unknown ``context``, an unknown provider or a missing API key.
    """
    if context not in CONTEXTS:
        raise ConfigError(f"hotpotqa-reader: context {context!r} is not one of {', '.join(CONTEXTS)}; pass "
                          "-S context=gold or -S context=distractor")
    chat_model = ChatModel.from_name(model, base_url=model_base_url, temperature=temperature, max_tokens=max_tokens)

    async def solve(task: Task) -> SolutionOutput:
        messages = [system_message(SYSTEM_PROMPT), user_message(prompt(task, context))]
        reply = await chat_model.chat(messages)
        return SolutionOutput(success=True, output={"answer": first_line(reply.text)},
                              trajectory=[*messages, reply.to_message()],
                              meta={"model": reply.model, "finish_reason": reply.finish_reason, "context": context})

    return solve
