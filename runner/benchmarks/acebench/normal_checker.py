"""Scoring of the normal categories: is a model's call list right for one turn?

``official`` reproduces the authors' checker (``model_eval/checker.py``: ``normal_checker``,
``simple_function_checker``, ``type_checker``, ``string_checker``, ``list_checker``, ``dict_checker``,
``list_dict_checker``; ``model_eval/utils.py``: ``standardize_string``, ``find_description``,
``get_possible_answer_type``; fork zeppombal/ACEBench at c9391d0, identical in yxli2123/ACEBench at 110e99e), quirks
included; each quirk is named where it happens. ``strict`` keeps the structure and fixes what the official checker
lets through (see ``docs/acebench.md``, "Official versus strict").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from runner.benchmarks.acebench.calls import Call

# The authors' PYTHON_TYPE_MAPPING: a schema type unknown to it raises KeyError there (the run stops); here the
# turn is scored wrong. "enum" maps to the builtin ``enumerate``, so no value ever has that type.
TYPE_MAPPING: dict[str, Any] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict,
    "any": str, "list": list, "object": dict, "objectArray": list, "list(string)": list, "list(enum)": list,
    "int": int, "enum": enumerate, "number": int,
}
NESTED_TYPES = ("array", "tuple", "list(string)", "list(enum)", "object", "objectArray")
_SUFFIX = re.compile(r"_\d+$")
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check: ``valid``, and when not, the authors' ``error_type`` and a message."""

    valid: bool
    error_type: str = ""
    error: str = ""


OK = Verdict(True)


def standardize(text: str) -> str:
    """The authors' ``standardize_string``: drop `` ,./-_*^``, lower-case, ``'`` becomes ``"``."""
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _bad(error_type: str, error: str) -> Verdict:
    return Verdict(False, error_type, error)


def check_calls(
    functions: list[dict[str, Any]],
    calls: list[Call],
    answer: dict[str, Any],
    category: str,
    strict: bool = False,
) -> Verdict:
    """Check decoded ``calls`` against one ground-truth candidate ``answer`` (``{function name: {param: value}}``,
    names possibly suffixed ``_1``, ``_2`` for repeated calls).

    Official rules (``normal_checker``): the number of calls, then the multiset of function names, must match; then
    every expected call must be matched by some call of the same name (several expected calls may be matched by
    the same model call). Strict: the matching is one to one.
    """
    if len(calls) != len(answer):
        return _bad("wrong functions number", "the number of functions does not match the answer")
    names = {f.get("name") for f in functions} if strict else set()
    expected = [(key, {call_name(key, names): value}) for key, value in answer.items()]
    produced = Counter(name for call in calls for name in call)
    wanted = Counter(name for _, call in expected for name in call)
    for name in produced:
        if name not in wanted:
            return _bad("function_mismatch", f"extra function detected: {name} is not in the ground truth")
    for name in wanted:
        if name not in produced:
            return _bad("function_mismatch", f"function {name} of the ground truth is missing")
    for name, count in produced.items():
        if count != wanted[name]:
            return _bad("function_mismatch", f"incorrect count for function {name}: expected {wanted[name]}, "
                                             f"actual {count}")
    used: set[int] = set()
    result = OK
    for original_key, expected_call in expected:
        name = next(iter(expected_call))
        description = _find_description(functions, name if strict else original_key, strict)
        for index, call in enumerate(calls):
            if strict and index in used:
                continue
            if next(iter(call)) == name:
                result = _simple_function_check(description, call, expected_call, category, strict)
                if result.valid:
                    used.add(index)
                    break
            else:
                result = _bad("simple_function_checker:unclear", "wrong_function")
        if not result.valid:
            return result
    return result


def call_name(key: str, function_names: set[str] | frozenset[str] = frozenset()) -> str:
    """The function a ground-truth key stands for: the key without a ``_<n>`` suffix (official rule, which also
    renames a function whose real name ends in ``_2``), or the key itself when it is one of ``function_names``
    (strict, and the reference answers)."""
    return key if key in function_names else _SUFFIX.sub("", key)


def _find_description(functions: list[dict[str, Any]], name: str, strict: bool) -> dict[str, Any] | None:
    """Official ``find_description``: the first function whose name is a substring of the ground-truth key
    (quirk: ``get`` matches ``get_weather`` when listed first). Strict: the function of exactly that name."""
    for function in functions:
        if (function.get("name") == name) if strict else (function.get("name", "") in name):
            return function
    return None


