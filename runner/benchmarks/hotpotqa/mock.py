"""The ``mock:hotpotqa`` reply policy: a deterministic episode of the HotpotQA agent and a lexical stand-in judge.

It is what bare ``--model mock`` plays with ``--solution hotpotqa-agent`` (and what ``--judge-model mock:hotpotqa``
judges with), so that a run goes end to end with no model server: in CI, in a demo, or to check a cluster.

Agent turns (the conversation alone decides, as for every mock policy):

1. no tool result yet: ``context_lookup`` with the question as the title, which finds no article and returns the
   titles ranked by relevance to the question;
2. no article read yet: ``context_lookup`` of the two most relevant titles, in one turn;
3. then the answer JSON: ``yes`` for a question that starts like a yes/no question, else the title of the second
   article read (the bridge entity's guess); the first sentence of each article read as supporting fact.

With the live Wikipedia tools offered (``-S tools=wikipedia``) it plays the same episode on them instead:
``wikipedia_search`` of the question, then ``wikipedia_page`` of the two first results, then the answer (the first
sentence of each page's text as supporting sentence).

Judge prompts (:mod:`runner.benchmarks.hotpotqa.judges`): the answer is rated by the official token F1 against
the expected answer, the facts by the F1 of the two sets of sentences. DeepEval's and Ragas' structured prompts get
the smallest valid reply with one item per list (see :func:`policy`).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from runner.benchmarks.hotpotqa.metrics import CONTEXT_LOOKUP, WIKIPEDIA_PAGE
from runner.benchmarks.hotpotqa.official import answer_prf
from runner.models import ChatRequest, MockReply, MockToolCall, default_policy, schema_instance

_ANSWER = re.compile(r"Model answer:\n(.*?)\n\nExpected answer:\n(.*?)\n\nReturn ONLY", re.DOTALL)
_FACTS = re.compile(r"Actual facts:\n(.*?)\n\nExpected facts:\n(.*?)\n\nReturn ONLY", re.DOTALL)
_YES_NO = re.compile(r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.IGNORECASE)
AGENT_MARKER = "Multi-hop Question Answering"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _set_f1(actual: set[str], expected: set[str]) -> float:
    common = len(actual & expected)
    if common == 0:
        return 0.0
    precision, recall = common / len(actual), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def judge_reply(prompt: str) -> str | None:
    """The stand-in judge's score for one of our judge prompts, as text; ``None`` for another prompt."""
    match = _ANSWER.search(prompt)
    if match:
        return f"{answer_prf(match.group(1), match.group(2)).f1:.2f}"
    match = _FACTS.search(prompt)
    if match:
        actual, expected = (ast.literal_eval(group) for group in match.groups())
        return f"{_set_f1({s.strip() for s in actual}, {s.strip() for s in expected}):.2f}"
    return None


def _tool_results(request: ChatRequest) -> list[dict[str, Any]]:
    results = []
    for message in request.messages:
        if message.get("role") == "tool":
            try:
                value = json.loads(_text(message))
            except ValueError:
                continue
            if isinstance(value, dict):
                results.append(value)
    return results


WIKIPEDIA_SEARCH = "wikipedia_search"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _answer(question: str, titles: list[str], sentences: list[str], facts: list[list[Any]]) -> MockReply:
    answer = "yes" if _YES_NO.match(question) else (titles[-1] if titles else "unknown")
    return MockReply(content=json.dumps({
        "answer": answer,
        "supporting_titles": titles,
        "supporting_sentences": sentences,
        "supporting_facts": facts,
        "reasoning_explanation": [{"step": 1, "logic": "scripted by the mock:hotpotqa policy"}],
    }))


def live_reply(request: ChatRequest, question: str) -> MockReply:
    """The agent's next turn on the live Wikipedia tools (see the module docstring)."""
    results = _tool_results(request)
    pages = [result for result in results if "title" in result and isinstance(result.get("text"), str)]
    found = next((result["results"] for result in results if isinstance(result.get("results"), list)), None)
    if request.tool_choice != "none" and found is None and not pages:
        return MockReply(tool_calls=[MockToolCall(name=WIKIPEDIA_SEARCH, arguments={"query": question})])
    if request.tool_choice != "none" and found and not pages:
        return MockReply(tool_calls=[MockToolCall(name=WIKIPEDIA_PAGE, arguments={"title": hit["title"]})
                                     for hit in found[:2]])
    sentences = [_SENTENCE_END.split(page["text"].strip(), 1)[0] for page in pages if page["text"].strip()]
    return _answer(question, [page["title"] for page in pages], sentences, [])


def agent_reply(request: ChatRequest) -> MockReply:
    """The agent's next turn (see the module docstring)."""
    question = _text(next((m for m in request.messages if m.get("role") == "user"), {}))
    if WIKIPEDIA_SEARCH in request.tool_names():
        return live_reply(request, question)
    results = _tool_results(request)
    read = [result for result in results if "title" in result and "sentences" in result]
    ranked = next((result["titles"] for result in results if result.get("titles")), [])
    can_call = CONTEXT_LOOKUP in request.tool_names() and request.tool_choice != "none"
    if can_call and not results:
        return MockReply(tool_calls=[MockToolCall(name=CONTEXT_LOOKUP, arguments={"title": question})])
    if can_call and not read and ranked:
        return MockReply(tool_calls=[MockToolCall(name=CONTEXT_LOOKUP, arguments={"title": title})
                                     for title in ranked[:2]])
    titles = [result["title"] for result in read]
    facts = [[result["title"], 0] for result in read if result["sentences"]]
    sentences = [result["sentences"][0]["text"] for result in read if result["sentences"]]
    return _answer(question, titles, sentences, facts)


def _one_item_arrays(schema: Any) -> Any:
    """``schema`` with every array asking for at least one item."""
    if isinstance(schema, dict):
        copy = {key: _one_item_arrays(value) for key, value in schema.items()}
        if copy.get("type") == "array":
            copy["minItems"] = max(1, int(copy.get("minItems", 0)))
        return copy
    if isinstance(schema, list):
        return [_one_item_arrays(item) for item in schema]
    return schema


def policy(request: ChatRequest) -> MockReply:
    """The ``mock:hotpotqa`` policy: judge prompts, then the agent's turns; a structured-output request (a DeepEval
    or Ragas metric's) gets the smallest instance of its schema with one item in each list (an empty list makes
    some of their scores undefined); anything else the default policy."""
    last = _text(request.last_message() or {})
    score = judge_reply(last) if last.startswith("You are an evaluator.") else None
    if score is not None:
        return MockReply(content=score)
    system = _text(request.last_message("system") or {})
    if AGENT_MARKER in system:
        return agent_reply(request)
    response_format = request.response_format or {}
    if response_format.get("type") == "json_schema":
        schema = _one_item_arrays((response_format.get("json_schema") or {}).get("schema") or {})
        return MockReply(content=json.dumps(schema_instance(schema)))
    return default_policy(request)
