"""A reply policy for the scripted model server: answers the toy benchmark's arithmetic questions correctly.

With it, a run of ``--solution chat`` against the scripted server (which stands in for a model server, since no
model can run here) scores 1.0, so a test can tell a correct end-to-end path from a broken one.
"""

from __future__ import annotations

from runner.solutions.calculator import evaluate, extract_expression
from runner.models import ChatRequest, MockReply, user_message


def arithmetic(request: ChatRequest) -> MockReply:
    """The value of the arithmetic question in the last user message, as text (usage: 1 output token)."""
    question = str((request.last_message("user") or user_message("")).get("content", ""))
    return MockReply(content=str(evaluate(extract_expression(question))))


def prompt_words(request: ChatRequest) -> int:
    """The input tokens the scripted server reports for ``request`` (it counts words)."""
    return sum(len(str(message.get("content") or "").split()) for message in request.messages)
