"""One item's verdict, as BFCL's evaluator reaches it: decode the output, then check it.

Ports of the per-item steps of ``bfcl_eval/eval_checker/eval_runner.py`` (``_evaluate_single_ast_entry``,
``_evaluate_single_relevance_entry``, ``_evaluate_single_multi_turn_entry``) and of the output checks of
``bfcl_eval/utils.py`` (``is_function_calling_format_output``, ``is_empty_output``), ``bfcl-eval`` 2026.3.23.

What a solution returns (``SolutionOutput.output``):

- a single-turn item: the prompting-mode reply text (``[func(a=1, b="x")]``, decoded per the item's language), or
  a list of tool calls (``{"name", "arguments"}``, or BFCL's ``{name: arguments}``), decoded as the package decodes
  a function-calling model's output (function names then have ``.`` replaced by ``_``, as OpenAI-compatible tool
  names must);
- a multi-turn item: a list with one entry per user turn, each the list of the model's step outputs in that turn
  (each a reply text or a list of tool calls). Fewer turns than the item has means the run stopped early: the
  item is wrong (``multi_turn:force_terminated``), as BFCL's force-terminated runs are.

Every verdict is ``{"valid": bool, "error_type": str, "error": ...}``.
"""

from __future__ import annotations

from typing import Any

from runner.benchmarks.bfcl import decode
from runner.benchmarks.bfcl.ast_checker import ast_checker
from runner.benchmarks.bfcl.languages import parse_java, parse_javascript
from runner.benchmarks.bfcl.multi_turn import is_empty_execute_response, multi_turn_checker


def decode_ast(output: Any, language: str) -> Any:
    """The handler's ``decode_ast``: tool calls by JSON, text by the prompting decoder of ``language``.

    Raises:
        decode.DecodeError: wherever the official decoder raises (any exception there, one kind here).
    """
    try:
        if decode.is_tool_call_list(output):
            return decode.decode_ast_fc(output)
        if not isinstance(output, str):
            raise decode.DecodeError(f"the output is a {type(output).__name__}, not a text or a list of tool calls")
        text = decode.strip_prompting(output)
        if language == "java":
            return parse_java(text[1:-1])
        if language == "javascript":
            return parse_javascript(text[1:-1])
        return decode.parse_python(text)
    except decode.DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the official callers catch every exception of the decoder
        raise decode.DecodeError(f"{type(exc).__name__}: {exc}") from None


def decode_execute(output: Any) -> list[str]:
    """The handler's ``decode_execute``: call strings for the multi-turn executor.

    Raises:
        decode.DecodeError: wherever the official decoder raises.
    """
    try:
        if decode.is_tool_call_list(output) or isinstance(output, dict):
            return decode.decode_execute_fc(output)
        if not isinstance(output, str):
            raise decode.DecodeError(f"the step is a {type(output).__name__}, not a text or a list of tool calls")
        return decode.execution_list(decode.parse_python(decode.strip_prompting(output)))
    except decode.DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the official callers catch every exception of the decoder
        raise decode.DecodeError(f"{type(exc).__name__}: {exc}") from None


def is_function_calling_format_output(decoded: Any) -> bool:
    """``[{name: {param: value}}, ...]`` (``[]`` included)."""
    if type(decoded) is not list:
        return False
    for item in decoded:
        if type(item) is not dict or len(item) != 1 or type(list(item.values())[0]) is not dict:
            return False
    return True


def is_empty_output(decoded: Any) -> bool:
    """No call: not in the call format, ``[]``, or ``[{}]``."""
    if not is_function_calling_format_output(decoded):
        return True
    return len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)


