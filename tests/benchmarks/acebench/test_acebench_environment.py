"""The simulated phone and airline: tool calls change the state, each repeat gets a fresh copy, tasks pickle."""

from __future__ import annotations

import pickle
from pathlib import Path

from runner.benchmarks.acebench import ACEBenchmark, ACEEnvironment
from runner.core.solution import SolutionOutput

PHONE = ["BaseApi", "MessageApi", "ReminderApi", "FoodPlatform"]


def phone(wifi: bool = True) -> ACEEnvironment:
    return ACEEnvironment(PHONE, {"BaseApi": {"wifi": wifi, "logged_in": True}}, [], "en")


def test_a_tool_call_changes_the_end_state() -> None:
    env = phone()
    assert env.call("login_food_platform", username="Eve", password="password123")["status"] is True
    reply = env.call("add_food_delivery_order", username="Eve", merchant_name="Domino's",
                     items=[{"product": "Margherita Pizza", "quantity": 2}])
    assert reply["status"] is True
    state = {name: attrs for app in env.state() for name, attrs in app.items()}
    assert state["FoodPlatform"]["users"]["Eve"]["balance"] == 500.0 - 136.0
    assert state["FoodPlatform"]["orders"][0]["total_price"] == 136.0
    assert env.calls[-1] == (
        """[add_food_delivery_order(username='Eve', merchant_name="Domino's", """
        """items=[{'product': 'Margherita Pizza', 'quantity': 2}])]"""
    )


def test_rules_of_the_phone() -> None:
    env = phone(wifi=False)
    assert env.call("send_message", sender_name="Eve", receiver_name="Frank", message="hi")["status"] is False
    env.call("turn_on_wifi")
    assert env.call("send_message", sender_name="Eve", receiver_name="Frank", message="hi")["status"] is False
    env.call("delete_message", message_id=1)  # the inbox was full (6 messages)
    assert env.call("send_message", sender_name="Eve", receiver_name="Frank", message="hi")["status"] is True
    inbox = env.state()[1]["MessageApi"]["inbox"]
    assert list(inbox) == ["2", "3", "4", "5", "6", "7"] and inbox["7"]["message"] == "hi"
    env.call("add_reminder", title="t", description="d", time="2024-07-15 09:30")
    assert env.state()[2]["ReminderApi"]["reminder_list"]["4"]["reminder_id"] == 4


def test_execute_reads_the_official_format_and_records_the_raw_text() -> None:
    env = phone()
    results = env.execute("[login_food_platform(username='Eve', password='password123'), check_balance(user_name='Eve')]")
    assert results[1] == 500.0
    assert env.calls == ["[login_food_platform(username='Eve', password='password123'), check_balance(user_name='Eve')]"]
    # An unescaped apostrophe, as some milestones write it, is read as part of the string.
    assert env.execute("[get_products(merchant_name='Domino's')]")[0][0]["product"] == "Margherita Pizza"
    assert env.execute("[no_such_tool()]")[0]["status"] is False
    assert env.execute("not a call")[0]["status"] is False


def test_travel_booking_and_cancellation() -> None:
    env = ACEEnvironment(["Travel"], {}, [], "en")
    reply = env.call("reserve_flight", user_id="user1", password="password123", flight_no="CZ4321",
                     cabin="Economy Class", payment_method="bank", baggage_count=2)
    assert reply.startswith("Booking successful. Reservation ID: res_5. Total cost: 2550")
    env.call("cancel_reservation", user_id="user1", reservation_id="res_5", reason="change of plans")
    users = env.state()[0]["Travel"]["users"]
    assert users["user1"]["bank_balance"] == 50000.0 - 2550 and users["user1"]["cash_balance"] == 2000.0 + 2500


def test_each_repeat_gets_a_fresh_environment_shared_with_its_metrics(acebench_dir: Path) -> None:
    benchmark = ACEBenchmark(data_dir=str(acebench_dir), categories="agent_multi_turn")
    task = next(iter(benchmark))
    first, second = task.fresh(), task.fresh()
    env = first.metadata["environment"]
    assert first.metrics[0].environment is env and second.metadata["environment"] is not env
    env.call("turn_on_wifi")
    env.call("login_device")
    assert second.metadata["environment"].calls == [] and task.metadata["environment"].calls == []
    assert first.metrics[1](SolutionOutput()).metadata == {"calls": 2}


def test_every_task_pickles(acebench_dir: Path) -> None:
    benchmark = ACEBenchmark(data_dir=str(acebench_dir), categories="agent,normal_multi_turn_user_switch")
    tasks = list(benchmark)
    clones = pickle.loads(pickle.dumps((benchmark, tasks)))[1]
    assert [t.id for t in clones] == [t.id for t in tasks]
    clone = next(t for t in clones if t.tags["category"] == "agent_multi_step")
    assert clone.metrics[0].environment is clone.metadata["environment"]
    tools = clone.metadata["environment"].tools()
    assert {schema["function"]["name"] for _, schema in tools} == {f["name"] for f in clone.input["functions"]}
    assert all(schema["function"]["parameters"]["type"] == "object" for _, schema in tools)
