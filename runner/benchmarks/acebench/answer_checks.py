"""Scoring one answer of a normal or special task, as the authors' ``eval_main.py`` does per line.

Sources (authors' repository, as reproduced by the forks hjc18/ACEBench at 65cd252 and zeppombal/ACEBench at
c9391d0): ``normal_single_turn_eval`` takes the first outermost ``[...]`` of the reply, ``normal_multi_turn_eval``
removes all whitespace, both decode through ``decode_ast`` and try each ground-truth candidate in turn;
``special_eval`` looks for fixed phrases in the raw reply.
"""

from __future__ import annotations

from typing import Any

from runner.benchmarks.acebench.calls import CallSyntaxError, decode_calls, first_outermost_brackets, without_whitespace
from runner.benchmarks.acebench.normal_checker import Verdict, check_calls

INCOMPLETE_PHRASE = "Missing necessary parameters"
ERROR_PARAM_PHRASE = "There is incorrect value"
IRRELEVANT_PHRASE = "the limitations of the function"


def is_multi_turn(category: str) -> bool:
    """Whether ``category`` is scored turn by turn within dialogues (``normal_multi_turn_*``)."""
    return "normal_multi_turn" in category


def check_normal(reply: Any, functions: list[dict[str, Any]], ground_truth: Any, category: str,
                 strict: bool = False) -> Verdict:
    """Is ``reply`` (the model's text) a right call list for this normal task?

    ``ground_truth`` is one ``{function: {param: value}}`` or a list of alternatives (any may match).
    """
    if not isinstance(reply, str):
        return Verdict(False, "wrong_output_format", "the reply is not text")
    text = without_whitespace(reply) if is_multi_turn(category) else first_outermost_brackets(reply)
    try:
        calls = decode_calls(text)
    except CallSyntaxError as exc:
        return Verdict(False, "wrong_output_format", f"Invalid syntax. Failed to decode AST. {exc}")
    candidates = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    first_failure: Verdict | None = None
    for candidate in candidates:
        verdict = check_calls(functions, calls, candidate, category, strict)
        if verdict.valid:
            return verdict
        first_failure = first_failure or verdict
    return first_failure or Verdict(False, "no_candidate", "the ground truth has no candidate")


def check_special(reply: Any, ground_truth: Any, category: str, strict: bool = False) -> Verdict:
    """Does ``reply`` point out the problem the way the category asks?

    Official (``special_eval``): ``incomplete`` needs "Missing necessary parameters", the API name and every
    missing parameter; ``error_param`` needs "There is incorrect value" and every wrong value; ``irrelevant`` needs
    "the limitations of the function". Substring tests on the raw reply, case-sensitive. Strict also needs the name
    of each wrong parameter in ``error_param`` and, in every special category, a reply that is not a call list
    (a model that calls a function anyway has not pointed out the problem).
    """
    if not isinstance(reply, str):
        return Verdict(False, "error_detection", "the reply is not text")
    if strict and _is_call_list(reply):
        return Verdict(False, "error_detection", "the reply calls a function instead of pointing out the problem")
    if "incomplete" in category:
        for name, values in ground_truth.items():
            if INCOMPLETE_PHRASE not in reply:
                return Verdict(False, "error_detection", f"missing parameters ({values}) of {name} not pointed out")
            if name not in reply:
                return Verdict(False, "error_correction", f"the reply does not name the API {name}")
            for value in values:
                if value not in reply:
                    return Verdict(False, "error_correction", f"the reply does not name the missing {value}")
        return Verdict(True)
    if "error" in category:
        for name, values in ground_truth.items():
            if ERROR_PARAM_PHRASE not in reply:
                return Verdict(False, "error_detection", f"incorrect values ({values}) of {name} not pointed out")
            if strict and name not in reply:
                return Verdict(False, "error_correction", f"the reply does not name the parameter {name}")
            for value in values:
                if value not in reply:
                    return Verdict(False, "error_correction", f"the reply does not name the value {value}")
        return Verdict(True)
    if IRRELEVANT_PHRASE not in reply:
        return Verdict(False, "error_detection", "the reply does not say the functions cannot solve the problem")
    return Verdict(True)


def _is_call_list(reply: str) -> bool:
    try:
        return bool(decode_calls(first_outermost_brackets(reply)))
    except CallSyntaxError:
        return False
