"""Tools of the built-in agents: a context lookup that stands in for Wikipedia, and the restricted calculator.

Each tool is a JSON-schema definition (the short form :mod:`runner.models` accepts) and a function from the
call's arguments to a JSON-serialisable result; a bad call raises :class:`ToolError`, whose message the agent
hands back to the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runner.solutions.calculator import CalculatorError, evaluate
from runner.benchmarks.hotpotqa.metrics import CONTEXT_LOOKUP

CONTEXT_LOOKUP_TOOL = {
    "name": CONTEXT_LOOKUP,
    "description": (
        "Read a Wikipedia article of this question's document collection by its exact title. Returns the "
        "article's sentences, numbered from 0. If no article has that title, returns the titles of the "
        "collection, the most relevant to your query first: call again with one of them."
    ),
    "parameters": {
        "type": "object",
        "properties": {"title": {"type": "string", "description": "the article's title, e.g. 'Ed Wood'"}},
        "required": ["title"],
    },
}

CALCULATOR_TOOL = {
    "name": "calculator",
    "description": ("Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses, "
                    "e.g. '(1846 - 1844) * 12'."),
    "parameters": {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "the arithmetic expression"}},
        "required": ["expression"],
    },
}

_WORD = re.compile(r"\w+")


class ToolError(ValueError):
    """A tool call that cannot be answered (bad arguments, unknown tool); the message is for the model."""


def _words(text: str) -> set[str]:
    return {word.casefold() for word in _WORD.findall(text)}


def _key(title: str) -> str:
    return " ".join(title.casefold().split())


class ContextLookup:
    """The ``context_lookup`` tool over one task's paragraphs.

    Args:
        context: ``[(title, [sentence, ...]), ...]`` (a HotpotQA record's ``context``).
    """

    def __init__(self, context: Sequence[tuple[str, Sequence[str]]] | None) -> None:
        self.paragraphs = [(str(title), [str(s) for s in sentences]) for title, sentences in context or []]
        self._by_key = {_key(title): index for index, (title, _) in enumerate(self.paragraphs)}

    def ranked_titles(self, query: str) -> list[str]:
        """Every title, the most relevant to ``query`` first: by the share of the title's words found in the query,
        then by the number of query words in the paragraph; ties keep the collection's order."""
        wanted = _words(query)

        def relevance(item: tuple[int, tuple[str, list[str]]]) -> tuple[float, int, int]:
            index, (title, sentences) = item
            title_words = _words(title)
            coverage = len(wanted & title_words) / len(title_words) if title_words else 0.0
            return (-coverage, -len(wanted & _words(" ".join(sentences))), index)

        return [title for _, (title, _) in sorted(enumerate(self.paragraphs), key=relevance)]

    def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The paragraph titled ``arguments["title"]`` (case and spacing ignored) as numbered sentences, or the
        ranked titles when there is no such paragraph.

        Raises:
            ToolError: no ``title`` string, or a collection with no paragraphs.
        """
        title = arguments.get("title")
        if not isinstance(title, str) or not title.strip():
            raise ToolError("context_lookup needs a non-empty string 'title'")
        if not self.paragraphs:
            raise ToolError("there are no documents for this question; answer from what you know")
        index = self._by_key.get(_key(title))
        if index is None:
            return {"error": f"no article titled {title!r}", "titles": self.ranked_titles(title)}
        found, sentences = self.paragraphs[index]
        return {"title": found, "sentences": [{"id": i, "text": s.strip()} for i, s in enumerate(sentences)]}


def calculator(arguments: dict[str, Any]) -> dict[str, Any]:
    """``{"result": value}`` of ``arguments["expression"]`` (:func:`runner.solutions.calculator.evaluate`).

    Raises:
        ToolError: no expression string, or one the calculator refuses (the reason is in the message).
    """
    expression = arguments.get("expression")
    if not isinstance(expression, str):
        raise ToolError("calculator needs a string 'expression'")
    try:
        return {"result": evaluate(expression)}
    except CalculatorError as exc:
        raise ToolError(f"calculator: {exc}") from None
