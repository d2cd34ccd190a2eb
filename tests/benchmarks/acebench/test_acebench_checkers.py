"""Hand-made answers that exercise each rule and quirk of the official checker, and what strict does instead."""

from __future__ import annotations

from typing import Any

import pytest

from runner.benchmarks.acebench import check_end_state, check_normal, check_special, process_accuracy
from runner.benchmarks.acebench.calls import CallSyntaxError, decode_calls

SINGLE = "normal_single_turn_single_function"
MULTI = "normal_multi_turn_user_adjust"


def schema(name: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"name": name, "description": "", "parameters": {"type": "dict", "properties": properties,
                                                             "required": required or []}}


WEATHER = schema("get_weather", {
    "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
    "unit": {"type": "string", "enum": ["C", "F"]}, "kind": {"type": "enum"},
    "places": {"type": "array", "items": {"type": "string"}},
    "options": {"type": "object", "properties": {"level": {"type": "integer"}, "note": {"type": "string"}}},
}, required=["city"])
GT = {"get_weather": {"city": "New York", "days": 3, "metric": True, "places": ["a b", "c"],
                      "options": {"level": 5, "note": "x"}, "kind": "daily"}}


def official(reply: str, gt: Any = GT, category: str = SINGLE, functions: Any = None) -> bool:
    return check_normal(reply, functions or [WEATHER], gt, category).valid


def strict(reply: str, gt: Any = GT, category: str = SINGLE, functions: Any = None) -> bool:
    return check_normal(reply, functions or [WEATHER], gt, category, strict=True).valid


RIGHT = ("[get_weather(city='New York', days=3, metric=True, places=['a b', 'c'], options={'level': 5, 'note': 'x'}, "
         "kind='daily')]")


def test_the_exact_answer_passes_both() -> None:
    assert official(RIGHT) and strict(RIGHT)


def test_single_turn_reads_the_first_outermost_brackets_of_prose() -> None:
    assert official(f"Sure! Here is the call: {RIGHT} Hope it helps [1].")


def test_multi_turn_removes_whitespace_so_prose_breaks_it() -> None:
    assert official(RIGHT, category=MULTI)
    assert not official(f"Sure: {RIGHT}", category=MULTI)


def test_unparseable_and_non_call_outputs_fail() -> None:
    assert not official("get_weather(city='New York')")
    assert not official("[get_weather(city='New York'), 42]")
    with pytest.raises(CallSyntaxError):
        decode_calls("['a' * 10**9]")


def test_decoding_quirks_positional_args_dropped_and_bare_names_read_as_text() -> None:
    assert decode_calls("[f(1, a=Paris, b=-2, c=g(x=1))]") == [{"f": {"a": "Paris", "b": -2, "c": {"g": {"x": 1}}}}]


def test_call_count_and_function_names_must_match() -> None:
    assert not official(f"[{RIGHT[1:-1]}, {RIGHT[1:-1]}]")
    assert not official(RIGHT.replace("get_weather", "get_forecast"))


def test_required_and_allowed_parameters() -> None:
    assert not official("[get_weather(days=3)]", gt={"get_weather": {"days": 3}})
    # An optional parameter the ground truth leaves out is an error.
    assert not official("[get_weather(city='New York', unit='C')]", gt={"get_weather": {"city": "New York"}})


def test_type_mismatch_fails() -> None:
    assert not official("[get_weather(city='New York', days='three')]", gt={"get_weather": {"city": "New York",
                                                                                           "days": 3}})


def test_official_string_containment_versus_strict_equality() -> None:
    reply = "[get_weather(city='new-york city')]"
    gt = {"get_weather": {"city": "New York"}}
    assert official(reply, gt=gt)  # "newyork" is contained in "newyorkcity"
    assert not strict(reply, gt=gt)
    assert strict("[get_weather(city='new_york')]", gt=gt)  # normalisation still applies


def test_numbers_and_booleans_are_not_compared_officially() -> None:
    gt = {"get_weather": {"city": "Paris", "days": 3, "metric": True}}
    reply = "[get_weather(city='Paris', days=300, metric=False)]"
    assert official(reply, gt=gt)
    assert not strict(reply, gt=gt)
    assert strict("[get_weather(city='Paris', days=3.0, metric='true')]", gt=gt)


def test_enum_values_are_not_compared_officially() -> None:
    gt = {"get_weather": {"city": "Paris", "kind": "daily"}}
    assert official("[get_weather(city='Paris', kind='hourly')]", gt=gt)
    assert not strict("[get_weather(city='Paris', kind='hourly')]", gt=gt)


def test_lists_are_compared_element_wise_in_order() -> None:
    gt = {"get_weather": {"city": "Paris", "places": ["A", "B"]}}
    assert official("[get_weather(city='Paris', places=['a', 'b'])]", gt=gt)
    assert not official("[get_weather(city='Paris', places=['B', 'A'])]", gt=gt)


def test_dict_values_are_matched_by_containment_officially() -> None:
    gt = {"get_weather": {"city": "Paris", "options": {"level": 5, "note": "x"}}}
    reply = "[get_weather(city='Paris', options={'level': 15, 'note': 'xyz'})]"
    assert official(reply, gt=gt)
    assert not strict(reply, gt=gt)
    assert not official("[get_weather(city='Paris', options={'level': 5})]", gt=gt)


