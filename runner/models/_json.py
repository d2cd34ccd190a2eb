"""JSON in and out of model text: tolerant parsing of replies, and the smallest instance of a JSON schema."""

from __future__ import annotations

import json
import re
from typing import Any

from runner.core.storable import storable

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json(text: str | None) -> Any:
    """The JSON value in a model's reply, tolerating what models wrap around it.

    Tried in order: the whole text; the inside of the first Markdown code fence; the first JSON object or array
    that starts anywhere in the text (``json.JSONDecoder.raw_decode`` from each ``{`` or ``[``). A ``<think>...``
    block (reasoning models) is removed first. Its text is well-formed (:func:`runner.core.storable.storable`: an
    escaped half of a surrogate pair, ``"\\ud835"``, becomes U+FFFD), so it can be sent and stored.

    Raises:
        ValueError: no JSON value found (the message quotes the start of the text).
    """
    if text is None:
        raise ValueError("the reply has no text")
    stripped = _THINK.sub("", text).strip()
    candidates = [stripped]
    fence = _FENCE.search(stripped)
    if fence:
        candidates.append(fence.group(1).strip())
    for candidate in candidates:
        try:
            return storable(json.loads(candidate))
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", stripped):
        try:
            value, _ = decoder.raw_decode(stripped, match.start())
        except ValueError:
            continue
        return storable(value)
    preview = stripped[:120].replace("\n", " ")
    raise ValueError(f"no JSON value in the reply (it begins {preview!r})")


def schema_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest value that a JSON schema accepts, chosen deterministically.

    Rules, first that applies: ``default``; ``const``; first ``enum`` value; ``$ref`` to ``#/$defs/...`` (or
    ``definitions``) followed; first branch of ``anyOf``/``oneOf`` that is not ``null``; ``allOf`` merged; then by
    ``type`` (the first non-null one of a list): object -> its ``required`` properties only, array -> ``minItems``
    items, string -> ``"x"`` repeated ``minLength`` times (else ``""``), integer/number -> ``minimum`` or 0,
    boolean -> ``false``, null -> ``None``. A schema with none of these gives ``{}``.

    Used by the ``mock`` provider to answer tool calls and structured-output requests with valid arguments.
    """
    defs = defs if defs is not None else {**schema.get("definitions", {}), **schema.get("$defs", {})}
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target = defs.get(ref.rsplit("/", 1)[-1], {})
        return schema_instance(target, defs)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return schema_instance(chosen, defs)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = schema_instance(part, defs)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties", {})
        return {name: schema_instance(properties.get(name, {}), defs) for name in schema.get("required", [])}
    if kind == "array":
        return [schema_instance(schema.get("items", {}), defs) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "x" * int(schema.get("minLength", 0))
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {}


def schema_instructions(schema: dict[str, Any]) -> str:
    """A system-prompt paragraph asking for a JSON object matching ``schema`` (for servers without structured
    output)."""
    return (
        "Reply with a single JSON object and nothing else, no prose and no code fence. "
        f"It must match this JSON schema:\n{json.dumps(schema, ensure_ascii=False)}"
    )
