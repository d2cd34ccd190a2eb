"""Path-safe, reversible storage keys for task ids.

A task id may hold any character (``/``, spaces, unicode, upper and lower case that a case-insensitive disk would
merge). Its key keeps ``[a-z0-9_-]`` and percent-encodes every other UTF-8 byte, so a key is a single path component
that is the same on every filesystem and object store, and ``decode_key(encode_key(x)) == x``. A key that would
be longer than :data:`MAX_KEY_LENGTH` keeps a readable prefix and ends in ``~`` plus a sha256 digest of the id:
still unique and stable, no longer reversible (the record holds the full id).
"""

from __future__ import annotations

import hashlib
import re
import string

MAX_KEY_LENGTH = 200
_SAFE = frozenset(string.ascii_lowercase + string.digits + "_-")
_HASH_MARK = "~"
_ALL_SAFE = re.compile(r"[a-z0-9_-]*")


def encode_key(task_id: str) -> str:
    """The storage key of ``task_id`` (see module docstring)."""
    if len(task_id) <= MAX_KEY_LENGTH and _ALL_SAFE.fullmatch(task_id):
        return task_id  # the common case, the key of every item read or planned: nothing to encode
    parts = []
    for byte in task_id.encode("utf-8"):
        char = chr(byte)
        parts.append(char if char in _SAFE else f"%{byte:02X}")
    key = "".join(parts)
    if len(key) > MAX_KEY_LENGTH:
        digest = hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:32]
        key = key[: MAX_KEY_LENGTH - len(digest) - 1] + _HASH_MARK + digest
    return key


def decode_key(key: str) -> str | None:
    """The task id of ``key``, or ``None`` for a hashed (over-long) key whose id is only in its record.

    Raises:
        ValueError: ``key`` is not a key this module produced.
    """
    if _HASH_MARK in key:
        return None
    out = bytearray()
    i = 0
    while i < len(key):
        char = key[i]
        if char == "%":
            out.append(int(key[i + 1 : i + 3], 16))
            i += 3
        elif char in _SAFE:
            out.append(ord(char))
            i += 1
        else:
            raise ValueError(f"not a task key: {key!r}")
    return out.decode("utf-8")
