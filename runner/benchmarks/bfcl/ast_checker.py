"""BFCL's AST checker: decoded calls against the possible answers of a single-turn item.

A port of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` (``ast_checker`` and its helpers) of ``bfcl-eval``
2026.3.23, rule for rule, returning the same verdicts, error types and messages:

- simple (and Java, JavaScript): exactly one call; ``multiple``: as many calls as answers (always one) and the first
  call checked against the expected function; ``parallel`` and ``parallel_multiple``: each expected call matched by
  a distinct output call, in any order;
- a call: its function name (``.`` becomes ``_`` in the expected name for function-calling output, as
  ``convert_func_name`` does for models whose config sets ``underscore_to_dot``), every required parameter present,
  no parameter the function or the answer does not have, each value of the right type and among the allowed
  values, and every answer parameter without ``""`` among its values present;
- types: Python's by the function doc (an ``int`` is accepted for a ``float``; a tuple compared as a list; one level
  of nested type checked for arrays); Java and JavaScript values must be strings, converted by the declared type
  (:mod:`.converters`); a value of the type of the possible answers rather than the declared one is read as a
  variable name and compared as such;
- strings compared after ``standardize_string`` (spaces and ``,./-_*^`` removed, lower case, ``'`` as ``"``), also
  inside lists and dicts; dicts key by key; lists of dicts in order.
"""

from __future__ import annotations

import re
from typing import Any

from runner.benchmarks.bfcl.converters import (
    JAVA_TYPE_CONVERSION,
    JS_TYPE_CONVERSION,
    java_type_converter,
    js_type_converter,
)

PYTHON_TYPE_MAPPING: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict,
    "any": str,
}
PYTHON_NESTED_TYPE_CHECK_LIST = ("array", "tuple")
NESTED_CONVERSION_TYPE_LIST = ("Array", "ArrayList", "array")

Verdict = dict[str, Any]
"""``{"valid": bool, "error": [messages], "error_type": str}`` as the package returns it."""


def ast_checker(functions: list[dict[str, Any]], output: list[dict[str, Any]], possible_answer: list[dict[str, Any]],
                language: str, category: str, underscore_to_dot: bool) -> Verdict:
    """``ast_checker``: dispatch on the category name (``parallel`` before ``multiple``).

    Args:
        functions: the item's function docs as in the data (no language hints).
        output: decoded calls, ``[{name: {param: value}}]``.
        possible_answer: the item's ground truth, ``[{name: {param: [allowed values]}}]``.
        language: ``python``, ``java`` or ``javascript``.
        category: the item's category.
        underscore_to_dot: expect ``_`` for ``.`` in function names (function-calling output).

    Raises:
        KeyError, ValueError, NotImplementedError: where the official checker raises (a type its tables do not
            know); the metric counts such an item as wrong, as the official run would stop on it.
    """
    if "parallel" in category:
        return parallel_function_checker_no_order(functions, output, possible_answer, language, underscore_to_dot)
    if "multiple" in category:
        return multiple_function_checker(functions, output, possible_answer, language, underscore_to_dot)
    if len(output) != 1:
        return {"valid": False, "error": ["Wrong number of functions."],
                "error_type": "simple_function_checker:wrong_count"}
    return simple_function_checker(functions[0], output[0], possible_answer[0], language, underscore_to_dot)


def find_description(functions: Any, name: str) -> Any:
    """The doc of function ``name`` (``None`` when absent; a single doc is returned as it is)."""
    if isinstance(functions, list):
        for function in functions:
            if function["name"] == name:
                return function
        return None
    return functions


def get_possible_answer_type(possible_answer: list[Any]) -> type | None:
    """The type of the first allowed value that is not ``""`` (the optional marker)."""
    for answer in possible_answer:
        if answer != "":
            return type(answer)
    return None


def convert_func_name(name: str, underscore_to_dot: bool) -> str:
    """``convert_func_name``: ``.`` to ``_`` for function-calling output, whose tool names cannot hold dots."""
    if "." in name and underscore_to_dot:
        return re.sub(r"\.", "_", name)
    return name