def test_empty_ground_truth_list_quirk() -> None:
    gt = {"get_weather": {"city": "Paris", "places": []}}
    reply = "[get_weather(city='Paris', places=[])]"
    assert not official(reply, gt=gt)
    assert strict(reply, gt=gt)


def test_call_without_arguments_quirk() -> None:
    ping = schema("ping", {})
    assert not official("[ping()]", gt={"ping": {}}, functions=[ping])
    assert strict("[ping()]", gt={"ping": {}}, functions=[ping])


def test_whitespace_removal_breaks_lists_inside_dicts_in_multi_turn() -> None:
    gt = {"get_weather": {"city": "Paris", "options": {"level": 5, "note": ["a b"]}}}
    reply = "[get_weather(city='Paris', options={'level': 5, 'note': ['a b']})]"
    assert official(reply, gt=gt)
    assert not official(reply, gt=gt, category=MULTI)
    assert strict(reply, gt=gt, category=MULTI)


def test_repeated_function_suffixes_and_candidate_lists() -> None:
    gt = {"get_weather_1": {"city": "Paris"}, "get_weather_2": {"city": "Rome"}}
    assert official("[get_weather(city='Rome'), get_weather(city='Paris')]", gt=gt)
    assert official("[get_weather(city='Rome')]", gt=[{"get_weather": {"city": "Paris"}},
                                                       {"get_weather": {"city": "Rome"}}])


def test_parallel_matching_is_not_one_to_one_officially() -> None:
    gt = {"get_weather_1": {"city": "Paris"}, "get_weather_2": {"city": "Paris City"}}
    reply = "[get_weather(city='Paris City'), get_weather(city='London')]"
    assert official(reply, gt=gt)  # one call satisfies both expected calls
    assert not strict(reply, gt=gt)


@pytest.mark.parametrize(("category", "gt", "good", "bad"), [
    ("special_incomplete", {"book": ["date", "seat"]},
     '["Missing necessary parameters (date, seat) for the api (book)"]',
     '["Missing necessary parameters (date) for the api (book)"]'),
    ("special_error_param", {"date": ["31-02"]},
     '["There is incorrect value (31-02) for the parameters (date) in the conversation history."]',
     '["The date 31-02 is wrong."]'),
    ("special_irrelevant", "n/a", '["Due to the limitations of the function, I cannot solve this problem."]',
     "[get_weather(city='Paris')]"),
])
def test_special_phrases(category: str, gt: Any, good: str, bad: str) -> None:
    assert check_special(good, gt, category).valid and check_special(good, gt, category, strict=True).valid
    assert not check_special(bad, gt, category).valid


def test_strict_special_wants_the_parameter_name_and_no_call() -> None:
    reply = "There is incorrect value (31-02)."
    assert check_special(reply, {"date": ["31-02"]}, "special_error_param").valid
    assert not check_special(reply, {"date": ["31-02"]}, "special_error_param", strict=True).valid
    both = "[book(x=1)] the limitations of the function"
    assert check_special(both, "", "special_irrelevant").valid
    assert not check_special(both, "", "special_irrelevant", strict=True).valid


STATE = [{"BaseApi": {"wifi": True, "logged_in": True}},
         {"ReminderApi": {"reminder_list": {"1": {"title": "a"}, "2": {"title": "b"}}}}]


def test_end_state_compares_expected_keys_only_officially() -> None:
    gt = [{"BaseApi": {"wifi": True, "logged_in": True}}, {"ReminderApi": {"reminder_list": {"1": {"title": "a"}}}}]
    assert check_end_state(STATE, gt).valid  # reminder "2" is extra and ignored
    assert not check_end_state(STATE, gt, strict=True).valid
    wrong = [{"BaseApi": {"wifi": False, "logged_in": True}}, STATE[1]]
    assert not check_end_state(wrong, STATE).valid
    assert not check_end_state(STATE[:1], STATE).valid  # wrong number of apps


def test_misspelt_app_in_ground_truth_goes_unchecked_officially() -> None:
    gt = [{"BaseApi": {"wifi": True, "logged_in": True}}, {"ReminderAPI": {"reminder_list": {"9": {"title": "z"}}}}]
    assert check_end_state(STATE, gt).valid
    assert not check_end_state(STATE, gt, strict=True).valid


def test_process_accuracy_is_the_in_order_share_of_milestones() -> None:
    milestones = ["[a()]", "[b()]", "[c()]"]
    assert process_accuracy([" [a()] ", "[b()]", "[x()]"], milestones, False) == pytest.approx(2 / 3)
    # Official quirk: the missed "[b()]" uses up the remaining calls, so "[c()]" is missed too; strict finds it.
    assert process_accuracy(["[a()]", "[x()]", "[c()]"], milestones, False) == pytest.approx(1 / 3)
    assert process_accuracy(["[a()]", "[x()]", "[c()]"], milestones, False, strict=True) == pytest.approx(2 / 3)
    assert process_accuracy(["[c()]", "[a()]"], milestones, False) == pytest.approx(1 / 3)
    assert process_accuracy([], milestones, True) == 1.0
    assert process_accuracy(["[b()]"], [["[a()]", "[b()]", "[c()]"], ["[b()]"]], False) == 1.0
    assert process_accuracy(["[a()]"], [["[a()]", "[b()]", "[c()]"]], False) == 0.333