def check_ast(output: Any, functions: list[dict[str, Any]], possible_answer: list[Any], category: str,
              language: str) -> dict[str, Any]:
    """A single-turn item with possible answers (``_evaluate_single_ast_entry``).

    Args:
        output: the solution's output (text or tool calls).
        functions: the item's function docs as in the data.
        possible_answer: its ``ground_truth``.
        category: its category; language: ``python``, ``java`` or ``javascript``.
    """
    try:
        decoded = decode_ast(output, language)
    except decode.DecodeError as exc:
        return {"valid": False, "error": [f"Invalid syntax. Failed to decode AST. {exc}"],
                "error_type": "ast_decoder:decoder_failed"}
    if not is_function_calling_format_output(decoded):
        return {"valid": False, "error": ["Did not output in the specified format."],
                "error_type": "ast_decoder:decoder_wrong_output_format"}
    try:
        verdict = ast_checker(functions, decoded, possible_answer, language, category,
                              underscore_to_dot=decode.is_tool_call_list(output))
    except Exception as exc:  # noqa: BLE001 - where the official checker raises, its run stops; the item is wrong
        return {"valid": False, "error": [f"the official checker raises here: {type(exc).__name__}: {exc}"],
                "error_type": "ast_checker:raised"}
    if verdict["valid"]:
        return {"valid": True, "error": [], "error_type": ""}
    return {"valid": False, "error": verdict.get("error", []), "error_type": verdict.get("error_type", "")}


def check_relevance(output: Any, category: str) -> dict[str, Any]:
    """A relevance or irrelevance item (``_evaluate_single_relevance_entry``): irrelevance passes when the output
    holds no call (it does not decode as Python calls, or decodes to none), relevance when it holds one."""
    try:
        contains_call = not is_empty_output(decode_ast(output, "python"))
    except decode.DecodeError:
        contains_call = False
    if "irrelevance" in category:
        if contains_call:
            return {"valid": False, "error": ["Valid syntax. Successfully decode AST when it should not."],
                    "error_type": "irrelevance_error:decoder_success"}
    elif not contains_call:
        return {"valid": False, "error": ["Invalid syntax. Failed to decode AST when it should have."],
                "error_type": "relevance_error:decoder_failed"}
    return {"valid": True, "error": [], "error_type": ""}


def check_multi_turn(output: Any, ground_truth: list[list[str]], entry: dict[str, Any]) -> dict[str, Any]:
    """A multi-turn item (``_evaluate_single_multi_turn_entry``): decode every step (a step that does not decode,
    or decodes to no call, is skipped), then :func:`multi_turn_checker`.

    Args:
        output: per turn, the list of the model's step outputs.
        ground_truth: per turn, the ground truth's call strings.
        entry: the item's ``id``, ``initial_config`` and ``involved_classes``.
    """
    if type(output) is not list:
        return {"valid": False, "error": ["Error during inference phase. Model did not output a list of model "
                                          "responses."], "error_type": "multi_turn:inference_error"}
    if len(output) != len(ground_truth):
        return {"valid": False,
                "error": [f"Model was force-terminated during inference phase. The length of the model result turns "
                          f"({len(output)}) does not match the length of the ground truth turns "
                          f"({len(ground_truth)})."],
                "error_type": "multi_turn:force_terminated"}
    decoded_turns: list[list[list[str]]] = []
    for turn in output:
        if not isinstance(turn, (list, tuple, str)):
            return {"valid": False, "error": [f"a turn is a {type(turn).__name__}, not a list of step outputs"],
                    "error_type": "multi_turn:inference_error"}
        steps = []
        # A text in place of a turn's list is read character by character, as the official loop reads it.
        for step in turn:
            try:
                calls = decode_execute(step)
            except decode.DecodeError:
                continue
            if not is_empty_execute_response(calls):
                steps.append(calls)
        decoded_turns.append(steps)
    verdict = multi_turn_checker(decoded_turns, ground_truth, entry)
    if verdict["valid"]:
        return {"valid": True, "error": [], "error_type": ""}
    return {"valid": False, "error": [verdict["error_message"]], "error_type": verdict["error_type"],
            "details": verdict.get("details", {})}