def _simple_function_check(
    description: dict[str, Any] | None, call: Call, expected: Call, category: str, strict: bool
) -> Verdict:
    if description is None:
        # The authors' code raises TypeError here (no schema for the expected function).
        return _bad("wrong_function", "no function schema matches the expected function")
    params_schema = description.get("parameters") or {}
    model_params = next(iter(call.values()))
    answer = next(iter(expected.values()))
    if strict:
        if model_params == {} and answer == {}:
            return OK
    else:
        # Quirk: a call without arguments passes only when the schema's "parameters" is itself empty.
        if model_params == {} and description.get("parameters") == {}:
            return OK
        if model_params == {} or description.get("parameters") == {}:
            return _bad("wrong_param", "empty arguments")
        # Quirk: the ground truth equal to the schema's properties passes whatever the arguments.
        if answer == params_schema.get("properties"):
            return OK
        if answer == {}:
            return _bad("wrong_param", "empty ground truth")
    func_name = description.get("name")
    if func_name not in call:
        return _bad("wrong_function_name", f"expected {func_name}, got {next(iter(call))}")
    properties = params_schema.get("properties") or {}
    for param in params_schema.get("required") or []:
        if param not in model_params:
            return _bad("lack_args", f"lack required_params: {param}")
    for param, value in model_params.items():
        if param not in properties or param not in answer:
            return _bad("addition_args", f"addition params: {param}")
        verdict = _check_param(param, value, answer[param], properties[param], func_name, category, strict)
        if not verdict.valid:
            return verdict
    return OK


def _check_param(param: str, value: Any, expected: Any, schema: dict[str, Any], func_name: str, category: str,
                 strict: bool) -> Verdict:
    type_name = schema.get("type")
    if type_name not in TYPE_MAPPING:
        return _bad("type_error", f"unknown schema type {type_name!r} for parameter {param}")
    python_type = TYPE_MAPPING[type_name]
    nested_type = None
    if type_name in NESTED_TYPES:
        items = schema.get("items")
        nested_name = items.get("type") if isinstance(items, dict) and "type" in items else (
            "string" if "string" in type_name else "enum" if "enum" in type_name else "dict")
        if nested_name not in TYPE_MAPPING:
            return _bad("type_error", f"unknown item type {nested_name!r} for parameter {param}")
        nested_type = TYPE_MAPPING[nested_name]
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:
        value = float(value)
    if strict:
        return _strict_check(param, value, expected, python_type, func_name)
    verdict, is_variable = _type_check(param, value, expected, python_type, nested_type, func_name)
    if not verdict.valid:
        return verdict
    if is_variable:
        # Quirk: a value whose type differs from the schema's but matches the ground truth's is not value-checked.
        return OK
    if python_type is dict:
        return _dict_check(param, value, expected, func_name)
    if python_type is list and nested_type is dict:
        if type_name == "objectArray":
            # The authors' branch calls dict_checker with a missing argument and raises; no data reaches it.
            return _bad("value_error:dict_items", "objectArray parameters are not checkable")
        return _list_dict_check(param, value, expected, func_name)
    if python_type is str:
        return _string_check(param, value, expected, func_name, category)
    if python_type is list:
        return _list_check(param, value, expected, func_name)
    # int, float, bool and enum values are never compared in the official checker.
    return OK


def _strict_check(param: str, value: Any, expected: Any, python_type: Any, func_name: str) -> Verdict:
    """Strict: the value has the schema's type or the ground truth's (an enum is a string), then it must equal the
    ground truth by :func:`_strict_equal` whatever its type."""
    if value in ("true", "false"):
        value = value == "true"
    allowed = {str if python_type is enumerate else python_type}
    if _answer_type(expected) is not None:
        allowed.add(type(expected))
    if type(value) not in allowed and value != expected:
        return _bad("type_error", f"wrong type for parameter ({param}) of api ({func_name}): got "
                                  f"{type(value).__name__}")
    if _strict_equal(value, expected):
        return OK
    return _bad("value_error", f"wrong value for parameter ({param}) of api ({func_name}): expected "
                               f"{expected!r}, got {value!r}")


def _answer_type(expected: Any) -> type | None:
    """The authors' ``get_possible_answer_type``: ``None`` for ``""`` (an optional parameter)."""
    return type(expected) if expected != "" else None


def _type_check(param: str, value: Any, expected: Any, python_type: Any, nested_type: Any,
                func_name: str) -> tuple[Verdict, bool]:
    """The authors' ``type_checker``; returns the verdict and ``is_variable`` (skip the value check)."""
    answer_type = _answer_type(expected)
    is_variable = answer_type is not None and answer_type != python_type
    if value == "true":
        value = True
    if value == "false":
        value = False
    verdict = OK
    if type(value) == python_type:  # noqa: E721 - exact type, as the authors compare
        if nested_type is None:
            return OK, is_variable
        for item in expected if _iterable(expected) else []:
            if type(item) is list and not all(
                _type_check(param, element, item, nested_type, None, func_name)[0].valid for element in value
            ):
                continue
            return OK, is_variable
        # Quirk: an empty ground-truth list or dict fails here, and the failure is kept below.
        verdict = _bad("type_error", f"nested type checking failed for parameter {param}")
    if answer_type is not None and (type(value) == answer_type or expected == value):  # noqa: E721
        return verdict, True
    return _bad("type_error", f"wrong type for parameter ({param}) of api ({func_name}): expected "
                              f"{getattr(python_type, '__name__', python_type)}, got {type(value).__name__}"), is_variable


