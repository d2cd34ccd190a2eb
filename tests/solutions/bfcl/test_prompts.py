"""What the ``bfcl`` solution sends equals what BFCL's own handlers send (``bfcl-eval`` 2026.3.23): the default
system prompt and the tool schemas of every offline item, and the messages of multi-turn items."""

from __future__ import annotations

import copy
import json

from runner.solutions.bfcl.prompts import (
    additional_functions_message,
    convert_to_tool,
    execution_results_message,
    with_system_prompt,
)


def test_system_prompts_and_tool_schemas_are_bfcls_own_for_every_item(bfcl_tasks, reference_scorer) -> None:
    utils = reference_scorer.model_handler_utils
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    checked, seen = 0, set()
    for tasks in bfcl_tasks.values():
        for task in tasks:
            functions = task.input["functions"]
            first_turn = task.input["question"][0]
            checked += 1
            # Live items share function docs (the middle number of their ids): each distinct one is checked once.
            key = json.dumps([functions, first_turn[0] if first_turn[0]["role"] == "system" else None,
                              task.input.get("missed_function")])
            if key in seen:
                continue
            seen.add(key)
            official = utils.system_prompt_pre_processing_chat_model(copy.deepcopy(first_turn),
                                                                      copy.deepcopy(functions), task.id)
            assert with_system_prompt(first_turn, functions) == official, task.id
            tools = utils.convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
            assert convert_to_tool(functions) == tools, task.id
            for added in task.input.get("missed_function", {}).values():
                assert convert_to_tool(functions + added) == utils.convert_to_tool(
                    functions + added, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
    assert checked == 4441 and len(seen) > 2000


def test_multi_turn_messages_are_bfcls_own(bfcl_tasks, reference_scorer) -> None:
    from bfcl_eval.constants import default_prompts

    utils = reference_scorer.model_handler_utils
    results, calls = ["file.txt", "Error during execution: boom"], ["ls(a=True)", "cd(folder='x')"]
    official = utils.format_execution_results_prompting({}, results, {"model_responses_decoded": calls})
    assert execution_results_message(results, calls) == {"role": "user", "content": official}
    added = bfcl_tasks["multi_turn_miss_func"][0].input["missed_function"]["3"]
    assert additional_functions_message(added, native=False)["content"] == \
        default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=added)
    assert additional_functions_message(added, native=True)["content"] == \
        default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
