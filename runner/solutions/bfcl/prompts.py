"""BFCL's inference formats: the default system prompt of prompting mode, the function-doc to tool-schema conversion
of function-calling mode, and the messages of multi-turn items.

Ports from ``bfcl-eval`` 2026.3.23:

- :func:`system_prompt`: ``formulate_system_prompt`` (``bfcl_eval/model_handler/utils.py``) with
  ``DEFAULT_SYSTEM_PROMPT_FORMAT`` (``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&
  style=classic``) and the templates of ``bfcl_eval/constants/default_prompts.py``, word for word (the persona and
  the task are joined without a space, as there);
- :func:`with_system_prompt`: ``system_prompt_pre_processing_chat_model`` (prepended to a system message the item
  has, else a new first message);
- :func:`convert_to_tool`: ``convert_to_tool`` with ``GORILLA_TO_OPENAPI`` for ``ModelStyle.OPENAI_COMPLETIONS``
  (the style of every OpenAI-compatible server): ``.`` in names becomes ``_``, BFCL's types become JSON-schema
  types (``float`` as ``number`` with a note, Java's and JavaScript's as theirs, unknown ones as ``string``);
- :func:`execution_results_message`: ``format_execution_results_prompting``, and the prompts for functions added
  in a later turn (``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC`` and ``..._PROMPTING``).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

MAXIMUM_STEP_LIMIT = 20
"""Steps per turn after which a multi-turn run is forced to stop (``MAXIMUM_STEP_LIMIT``)."""

PERSONA = "You are an expert in composing functions."
TASK = ("You are given a question and a set of possible functions. Based on the question, you will need to make one "
        "or more function/tool calls to achieve the purpose. If none of the functions can be used, point it out. If "
        "the given question lacks the parameters required by the function, also point it out.")
OUTPUT_FORMAT = "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
TOOL_CALL_FORMAT = ("You should only return the function calls in your response.\n\nIf you decide to invoke any of the "
                    f"function(s), you MUST put it in the format of {OUTPUT_FORMAT}.  You SHOULD NOT include any other "
                    "text in the response.")
MULTITURN_BEHAVIOR = ("At each turn, you should try your best to complete the tasks requested by the user within the "
                      "current turn. Continue to output functions to call until you have fulfilled the user's request "
                      "to the best of your ability. Once you have no more functions to call, the system will consider "
                      "the current turn complete and proceed to the next turn or task.")
AVAILABLE_TOOLS = "Here is a list of functions in json format that you can invoke.\n{functions}\n"

ADDITIONAL_FUNCTION_FC = "I have updated some more functions you can choose from. What about now?"
ADDITIONAL_FUNCTION_PROMPTING = "{functions}\n" + ADDITIONAL_FUNCTION_FC

GORILLA_TO_OPENAPI: dict[str, str] = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}
"""``bfcl_eval/constants/type_mappings.py``'s ``GORILLA_TO_OPENAPI``."""


def system_prompt(functions: list[dict[str, Any]]) -> str:
    """BFCL's default system prompt for prompting mode, with ``functions`` as indented JSON."""
    available = AVAILABLE_TOOLS.format(functions=json.dumps(functions, indent=4))
    return f"{PERSONA}{TASK}\n\n{TOOL_CALL_FORMAT}\n\n{MULTITURN_BEHAVIOR}\n\n{available}"


def with_system_prompt(messages: list[dict[str, Any]], functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a turn's ``messages`` with the system prompt first (joined to the item's own system message)."""
    messages = copy.deepcopy(messages)
    prompt = system_prompt(functions)
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = prompt + "\n\n" + messages[0]["content"]
    else:
        messages.insert(0, {"role": "system", "content": prompt})
    return messages


def _cast_to_openai_type(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    for key, value in properties.items():
        if "type" not in value:
            properties[key]["type"] = "string"
        else:
            var_type = value["type"]
            if mapping is GORILLA_TO_OPENAPI and var_type == "float":
                properties[key]["format"] = "float"
                properties[key]["description"] += " This is a float type value."
            properties[key]["type"] = mapping.get(var_type, "string")
        if properties[key]["type"] in ("array", "object"):
            if "properties" in properties[key]:
                properties[key]["properties"] = _cast_to_openai_type(properties[key]["properties"], mapping)
            elif "items" in properties[key]:
                items = properties[key]["items"]
                items["type"] = mapping[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = mapping[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"], mapping)
    return properties


def convert_to_tool(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function docs as OpenAI tools (``convert_to_tool(functions, GORILLA_TO_OPENAPI,
    ModelStyle.OPENAI_COMPLETIONS)``).

    Raises:
        KeyError: an item type the mapping does not know (the official conversion raises too).
    """
    tools = []
    for item in copy.deepcopy(functions):
        if "." in item["name"]:
            item["name"] = re.sub(r"\.", "_", item["name"])
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast_to_openai_type(item["parameters"]["properties"], GORILLA_TO_OPENAPI)
        tools.append({"type": "function", "function": item})
    return tools


def additional_functions_message(functions: list[dict[str, Any]], native: bool) -> dict[str, str]:
    """The user message of a turn that adds held-out functions (in prompting mode it lists them, as Python's
    ``str`` of the list, as BFCL writes them)."""
    if native:
        return {"role": "user", "content": ADDITIONAL_FUNCTION_FC}
    return {"role": "user", "content": ADDITIONAL_FUNCTION_PROMPTING.format(functions=functions)}


def execution_results_message(results: list[str], calls: list[str]) -> dict[str, str]:
    """Prompting mode's message after a step: a user message holding ``repr`` of the tool results
    (``format_execution_results_prompting``)."""
    tool_results = [{"role": "tool", "name": call, "content": result} for result, call in zip(results, calls)]
    return {"role": "user", "content": repr(tool_results)}
