import re

from hypothesis import given, strategies as st

from runner.storage.keys import MAX_KEY_LENGTH, decode_key, encode_key


@given(st.text(min_size=1, max_size=60))
def test_keys_round_trip_and_are_path_safe(task_id):
    key = encode_key(task_id)
    assert len(key) <= MAX_KEY_LENGTH
    if "~" not in key:
        assert decode_key(key) == task_id
    else:
        # Hashed only past the limit: an id whose key is exactly MAX_KEY_LENGTH long keeps its reversible key.
        assert decode_key(key) is None and len(task_id.encode()) * 3 > MAX_KEY_LENGTH
    assert re.fullmatch(r"[a-z0-9_%A-F~-]+", key)
    assert key not in (".", "..")


def test_keys_differ_for_ids_a_case_insensitive_disk_would_merge():
    assert encode_key("Task") != encode_key("task")
    assert encode_key("a/b") == "a%2Fb"


def test_over_long_ids_get_a_stable_unique_hashed_key():
    long_a, long_b = "x" * 500 + "a", "x" * 500 + "b"
    key_a = encode_key(long_a)
    assert len(key_a) <= MAX_KEY_LENGTH
    assert key_a == encode_key(long_a)
    assert key_a != encode_key(long_b)
    assert decode_key(key_a) is None
