"""What an HTTP answer's body holds: its JSON value, or, when it is not JSON, one line saying what came instead.

A server that is not the OpenAI API still answers with status 200 more often than not: a web page (the base URL lacks
``/v1``, or points at a dashboard or a login page), a stream of server-sent events from a gateway that streams
whatever was asked, a body a proxy compressed without saying so, or plain text. The ``openai`` client hands such a
body back as a string, which then fails far from its cause; :func:`json_body` names it instead.

The JSON is read whatever the ``Content-Type`` says, as the ``openai`` client itself does (some servers label JSON
``text/plain``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from runner.core.storable import storable
from runner.models._model_errors import UnreadableReply, one_line

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_GZIP_MAGIC = b"\x1f\x8b"


def media_type(response: httpx.Response) -> str:
    """The response's ``Content-Type`` without its parameters, lower-cased (``""`` when there is none)."""
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def json_body(response: httpx.Response) -> Any:
    """The JSON value of ``response``'s body, its text well-formed (:func:`runner.core.storable.storable`): a
    server may send half of a surrogate pair (``"\\ud835"``, valid JSON), which no request, record or file could
    then encode as UTF-8; it becomes U+FFFD.

    Raises:
        UnreadableReply: the body is empty or not JSON; its ``shape`` says what it is (see :func:`describe`).
    """
    data = response.content
    kind = media_type(response)
    if not data.strip():
        raise UnreadableReply(f"an empty body ({kind or 'no Content-Type'})")
    try:
        value = json.loads(data)
    except ValueError:
        shape, hint = describe(kind, data)
        raise UnreadableReply(shape, hint) from None
    return storable(value)


def is_page(response: httpx.Response) -> bool:
    """Whether ``response``'s body is an HTML page (by its ``Content-Type``, or by how it begins when it has none
    or another): a web server's or a proxy's page, never an answer of the OpenAI API."""
    return _is_page(media_type(response), response.content.lstrip()[:512])


def _is_page(kind: str, head: bytes) -> bool:
    return kind == "text/html" or head.lower().startswith((b"<!doctype html", b"<html"))


def describe(kind: str, data: bytes) -> tuple[str, str | None]:
    """What a body that is not JSON is, in words, and the fix it suggests (``None``: check the URL).

    Args:
        kind: the media type (``text/html``; ``""`` when the server sent none).
        data: the body, at least one byte that is not whitespace.

    Returns:
        ``(shape, hint)``, the shape one line that begins with the media type, e.g.
        ``text/html: an HTML page titled 'Welcome to nginx!'``.
    """
    label = kind or "no Content-Type"
    head = data.lstrip()[:512]
    if data.startswith(_GZIP_MAGIC):
        return (f"{label}: gzip-compressed bytes without 'Content-Encoding: gzip'",
                "something between here and the server compresses the body without saying so; reach the server "
                "without that proxy")
    if _is_page(kind, head):
        title = _TITLE.search(data[:65536])
        named = f" titled {one_line(title.group(1).decode('utf-8', 'replace'), 80)!r}" if title else ""
        return f"{label}: an HTML page{named}", None
    if kind == "text/event-stream" or head.startswith(b"data:"):
        return (f"{label}: a stream of server-sent events",
                "the server streams although no stream was asked for; turn streaming off in the gateway")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{label}: {len(data)} bytes of binary data", None
    return f"{label}: text that is not JSON, {one_line(text, 80)!r}", None