def type_checker(param: str, value: Any, possible_answer: list[Any], expected_type_description: str,
                 expected_type_converted: Any, nested_type_converted: Any) -> dict[str, Any]:
    """``type_checker``: the value's type against the declared type (one level of nesting), or a variable."""
    result: dict[str, Any] = {"valid": True, "error": [], "is_variable": False, "error_type": "type_error:simple"}
    is_variable = False
    possible_answer_type = get_possible_answer_type(possible_answer)
    if possible_answer_type is not None and possible_answer_type != expected_type_converted:
        is_variable = True

    if type(value) == expected_type_converted:  # noqa: E721 - exact type, as the original (bool is not int)
        if nested_type_converted is None:
            result["is_variable"] = is_variable
            return result
        for possible_answer_item in possible_answer:
            flag = True
            if type(possible_answer_item) == list:  # noqa: E721
                for value_item in value:
                    checker_result = type_checker(param, value_item, possible_answer_item,
                                                  str(nested_type_converted), nested_type_converted, None)
                    if not checker_result["valid"]:
                        flag = False
                        break
            if flag:
                return {"valid": True, "error": [], "is_variable": is_variable}
        result["valid"] = False
        result["error"] = [
            f"Nested type checking failed for parameter {param!r}. Expected outer type {expected_type_description} "
            f"with inner type {nested_type_converted!s}. Parameter value: {value!r}."
        ]
        result["error_type"] = "type_error:nested"

    possible_answer_type = get_possible_answer_type(possible_answer)
    if possible_answer_type is not None and type(value) == possible_answer_type:  # noqa: E721
        result["is_variable"] = True
        return result

    result["valid"] = False
    result["error"].append(
        f"Incorrect type for parameter {param!r}. Expected type {expected_type_description}, got "
        f"{type(value).__name__}. Parameter value: {value!r}."
    )
    result["error_type"] = "type_error:simple"
    return result


