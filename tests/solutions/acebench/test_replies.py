"""The ``acebench`` solution on normal and special tasks: one reply, scored by the official checker.

The model is the scripted OpenAI-compatible server on loopback (``tests/support/model_server.py``), which stands in
for a model server because no language model can run here; the prompts, the HTTP path, the parsing and the
scoring are the real ones.
"""

from __future__ import annotations

import json
import pickle

from runner.solutions.acebench import ACEBenchAgent
from runner.solutions.acebench.prompts import agent_system_prompt, single_reply_messages, user_simulator_prompt
from runner.benchmarks.acebench.reference import IRRELEVANT_REPLY, normal_reply, special_reply
from runner.registry import solution_spec
from tests.support.model_server import ScriptedModelServer


def agent_on(server: ScriptedModelServer, **options) -> ACEBenchAgent:
    return ACEBenchAgent("vllm:scripted", model_base_url=server.url, **options)


async def test_a_normal_task_answered_right_scores_1(ace_task, model_server: ScriptedModelServer) -> None:
    task = ace_task("normal_single_turn_single_function_0")
    gold = normal_reply(task.input["functions"], task.ground_truth)
    # A reasoning block holding another call list comes first: only the answer after it may be scored.
    model_server.set_policy([f"<think>Perhaps [wrong_api(x=1)]?</think>\nThe call: {gold}"])

    output = await agent_on(model_server)(task)

    [accuracy] = await task.evaluate(output)
    assert accuracy.result == 1.0
    assert output.output == f"The call: {gold}"
    assert output.trajectory[-1] == {"role": "assistant", "content": f"The call: {gold}",
                                     "reasoning": "Perhaps [wrong_api(x=1)]?"}
    system, user = model_server.chat_requests[0].messages
    assert json.dumps(task.input["functions"], ensure_ascii=False) in system["content"]
    assert task.input["time"] and task.input["time"] in system["content"]
    assert user["content"].endswith(task.input["question"])


async def test_a_wrong_call_scores_0(ace_task, model_server: ScriptedModelServer) -> None:
    task = ace_task("normal_atom_bool_0")
    model_server.set_policy(["[no_such_api(flag=True)]"])
    [accuracy] = await task.evaluate(await agent_on(model_server)(task))
    assert accuracy.result == 0.0


async def test_special_tasks_in_both_languages(ace_task, model_server: ScriptedModelServer) -> None:
    for task in (ace_task("special_incomplete_0"), ace_task("special_error_param_3", language="zh")):
        model_server.set_policy([special_reply(task.tags["category"], task.ground_truth)])
        [accuracy] = await task.evaluate(await agent_on(model_server)(task))
        assert accuracy.result == 1.0, task.id
    zh_prompt = model_server.chat_requests[-1].messages[0]["content"]
    assert "API说明" in zh_prompt  # the prompt is in the task's language...
    assert "There is incorrect value (value) for the parameters (key)" in zh_prompt  # ...the sentences in English

    incomplete = ace_task("special_incomplete_1")
    model_server.set_policy([IRRELEVANT_REPLY])
    [accuracy] = await incomplete.evaluate(await agent_on(model_server)(incomplete))
    assert accuracy.result == 0.0


def test_prompts_carry_what_the_task_gives(ace_task) -> None:
    preference = ace_task("normal_preference_0", language="zh")
    system, _ = single_reply_messages(preference.input)
    assert preference.input["profile"] in system["content"] and "个人资料" in system["content"]

    travel = ace_task("agent_multi_turn_20")
    text_prompt = agent_system_prompt(travel.input, native=False)
    assert "July 15, 2024" in text_prompt and "finish conversation" in text_prompt
    assert json.dumps(travel.input["functions"], ensure_ascii=False) in text_prompt
    native_prompt = agent_system_prompt(travel.input, native=True)
    assert "July 15, 2024" in native_prompt and '"name":' not in native_prompt  # the functions go as tools
    user_prompt = user_simulator_prompt(travel.input)
    assert user_prompt.endswith(travel.input["question"]) and "round-trip" in user_prompt

    phone_zh = ace_task("agent_multi_turn_0", language="zh")
    assert "2024年6月11日" in agent_system_prompt(phone_zh.input, native=False)
    assert "扮演" in user_simulator_prompt(phone_zh.input)


async def test_the_built_solution_and_a_task_survive_pickling(ace_task, model_server: ScriptedModelServer) -> None:
    spec = solution_spec("acebench", model="vllm:scripted", model_base_url=model_server.url,
                         args={"tool_calling": "native"})
    solution = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(spec)).build()))
    task = pickle.loads(pickle.dumps(ace_task("agent_multi_step_3")))
    model_server.set_policy([{"tool_calls": [{"name": "login_food_platform",
                                              "arguments": {"username": "Jack", "password": "password654"}}]},
                             "finish conversation"])

    output = await solution(task)

    shipped = pickle.loads(pickle.dumps(task))  # the task comes back from a worker with its environment's state
    assert shipped.metadata["environment"].calls == ["[login_food_platform(username='Jack', password='password654')]"]
    assert [m.result for m in await shipped.evaluate(output)] == [0.0, 0.5]
    assert output.meta["tool_calling"] == "native"
