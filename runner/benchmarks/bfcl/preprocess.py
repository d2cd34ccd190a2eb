"""What BFCL does to an item before a model sees it, and before its checker reads it.

Ports of ``populate_test_cases_with_predefined_functions``, ``_func_doc_language_specific_pre_processing`` and
``add_language_specific_hint_to_function_doc`` (``bfcl_eval/utils.py``, ``bfcl-eval`` 2026.3.23):

- multi-turn items get the function docs of their ``involved_classes`` (in that order), less the functions held
  out until a later turn (``missed_function``, in miss_func), which move to that turn;
- for the model, each function's description gets a note on its language, and Java and JavaScript parameters
  become strings described by their type (the model writes typed values as text, which the checker converts back).
  The held-out functions of miss_func keep their docs unchanged, as they leave the list before the notes are added.

The checker reads the docs as they are in the data (the official evaluator loads items with
``include_language_specific_hint=False``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from runner.benchmarks.bfcl.categories import is_java, is_javascript


def language_hint(category: str) -> str:
    """The sentence added to each function description (``_get_language_specific_hint``)."""
    if is_java(category):
        return " Note that the provided function is in Java 8 SDK syntax."
    if is_javascript(category):
        return " Note that the provided function is in JavaScript syntax."
    return " Note that the provided function is in Python 3 syntax."


def with_language_hints(functions: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """A copy of ``functions`` as the model sees them (``_func_doc_language_specific_pre_processing``)."""
    functions = copy.deepcopy(functions)
    for item in functions:
        item["description"] = item["description"] + language_hint(category)
        properties = item["parameters"]["properties"]
        if is_java(category):
            for value in properties.values():
                if value["type"] == "any":
                    value["description"] += (" This parameter can be of any type of Java object in string "
                                             "representation.")
                else:
                    value["description"] += f" This is Java {value['type']} type parameter in string representation."
                if value["type"] in ("ArrayList", "Array"):
                    value["description"] += (f" The list elements are of type {value['items']['type']}; they are not "
                                             "in string representation.")
                    del value["items"]
                value["type"] = "string"
        elif is_javascript(category):
            for value in properties.values():
                if value["type"] == "any":
                    value["description"] += (" This parameter can be of any type of JavaScript object in string "
                                             "representation.")
                else:
                    value["description"] += (f" This is JavaScript {value['type']} type parameter in string "
                                             "representation.")
                if value["type"] == "array":
                    value["description"] += (f" The list elements are of type {value['items']['type']}; they are not "
                                             "in string representation.")
                    del value["items"]
                if value["type"] == "dict" and "properties" in value:
                    value["description"] += (" The dictionary entries have the following schema; they are not in "
                                             f"string representation. {json.dumps(value['properties'])}")
                    del value["properties"]
                value["type"] = "string"
    return functions


def multi_turn_functions(entry: dict[str, Any], docs: dict[str, list[dict[str, Any]]]
                         ) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The function docs of a multi-turn item and those held out per turn
    (``populate_test_cases_with_predefined_functions``).

    Args:
        entry: the item (``involved_classes`` and, in miss_func, ``missed_function``: turn -> function names).
        docs: API class name -> its function docs.

    Returns:
        (the docs offered from the first turn, turn index as a string -> the docs added at that turn).
    """
    functions = [copy.deepcopy(doc) for name in entry["involved_classes"] for doc in docs[name]]
    missed: dict[str, list[dict[str, Any]]] = {}
    for turn, names in (entry.get("missed_function") or {}).items():
        missed[turn] = []
        for name in names:
            for index, doc in enumerate(functions):
                if doc["name"] == name:
                    missed[turn].append(doc)
                    functions.pop(index)
                    break
    return functions, missed
