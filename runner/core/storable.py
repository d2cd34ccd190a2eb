"""Values every store takes as they are: text that UTF-8 can encode, and integers that JSON readers can read.

Two kinds of value that Python holds without complaint are refused further on, and would stop a run at its first
write (and at every resume, which meets the same item again):

- **Text with unpaired surrogates.** ``json.loads('"\\ud835"')`` is valid JSON and gives a string holding half of
  a UTF-16 surrogate pair (a model that cut ``"\\ud835\\udfce"`` in two sends it); UTF-8 cannot encode it, so
  pydantic, pyarrow, httpx and every file write refuse it (``surrogates not allowed``). The one rule
  (:func:`well_formed`): a high surrogate followed by a low one is joined into the character they encode, and
  every surrogate left unpaired is replaced by U+FFFD REPLACEMENT CHARACTER, one per surrogate. It is
  ECMAScript's ``String.prototype.toWellFormed`` (ECMA-262, 2024) and the WHATWG Infra standard's "convert to a
  scalar value string", the conversion every browser applies before it encodes text as UTF-8.
- **Integers of more than** :data:`INT_DIGITS` **digits.** Python's ``int`` has no bound and pydantic writes any of
  them to JSON, but Python's ``json`` and ``int(str)`` and pydantic's JSON parser refuse to read one of more than
  4,300 digits: a record holding it would be written and then never read again. Such an integer is stored as the
  text of its digits (:func:`storable`), exactly; the report counts such a metric result as a number no float can
  hold (``too_large``), as it counts a smaller integer beyond a float's range (:func:`too_large`).

The record (:mod:`runner.core.record`) applies :func:`storable` to everything a solution, a model, a tool or a
metric gave it, as it is built; the model layer applies it to what a server sends and to what a request sends, so
that a conversation that carries such text goes on.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic_core import to_json

INT_DIGITS = 4300
"""The most digits of an integer that JSON readers take: Python's limit on ``int``/``str`` conversions since 3.11
(``sys.int_info.default_max_str_digits``, the fix of CVE-2020-10735), which pydantic's JSON parser (jiter) applies
too, whatever the process's own setting."""

_INT_LIMIT = 10**INT_DIGITS
_LONG_INTEGER = re.compile(r"-?[0-9]{%d,}" % (INT_DIGITS + 1))


def well_formed(text: str) -> str:
    """``text`` with its surrogate pairs joined and every unpaired surrogate replaced by U+FFFD (the module's rule);
    ``text`` itself when it holds no surrogate (the common case, one scan of the string)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable(value: Any) -> Any:
    """``value`` with every string in it (dictionary keys included) :func:`well_formed` and every integer of more
    than :data:`INT_DIGITS` digits as the text of its digits, inside lists, tuples and dictionaries at any depth;
    ``value`` itself (the same object) when nothing in it needed to change. Other values are returned as they are.

    Raises:
        ValueError: ``value`` contains itself (a reference cycle), or is nested too deeply for Python's recursion
            limit; JSON cannot hold either (pydantic's and Python's serialisers refuse them with a ``ValueError``
            too).
    """
    try:
        return _storable(value, set())
    except RecursionError:
        raise ValueError("the value is nested too deeply to be stored") from None


def _storable(value: Any, path: set[int]) -> Any:
    """:func:`storable` of ``value``, inside the containers whose ids are in ``path``."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -_INT_LIMIT < value < _INT_LIMIT else to_json(value).decode()
    if not isinstance(value, (dict, list, tuple)):
        return value
    if id(value) in path:
        raise ValueError("the value contains itself (a reference cycle)")
    path.add(id(value))
    try:
        if isinstance(value, dict):
            pairs = [(_storable(key, path), _storable(part, path)) for key, part in value.items()]
            unchanged = all(new_key is key and new_part is part
                            for (new_key, new_part), (key, part) in zip(pairs, value.items()))
            return value if unchanged else dict(pairs)
        parts = [_storable(part, path) for part in value]
        if all(new is old for new, old in zip(parts, value)):
            return value
        return parts if isinstance(value, list) else tuple(parts)
    finally:
        path.discard(id(value))


def too_large(value: Any) -> bool:
    """Whether ``value`` is a number no float can hold: an integer that ``float()`` refuses (``OverflowError``:
    beyond ``±sys.float_info.max``, about ±1.8e308, once rounded), or the text :func:`storable` makes of an integer
    of more than :data:`INT_DIGITS` digits."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return True
        return False
    return isinstance(value, str) and _LONG_INTEGER.fullmatch(value) is not None