def _iterable(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict, str, set))


def _string_check(param: str, value: str, expected: Any, func_name: str, category: str) -> Verdict:
    """Official: the standardized ground truth must be contained in the standardized value (equal for agent)."""
    if not isinstance(expected, str):
        return _bad("value_error:string", f"ground truth of {param} is not a string")
    model, gold = standardize(value), standardize(expected)
    if (model != gold) if "agent" in category else (gold not in model):
        return _bad("value_error:string", f"wrong value for parameter ({param}) of api ({func_name}): expected "
                                          f"{expected!r}, got {value!r}")
    return OK


def _list_check(param: str, value: list[Any], expected: Any, func_name: str) -> Verdict:
    """Official: element-wise equality after standardizing string elements (order matters)."""
    model = [standardize(v) if type(v) is str else v for v in value]
    gold = [standardize(v) if type(v) is str else v for v in (expected if _iterable(expected) else [expected])]
    if model != gold:
        return _bad("value_error:list/tuple", f"wrong value for parameter ({param}) of api ({func_name}): "
                                              f"expected {expected!r}, got {value!r}")
    return OK


def _dict_check(param: str, value: Any, expected: Any, func_name: str) -> Verdict:
    """Official ``dict_checker``: same number of keys, every key expected, nested dicts recursed, other values
    compared as ``str(standardized expected) in str(standardized value)`` (so ``5`` matches ``15``)."""
    message = f"wrong value for parameter ({param}) of api ({func_name}): expected {expected!r}, got {value!r}"
    if not isinstance(value, dict):
        return _bad("value_error", message)
    if not isinstance(expected, dict):
        # The authors' code raises AttributeError here.
        return _bad("value_error", message)
    if len(value) != len(expected):
        return _bad("value_error", message)
    for key, item in value.items():
        if item == "true":
            item = True
        if item == "false":
            item = False
        if key not in expected:
            return _bad("value_error", message)
        gold = expected[key]
        if isinstance(gold, dict):
            verdict = _dict_check(param, item, gold, func_name)
            if not verdict.valid:
                return verdict
            continue
        model_text = standardize(item) if type(item) is str else item
        gold_text = standardize(gold) if type(gold) is str else gold
        if str(gold_text) not in str(model_text):
            return _bad("value_error", message)
    return OK


def _list_dict_check(param: str, value: list[Any], expected: Any, func_name: str) -> Verdict:
    """Official ``list_dict_checker``: same length, element ``i`` checked by :func:`_dict_check` against ``i``."""
    if not isinstance(expected, list) or len(value) != len(expected):
        return _bad("value_error:list_dict_count", f"wrong number of items for parameter ({param}) of api "
                                                   f"({func_name})")
    for item, gold in zip(value, expected):
        verdict = _dict_check(param, item, gold, func_name)
        if not verdict.valid:
            return verdict
    return OK


def _strict_equal(value: Any, expected: Any) -> bool:
    """Strict value equality: strings equal after :func:`standardize`; numbers equal (``5 == 5.0``, relative
    tolerance 1e-9); booleans equal (``"true"``/``"false"`` read as booleans); lists element-wise in order; dicts
    key by key with the same keys; a number and its decimal text are equal (``"5" == 5``)."""
    if value in ("true", "false"):
        value = value == "true"
    if expected in ("true", "false"):
        expected = expected == "true"
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(value, (int, float)) and isinstance(expected, (int, float)):
        return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(value, (int, float)) and isinstance(expected, str):
        return standardize(expected) == standardize(_number_text(value))
    if isinstance(value, str) and isinstance(expected, (int, float)):
        return standardize(value) == standardize(_number_text(expected))
    if isinstance(value, str) and isinstance(expected, str):
        return standardize(value) == standardize(expected)
    if isinstance(value, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(value) == len(expected) and all(_strict_equal(v, e) for v, e in zip(value, expected))
    if isinstance(value, dict) and isinstance(expected, dict):
        return value.keys() == expected.keys() and all(_strict_equal(value[k], expected[k]) for k in expected)
    return bool(value == expected)


def _number_text(number: float) -> str:
    return str(int(number)) if isinstance(number, float) and number.is_integer() else str(number)