def standardize_string(text: str) -> str:
    """``standardize_string``: remove spaces and ``,./-_*^``, lower-case, ``'`` to ``"``."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def string_checker(param: str, model_output: str, possible_answer: list[Any]) -> dict[str, Any]:
    """``string_checker``: the standardised string among the standardised allowed strings."""
    allowed = [standardize_string(answer) for answer in possible_answer if type(answer) == str]  # noqa: E721
    if standardize_string(model_output) not in allowed:
        return {"valid": False,
                "error": [f"Invalid value for parameter {param!r}: {model_output!r}. Expected one of "
                          f"{possible_answer}. Case insensitive."],
                "error_type": "value_error:string"}
    return {"valid": True, "error": []}


def list_checker(param: str, model_output: list[Any], possible_answer: list[Any]) -> dict[str, Any]:
    """``list_checker``: the list (strings standardised) among the allowed lists."""
    standardized = [standardize_string(item) if type(item) == str else item  # noqa: E721
                    for item in list(model_output)]
    allowed = [[standardize_string(item) if type(item) == str else item for item in answer]  # noqa: E721
               for answer in possible_answer]
    if standardized not in allowed:
        return {"valid": False,
                "error": [f"Invalid value for parameter {param!r}: {model_output!r}. Expected one of "
                          f"{possible_answer}."],
                "error_type": "value_error:list/tuple"}
    return {"valid": True, "error": []}


def dict_checker(param: str, model_output: dict[Any, Any], possible_answers: list[Any]) -> dict[str, Any]:
    """``dict_checker``: one allowed dict whose keys cover the output's and whose values allow each value."""
    result: dict[str, Any] = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
    for possible_answer in possible_answers:
        if possible_answer == "":
            continue
        result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
        flag = True
        for key, value in model_output.items():
            if key not in possible_answer:
                result["valid"] = False
                result["error"].append(f"Unexpected dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
            standardized = standardize_string(value) if type(value) == str else value  # noqa: E721
            allowed = [standardize_string(item) if type(item) == str else item  # noqa: E721
                       for item in possible_answer[key]]
            if standardized not in allowed:
                result["valid"] = False
                result["error"].append(f"Invalid value for parameter {key!r}: {value!r}. Expected one of {allowed}.")
                result["error_type"] = "value_error:dict_value"
                flag = False
                break
        for key, value in possible_answer.items():
            if key not in model_output and "" not in value:
                result["valid"] = False
                result["error"].append(f"Missing dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def list_dict_checker(param: str, model_output: list[Any], possible_answers: list[Any]) -> dict[str, Any]:
    """``list_dict_checker``: the dicts of the list in order against one allowed list of dicts."""
    result: dict[str, Any] = {"valid": False, "error": [], "error_type": "list_dict_checker:unclear"}
    for answer in possible_answers:
        flag = True
        if len(model_output) != len(answer):
            result["valid"] = False
            result["error"] = ["Wrong number of dictionaries in the list."]
            result["error_type"] = "value_error:list_dict_count"
            flag = False
            continue
        for index in range(len(model_output)):
            result = dict_checker(param, model_output[index], [answer[index]])
            if not result["valid"]:
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def simple_function_checker(function: dict[str, Any], model_output: dict[str, Any], possible_answer: dict[str, Any],
                            language: str, underscore_to_dot: bool) -> dict[str, Any]:
    """``simple_function_checker``: one output call against one expected call (the official function, its
    per-parameter steps in :func:`_typed_value` and :func:`_parameter_checker`)."""
    possible_answer = list(possible_answer.values())[0]
    func_name = function["name"]
    param_details = function["parameters"]["properties"]
    required_params = function["parameters"]["required"]
    result: dict[str, Any] = {"valid": True, "error": [], "error_type": "simple_function_checker:unclear"}

    func_name = convert_func_name(func_name, underscore_to_dot)
    if func_name not in model_output:
        result["valid"] = False
        result["error"].append(f"Function name {func_name!r} not found in model output.")
        result["error_type"] = "simple_function_checker:wrong_func_name"
        return result
    model_params = model_output[func_name]

    for param in required_params:
        if param not in model_params:
            result["valid"] = False
            result["error"].append(f"Missing required parameter: {param!r}.")
            result["error_type"] = "simple_function_checker:missing_required"
            return result

    for param, value in model_params.items():
        if param not in param_details or param not in possible_answer:
            result["valid"] = False
            result["error"].append(f"Unexpected parameter: {param!r}.")
            result["error_type"] = "simple_function_checker:unexpected_param"
            return result
        result, stop = _parameter_checker(param, value, param_details[param], possible_answer[param], language,
                                          result)
        if stop:
            return result

    for param in possible_answer:
        if param not in model_params and "" not in possible_answer[param]:
            result["valid"] = False
            result["error"].append(f"Optional parameter {param!r} not provided and not marked as optional.")
            result["error_type"] = "simple_function_checker:missing_optional"
            return result
    return result


def _failed(result: dict[str, Any], message: str, error_type: str) -> dict[str, Any]:
    """``result`` marked invalid with ``message`` added, as the official checker marks the result it holds."""
    result["valid"] = False
    result["error"].append(message)
    result["error_type"] = error_type
    return result


def _typed_value(param: str, value: Any, details: dict[str, Any],
                 language: str) -> tuple[Any, Any, Any] | tuple[str, str]:
    """The official checker's per-language step for one parameter: ``(value, expected type, nested type)``, the
    value converted from a Java or JavaScript string; or ``(message, error type)`` when a Java or JavaScript value
    is no string.

    Raises:
        ValueError: an unsupported language (as the official checker raises).
    """
    expected_type_description = details["type"]
    nested_type_converted = None
    if language in ("java", "javascript"):
        conversion, converter, tag = ((JAVA_TYPE_CONVERSION, java_type_converter, "java") if language == "java"
                                      else (JS_TYPE_CONVERSION, js_type_converter, "js"))
        expected_type_converted = conversion[expected_type_description]
        if type(value) != str:  # noqa: E721
            return (f"Incorrect type for parameter {param!r}. Expected type String, got {type(value).__name__}. "
                    f"Parameter value: {value!r}.", f"type_error:{tag}")
        if expected_type_description in NESTED_CONVERSION_TYPE_LIST:
            nested_type = details["items"]["type"]
            nested_type_converted = conversion[nested_type]
            value = converter(value, expected_type_description, nested_type)
        else:
            value = converter(value, expected_type_description)
    elif language == "python":
        expected_type_converted = PYTHON_TYPE_MAPPING[expected_type_description]
        if expected_type_description in PYTHON_NESTED_TYPE_CHECK_LIST:
            nested_type = details["items"]["type"]
            nested_type_converted = PYTHON_TYPE_MAPPING[nested_type]
    else:
        raise ValueError(f"Unsupported language: {language}")
    return value, expected_type_converted, nested_type_converted


def _parameter_checker(param: str, value: Any, details: dict[str, Any], possible: list[Any], language: str,
                       result: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The official checker's loop body for one parameter, with the call's ``result`` so far: ``(result, stop)``,
    ``stop`` when the parameter fails (the result says why); a passed dict, list or string check becomes the
    call's result, as in the official code."""
    typed = _typed_value(param, value, details, language)
    if len(typed) == 2:
        return _failed(result, *typed), True
    value, expected_type_converted, nested_type_converted = typed
    expected_type_description = details["type"]
    if expected_type_description == "tuple" and type(value) == tuple:  # noqa: E721
        value = list(value)
    if language == "python" and expected_type_description == "float" and type(value) == int:  # noqa: E721
        value = float(value)

    type_check_result = type_checker(param, value, possible, expected_type_description,
                                     expected_type_converted, nested_type_converted)
    if not type_check_result["valid"]:
        return type_check_result, True
    if not type_check_result["is_variable"]:
        checker = None
        if expected_type_converted == dict:
            checker = dict_checker
        elif expected_type_converted == list and nested_type_converted == dict:
            checker = list_dict_checker
        elif expected_type_converted == str:
            checker = string_checker
        elif expected_type_converted == list:
            checker = list_checker
        if checker is not None:
            checked = checker(param, value, possible)
            return checked, not checked["valid"]
    if value not in possible:
        return _failed(result, f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}.",
                       "value_error:others"), True
    return result, False


def parallel_function_checker_no_order(functions: list[dict[str, Any]], model_output: list[Any],
                                       possible_answers: list[Any], language: str,
                                       underscore_to_dot: bool) -> dict[str, Any]:
    """``parallel_function_checker_no_order``: each expected call, in order, takes the first unmatched output
    call that passes."""
    if len(model_output) != len(possible_answers):
        return {"valid": False, "error": ["Wrong number of functions."],
                "error_type": "parallel_function_checker_no_order:wrong_count"}
    matched_indices: list[int] = []
    result: dict[str, Any] = {}
    for i in range(len(possible_answers)):
        func_name_expected = list(possible_answers[i].keys())[0]
        function = find_description(functions, func_name_expected)
        all_errors: list[Any] = []
        for index in range(len(model_output)):
            if index in matched_indices:
                continue
            result = simple_function_checker(function, model_output[index], possible_answers[i], language,
                                             underscore_to_dot)
            if result["valid"]:
                matched_indices.append(index)
                break
            all_errors.append({f"Model Result Index {index}": {
                "sub_error": result["error"], "sub_error_type": result["error_type"],
                "model_output_item": model_output[index], "possible_answer_item": possible_answers[i]}})
        if not result["valid"]:
            considered = [j for j in range(len(model_output)) if j not in matched_indices]
            all_errors.insert(0, f"Could not find a matching function among index {considered} of model output "
                                 f"for index {i} of possible answers.")
            return {"valid": False, "error": all_errors,
                    "error_type": "parallel_function_checker_no_order:cannot_find_match"}
    return {"valid": True, "error": []}


def multiple_function_checker(functions: list[dict[str, Any]], model_output: list[Any], possible_answers: list[Any],
                              language: str, underscore_to_dot: bool) -> dict[str, Any]:
    """``multiple_function_checker``: as many calls as answers; the first call against the first answer."""
    if len(model_output) != len(possible_answers):
        return {"valid": False, "error": ["Wrong number of functions."],
                "error_type": "multiple_function_checker:wrong_count"}
    func_name_expected = list(possible_answers[0].keys())[0]
    function = find_description(functions, func_name_expected)
    return simple_function_checker(function, model_output[0], possible_answers[0], language, underscore_to_dot)
