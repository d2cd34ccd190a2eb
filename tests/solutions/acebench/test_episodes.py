"""The ``acebench`` solution on agent tasks: calls executed against the simulated phone, results fed back, the end
state scored; a simulated user in multi-turn tasks.

The agent and the user are scripted OpenAI-compatible servers on loopback (``tests/support/model_server.py``),
standing in for model servers because no language model can run here.
"""

from __future__ import annotations

from runner.solutions.acebench import ACEBenchAgent
from runner.benchmarks.acebench.environment import parse_executable
from runner.core.trajectory import tool_calls
from runner.models import MockScript
from tests.support.model_server import ScriptedModelServer

ORDER = ("[add_food_delivery_order(username='Jack', merchant_name='Jiutian BBQ', "
         "items=[{'product': 'Grilled Pork Belly', 'quantity': 1}])]")


def metrics_of(results) -> dict[str, float]:
    return {result.name: result.result for result in results}


async def test_multi_step_calls_change_the_environment_and_the_end_state_is_scored(
    ace_task, model_server: ScriptedModelServer
) -> None:
    task = ace_task("agent_multi_step_2")  # Wi-Fi off; order a dish Jack can afford
    model_server.set_policy(MockScript(replies=[
        "[turn_on_wifi()]",
        "Let me look at the menu first: [get_products(merchant_name='Jiutian BBQ')]",
        "[login_food_platform(username='Jack', password='password654')]",
        ORDER,
        "finish conversation",
    ], then="error"))

    output = await ACEBenchAgent("vllm:scripted", model_base_url=model_server.url)(task)

    assert metrics_of(await task.evaluate(output)) == {"accuracy": 1.0, "process_accuracy": 1.0}
    assert [step["name"] for step in tool_calls(output.trajectory)] == [
        "turn_on_wifi", "get_products", "login_food_platform", "add_food_delivery_order"]
    assert output.meta["stopped"] == "finished" and output.meta["turns"] == 9
    fed_back = model_server.chat_requests[1].messages[-1]["content"]
    assert fed_back == 'Execution results:\n[turn_on_wifi()] -> {"status": true, "message": "Wi-Fi has been turned on"}'
    apps = {name: attributes for app in output.output["state"] for name, attributes in app.items()}
    assert apps["BaseApi"]["wifi"] is True and apps["FoodPlatform"]["users"]["Jack"]["balance"] < 120


async def test_multi_step_with_native_tool_calls(ace_task, model_server: ScriptedModelServer) -> None:
    task = ace_task("agent_multi_step_3")
    milestones = task.metadata["milestones"]
    calls = [parse_executable(stone)[0] for stone in milestones]
    model_server.set_policy([{"tool_calls": [{"name": name, "arguments": arguments}]} for name, arguments in calls]
                            + ["finish conversation"])

    output = await ACEBenchAgent("vllm:scripted", model_base_url=model_server.url, tool_calling="native")(task)

    assert metrics_of(await task.evaluate(output)) == {"accuracy": 1.0, "process_accuracy": 1.0}
    assert task.metadata["environment"].calls == milestones
    first, second = model_server.chat_requests[:2]
    assert first.tool_names() == [f["name"] for f in task.input["functions"]]
    order = next(t for t in first.tools if t["function"]["name"] == "add_food_delivery_order")
    assert order["function"]["parameters"]["properties"]["items"]["type"] == "array"  # the data says "list"
    assert second.messages[-1]["role"] == "tool" and '"status": true' in second.messages[-1]["content"]


async def test_multi_step_stops_after_two_replies_without_a_call(ace_task, model_server: ScriptedModelServer) -> None:
    task = ace_task("agent_multi_step_3")
    model_server.set_policy(["I will order the barbecue for you."])
    output = await ACEBenchAgent("vllm:scripted", model_base_url=model_server.url)(task)
    assert output.meta["stopped"] == "no_call" and len(model_server.chat_requests) == 2
    assert "finish conversation" in model_server.chat_requests[1].messages[-1]["content"]  # the one reminder


async def test_an_episode_ends_at_the_turn_limit(ace_task, model_server: ScriptedModelServer) -> None:
    task = ace_task("agent_multi_step_3")
    model_server.set_policy(["[check_balance(user_name='Jack')]"])  # repeated forever
    output = await ACEBenchAgent("vllm:scripted", model_base_url=model_server.url, max_turns=5)(task)
    assert output.meta["stopped"] == "turn_limit" and len(model_server.chat_requests) == 3
    assert len(task.metadata["environment"].calls) == 3


async def test_multi_turn_with_a_scripted_user(ace_task, model_server: ScriptedModelServer,
                                               user_server: ScriptedModelServer) -> None:
    task = ace_task("agent_multi_turn_0")  # Grace asks to message Frank; the inbox is full
    question = "Who is the message for, and what should it say?"
    model_server.set_policy(MockScript(replies=[question, *task.metadata["milestones"], "Your message was sent."],
                                       then="error"))
    user_server.set_policy(MockScript(replies=[
        "user: I'd like to send a text message.",
        "To Frank, from me, Grace: 'Are you free tomorrow to have lunch with me?' Delete the oldest if needed.",
        "finish conversation",
    ], then="error"))
    agent = ACEBenchAgent("vllm:scripted", model_base_url=model_server.url, user_model="vllm:user",
                          user_model_base_url=user_server.url)

    output = await agent(task)

    assert metrics_of(await task.evaluate(output)) == {"accuracy": 1.0, "process_accuracy": 1.0}
    assert output.meta["stopped"] == "user_finished" and output.meta["user_model"] == "vllm:user"
    assert output.meta["usage"]["user"]["calls"] == 3 and output.meta["usage"]["agent"]["calls"] == 6
    opening = user_server.chat_requests[0].messages
    assert opening[0]["content"].endswith(task.input["question"]) and opening[1]["content"].startswith("Hello")
    assert user_server.chat_requests[1].messages[-1]["content"] == question
    assert user_server.chat_requests[2].messages[-1]["content"] == "Your message was sent."
    assert model_server.chat_requests[0].messages[1]["content"] == "I'd like to send a text message."
    assert [m["role"] for m in output.trajectory[:4]] == ["system", "user", "assistant", "user"]


async def test_the_agent_can_finish_a_multi_turn_conversation(ace_task, model_server: ScriptedModelServer) -> None:
    task = ace_task("agent_multi_turn_20", language="zh")
    model_server.set_policy(MockScript(rules=[{"match": "扮演", "scope": "all", "reply": "我想订机票。"}],
                                       replies=["finish conversation"]))
    output = await ACEBenchAgent("vllm:scripted", model_base_url=model_server.url)(task)
    assert output.meta["stopped"] == "finished" and output.meta["user_model"] == "vllm:scripted"
    assert model_server.chat_requests[1].messages[1]["content"] == "我想订机票。"
    assert "航空公司" in model_server.chat_requests[1].messages[0]["content"]
