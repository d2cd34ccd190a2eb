"""Assembling the ACEBench agent's prompts from the task's input and the wording in :mod:`texts`.

A system prompt is made of paragraphs separated by blank lines; its first line names its kind (see
:func:`prompt_kind`). Text-protocol prompts end with the task's functions as JSON after
:attr:`Texts.functions_header`, so a model, and the ``mock:acebench`` policy, read them from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from runner.solutions.acebench.texts import TEXTS, Texts
from runner.models import Message, system_message, user_message

PHONE_APPS = frozenset({"BaseApi", "MessageApi", "ReminderApi", "FoodPlatform"})
KINDS = ("normal", "preference", "special", "multi_step", "multi_turn", "user_simulator")


def texts_for(language: str) -> Texts:
    """The wording of ``language`` (``en`` or ``zh``; anything else reads as ``en``)."""
    return TEXTS.get(language, TEXTS["en"])


def functions_json(functions: list[dict[str, Any]]) -> str:
    """The task's function descriptions as compact JSON (non-ASCII kept, so Chinese stays readable)."""
    return json.dumps(functions, ensure_ascii=False)


def _time_line(task_input: Mapping[str, Any]) -> list[str]:
    time = str(task_input.get("time") or "").strip()
    return [time] if time else []


def single_reply_messages(task_input: Mapping[str, Any]) -> list[Message]:
    """The two messages of a normal or special task: the system prompt and the conversation so far.

    Args:
        task_input: an ACEBench task's ``input`` (``category``, ``language``, ``question``, ``functions``,
            ``time``, ``profile``).
    """
    texts = texts_for(task_input.get("language", "en"))
    category = str(task_input.get("category", ""))
    functions = f"{texts.functions_header}\n{functions_json(task_input.get('functions') or [])}"
    if category.startswith("special"):
        parts = [texts.special, *_time_line(task_input), texts.roles, functions]
    elif "preference" in category:
        profile = f"{texts.profile_header}\n{task_input.get('profile') or ''}"
        parts = [texts.preference, texts.call_format, profile, texts.roles, functions]
    else:
        parts = [texts.normal, texts.call_format, *_time_line(task_input), texts.roles, functions]
    question = f"{texts.conversation_header}\n{task_input.get('question', '')}"
    return [system_message("\n\n".join(parts)), user_message(question)]


def agent_system_prompt(task_input: Mapping[str, Any], native: bool) -> str:
    """The system prompt of an agent task (``agent_multi_step`` or ``agent_multi_turn``).

    Args:
        task_input: the task's ``input`` (``category``, ``language``, ``functions``, ``involved_classes``,
            ``time``).
        native: the model calls the functions as tools (function calling) rather than writing them as text;
            the functions then travel as tools and are not repeated in the prompt.
    """
    texts = texts_for(task_input.get("language", "en"))
    multi_turn = "multi_turn" in str(task_input.get("category", ""))
    parts = [texts.multi_turn if multi_turn else texts.multi_step]
    rules = texts.native_calls if native else texts.call_format
    if not multi_turn:
        rules += "\n" + texts.one_step_at_a_time
    parts.append(rules)
    if multi_turn:
        parts.extend(domain_policies(texts, task_input.get("involved_classes") or []))
    parts.extend(_time_line(task_input))
    parts.append(texts.finish_rule)
    if not native:
        parts.append(f"{texts.functions_header}\n{functions_json(task_input.get('functions') or [])}")
    return "\n\n".join(parts)


def domain_policies(texts: Texts, involved_classes: Iterable[str]) -> list[str]:
    """The policy paragraphs of the apps a multi-turn task involves: the phone's, the airline's, or both."""
    involved = set(involved_classes)
    policies = []
    if involved & PHONE_APPS:
        policies.append(texts.phone_policy)
    if "Travel" in involved:
        policies.append(texts.travel_policy)
    return policies


def user_simulator_prompt(task_input: Mapping[str, Any]) -> str:
    """The system prompt of the simulated user of an ``agent_multi_turn`` task: how to play, the rules of its
    domain, and the task's ``question`` (the user's instruction) last."""
    texts = texts_for(task_input.get("language", "en"))
    involved = set(task_input.get("involved_classes") or [])
    rules = (texts.user_phone_rules if involved & PHONE_APPS else "") + (
        texts.user_travel_rules if "Travel" in involved else "")
    play = texts.user_simulator.replace("{rules}", rules)
    return f"{play}\n\n{texts.instruction_header}\n{task_input.get('question', '')}"


def execution_message(texts: Texts, results: list[tuple[str, Any]]) -> str:
    """The message that gives a text-protocol agent its execution results: one line per call,
    ``<call> -> <result as JSON>``."""
    lines = [f"{call} -> {json.dumps(result, ensure_ascii=False, default=str)}" for call, result in results]
    return "\n".join([texts.execution_header, *lines])


def is_execution_message(text: str) -> bool:
    """Whether ``text`` is an execution-results message (either language)."""
    return any(text.startswith(texts.execution_header) for texts in TEXTS.values())


def prompt_kind(system_prompt: str) -> tuple[str, str] | None:
    """Which of this agent's prompts ``system_prompt`` is, from its first line: ``(kind, language)`` with a kind
    of :data:`KINDS`; ``None`` for any other text."""
    first = system_prompt.split("\n", 1)[0]
    for language, texts in TEXTS.items():
        for kind in KINDS:
            if first == getattr(texts, kind).split("\n", 1)[0]:
                return kind, language
    return None


def functions_in(system_prompt: str) -> list[dict[str, Any]]:
    """The function list written at the end of a text-protocol prompt (``[]`` when there is none)."""
    for texts in TEXTS.values():
        _, sep, tail = system_prompt.rpartition(texts.functions_header + "\n")
        if sep:
            try:
                value = json.loads(tail)
            except ValueError:
                return []
            return value if isinstance(value, list) else []
    return []


def instruction_in(system_prompt: str) -> str:
    """The user's instruction at the end of a user-simulator prompt (``""`` when there is none)."""
    for texts in TEXTS.values():
        _, sep, tail = system_prompt.rpartition("\n" + texts.instruction_header + "\n")
        if sep:
            return tail.strip()
    return ""
