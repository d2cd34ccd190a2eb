"""A scripted OpenAI-compatible model server on 127.0.0.1, for tests.

It stands in for a model server (vLLM, Ollama, OpenAI) because no language model can run on the test machines:
everything on our side of the HTTP connection is the real code (the ``openai`` client, our retries, usage
accounting), and only the model's text is scripted. Replies come from the same policies and scripts as the ``mock``
provider (:class:`runner.models.MockScript`, a callable, a list of replies); the server can also be told to fail
the next requests, or every n-th one (:meth:`ScriptedModelServer.fail_every`), with an HTTP status (429 with
``Retry-After``, 500...) or to stall, to answer with a raw body of any shape (:meth:`ScriptedModelServer.answer`: an
HTML page, a broken body, another API's reply), to send an answer a byte at a time (:meth:`ScriptedModelServer.drip`:
a server or proxy that trickles, so that every byte resets a read timeout), to reshape every scripted reply into
another server's dialect (:attr:`ScriptedModelServer.reshape`: content as parts, reasoning fields, no usage; and
:attr:`ScriptedModelServer.stream_usage`: where a stream carries its usage, if anywhere), to
enforce a rate limit as a provider does (:meth:`ScriptedModelServer.limit_rate`: 429 with ``Retry-After`` beyond
it), to take a fixed time per answer (:attr:`ScriptedModelServer.latency`) and to refuse, as vLLM does, a
conversation whose earlier tool calls have arguments that are not a JSON object
(:attr:`ScriptedModelServer.strict_tool_arguments`), and it records every request it received, and every one whose
client went away before its answer was complete (:attr:`ScriptedModelServer.disconnects`: a stall, a latency or a
trickled answer cut short by a client that gave up, as a server that cancels the generation would see it).

Endpoints: ``POST /v1/chat/completions`` (its answer streamed as server-sent events, chunk by chunk, when the
request says ``"stream": true``) and ``GET /v1/models``; the paths are matched by their end, so a base URL without
``/v1`` reaches them too (as a web server that answers every path would).

Example::

    server = ScriptedModelServer([{"tool_calls": [{"name": "lookup", "arguments": {"title": "X"}}]}, "done"])
    with server:
        model = ChatModel.from_name("vllm:scripted", base_url=server.url)
        ...
        assert server.chat_requests[0].tools
"""

from __future__ import annotations

import contextlib
import gzip
import json
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal

from runner.models import ChatRequest, MockModel, MockPolicySource, ModelError

if TYPE_CHECKING:
    from typing_extensions import Self


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server received: ``method``, ``path``, lower-cased ``headers``, the JSON ``body`` and
    when it arrived (``received_at``, :func:`time.monotonic` seconds)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float = field(default_factory=time.monotonic)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Room for every connection of a run's workers arriving at once (the default backlog is 5).
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hung up first (as one that timed out does); report anything else."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class _Fault:
    status: int | None
    retry_after: str | None
    delay: float
    message: str


@dataclass(frozen=True)
class RawAnswer:
    """A body sent exactly as given: ``status``, ``body`` bytes and ``headers``."""

    status: int
    body: bytes
    headers: dict[str, str]


def completion(message: dict[str, Any], *, usage: dict[str, Any] | None = None, model: str = "scripted",
               finish_reason: str | None = "stop", **fields: Any) -> dict[str, Any]:
    """A ``/chat/completions`` body with one choice holding ``message`` (a dict sent as it is, whatever its shape),
    ``usage`` when given (else none: the key is left out), and any other top-level ``fields``."""
    body: dict[str, Any] = {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        **fields,
    }
    if usage is not None:
        body["usage"] = usage
    return body


class CountingTokens:
    """A :attr:`ScriptedModelServer.reshape` that makes every scripted chat answer report ``prompt`` and
    ``completion`` tokens in its ``usage``, and keeps the server's own count: :attr:`tokens` (their sum over every
    answer sent) and :attr:`calls`. A run's usage and budget spend are checked against it."""

    def __init__(self, prompt: int = 10, completion: int = 5) -> None:
        self.prompt, self.completion, self.tokens, self.calls = prompt, completion, 0, 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:  # the server answers each request on a thread of its own
            self.tokens += self.prompt + self.completion
            self.calls += 1
        return {**body, "usage": {"prompt_tokens": self.prompt, "completion_tokens": self.completion,
                                  "total_tokens": self.prompt + self.completion}}


class ScriptedModelServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script (see the module docstring).

    Args:
        policy: the reply policy (anything :func:`runner.models.resolve_mock_policy` takes); default: the mock
            provider's default policy.
        models: model ids ``GET /v1/models`` lists; ``None`` makes that endpoint answer 404, like servers without it.

    Attributes:
        reshape: a function applied to every scripted ``/chat/completions`` body (a dict) before it is sent, to
            speak another server's dialect with the policy's answers; ``None`` sends them as OpenAI does.
        latency: seconds each chat request within the rate limit waits before its answer (a model's work).
        rate_limited: chat requests answered 429 by :meth:`limit_rate`.
        max_in_flight: the most chat requests waiting out their :attr:`latency` at once.
        disconnects: the requests whose client closed the connection before their answer was complete (while the
            server stalled, waited out its latency or trickled the answer), in the order it noticed; see
            :meth:`wait_for_disconnects`.
        completions: answers ``POST /v1/completions`` (the legacy completions API, which lm-eval's
            ``local-completions`` speaks): ``completions(body)`` returns the answer's JSON body, or a
            :class:`RawAnswer`; ``None``: that route answers 404.
        stream_usage: where a streamed answer carries its usage: ``"finish"`` (the default), in the chunk with the
            finish reason, whatever the request asks (``transformers serve`` 5.17); ``"asked"``, in a last chunk of
            its own without choices, only when the request asks for it (``stream_options.include_usage``: OpenAI,
            vLLM, ``transformers serve`` 5.25); ``"never"``, in no chunk.
        strict_tool_arguments: answer 400 to a chat request whose assistant messages carry a tool call whose
            ``function.arguments`` is not a string holding a JSON object (``" "``, ``""``, ``null``, broken JSON), as
            vLLM does (its chat template decodes every earlier call's arguments: vllm-project/vllm#19419).
    """

    def __init__(self, policy: MockPolicySource | None = None, *, models: list[str] | None = None) -> None:
        self.models = ["scripted"] if models is None else models
        self.list_models = True
        self.reshape: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.requests: list[RecordedRequest] = []
        self.disconnects: list[RecordedRequest] = []
        self._disconnected = threading.Condition()
        self._mock = MockModel(policy)
        self._faults: deque[_Fault] = deque()
        self._every: tuple[int, _Fault] | None = None
        self._chats = 0
        self._answers: dict[str, deque[RawAnswer]] = {"chat": deque(), "models": deque()}
        self._drips: dict[str, deque[tuple[float, bool]]] = {"chat": deque(), "models": deque()}
        self._standing: dict[str, RawAnswer] = {}
        self.latency = 0.0
        self.rate_limited = 0
        self.max_in_flight = 0
        self.strict_tool_arguments = False
        self.stream_usage: Literal["finish", "asked", "never"] = "finish"
        self.completions: Callable[[Any], dict[str, Any] | RawAnswer] | None = None
        self._in_flight = 0
        self._rate: tuple[float, str] | None = None
        self._full_at = 0.0
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API root to pass as ``base_url`` (``http://127.0.0.1:<port>/v1``)."""
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def chat_requests(self) -> list[ChatRequest]:
        """The chat requests received, parsed, in order (failed ones included)."""
        return [ChatRequest.from_openai_body(r.body) for r in self.requests if r.path.endswith("/chat/completions")]

    def set_policy(self, policy: MockPolicySource | None) -> None:
        """Answer further chat requests from ``policy``."""
        self._mock = MockModel(policy)

    def fail(self, status: int, times: int = 1, *, retry_after: str | None = None, message: str = "scripted failure") -> None:
        """Answer the next ``times`` chat requests with HTTP ``status`` (and a ``Retry-After`` header if given)."""
        with self._lock:
            self._faults.extend(_Fault(status, retry_after, 0.0, message) for _ in range(times))

    def fail_every(self, n: int, status: int, *, retry_after: str | None = None,
                   message: str = "scripted failure") -> None:
        """Answer every ``n``-th chat request from now on with HTTP ``status`` (and a ``Retry-After`` header if given),
        whatever the rate: a server that refuses a share of the requests."""
        with self._lock:
            self._every = (n, _Fault(status, retry_after, 0.0, message))
            self._chats = 0

    def limit_rate(self, per_second: float, *, retry_after: str = "1") -> None:
        """Admit at most ``per_second`` chat requests per second, as a token bucket holding one second of them (a
        provider's per-minute limit enforced per second); answer the others 429 with ``Retry-After``."""
        with self._lock:
            self._rate = (per_second, retry_after)
            self._full_at = time.monotonic()

    def _admitted(self) -> str | None:
        """``None`` when a chat request is within the rate limit (it takes its place), else its ``Retry-After``."""
        with self._lock:
            if self._rate is None:
                return None
            rate, retry_after = self._rate
            now = time.monotonic()
            # The bucket is kept as the time it is full again (it holds `rate` requests, one second of them).
            if self._full_at - now > 1.0 - 1.0 / rate:
                self.rate_limited += 1
                return retry_after
            self._full_at = max(self._full_at, now) + 1.0 / rate
            return None

    @contextlib.contextmanager
    def _serving(self) -> Iterator[None]:
        """Count a chat request as in flight (for :attr:`max_in_flight`)."""
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def wait_for_disconnects(self, count: int, timeout: float = 30.0) -> bool:
        """Block until :attr:`disconnects` holds ``count`` requests (the server notices a closed connection within
        0.05 s); ``False`` if ``timeout`` seconds passed first."""
        with self._disconnected:
            return self._disconnected.wait_for(lambda: len(self.disconnects) >= count, timeout)

    def _client_left(self, request: RecordedRequest | None) -> None:
        if request is None:
            return
        with self._disconnected:
            self.disconnects.append(request)
            self._disconnected.notify_all()

    def stall(self, seconds: float, times: int = 1) -> None:
        """Wait ``seconds`` before answering each of the next ``times`` chat requests (for client timeouts)."""
        with self._lock:
            self._faults.extend(_Fault(None, None, seconds, "") for _ in range(times))

    def drip(self, seconds_per_byte: float, times: int = 1, *, endpoint: str = "chat",
             headers_too: bool = False) -> None:
        """Send each of the next ``times`` answers to ``endpoint`` (``"chat"`` or ``"models"``) one byte every
        ``seconds_per_byte``: the body after the headers, or the whole answer from its status line with
        ``headers_too``. The answer itself is the one the server would send (scripted, raw or an error)."""
        with self._lock:
            self._drips[endpoint].extend((seconds_per_byte, headers_too) for _ in range(times))

    def _take_drip(self, endpoint: str) -> tuple[float, bool] | None:
        with self._lock:
            queue = self._drips[endpoint]
            return queue.popleft() if queue else None

    def answer(self, body: bytes | str | Any, *, endpoint: str = "chat", status: int = 200,
               content_type: str | None = "application/json", headers: dict[str, str] | None = None,
               gzipped: bool = False, times: int | None = 1) -> None:
        """Answer the next ``times`` requests to ``endpoint`` (``"chat"`` or ``"models"``) with a raw body, whatever
        its shape (``times=None``: every request from now on).

        Args:
            body: bytes sent as they are, a string sent as UTF-8, anything else as JSON.
            endpoint: ``"chat"`` (``POST .../chat/completions``) or ``"models"`` (``GET .../models``).
            status: the HTTP status.
            content_type: the ``Content-Type`` header, or ``None`` to send none.
            headers: more headers (they win over the computed ones).
            gzipped: compress the body with gzip and say so in ``Content-Encoding``.
        """
        if isinstance(body, bytes):
            data = body
        else:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
        sent: dict[str, str] = {"Content-Type": content_type} if content_type is not None else {}
        if gzipped:
            data = gzip.compress(data)
            sent["Content-Encoding"] = "gzip"
        raw = RawAnswer(status, data, {**sent, **(headers or {})})
        with self._lock:
            if times is None:
                self._standing[endpoint] = raw
            else:
                self._answers[endpoint].extend(raw for _ in range(times))

    def start(self) -> Self:
        """Listen on an ephemeral port of 127.0.0.1 in a daemon thread."""
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        # A short poll interval makes stop() quick (shutdown waits for the loop's next poll).
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and join the thread."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> _Fault | None:
        with self._lock:
            self.requests.append(request)
            if not request.path.endswith("/chat/completions"):
                return None
            if self._faults:
                return self._faults.popleft()
            self._chats += 1
            if self._every is not None and self._chats % self._every[0] == 0:
                return self._every[1]
        return None

    def _raw(self, endpoint: str) -> RawAnswer | None:
        with self._lock:
            queue = self._answers[endpoint]
            return queue.popleft() if queue else self._standing.get(endpoint)

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self._mock.reply_to(ChatRequest.from_openai_body(body))
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            # The arguments as the model wrote them (blank, broken), as a real server sends them.
            message["tool_calls"] = [{"id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": call.raw_arguments}}
                                     for call in reply.tool_calls]
        body = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": reply.usage.input_tokens,
                "completion_tokens": reply.usage.output_tokens,
                "total_tokens": reply.usage.total_tokens,
            },
        }
        return self.reshape(body) if self.reshape is not None else body


def _arguments_refusal(body: dict[str, Any]) -> str | None:
    """What a strict server says of the first earlier tool call whose arguments are not a JSON object, or ``None``."""
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments")
            try:
                decoded = json.loads(arguments) if isinstance(arguments, str) else None
            except ValueError as exc:
                return f"messages[{index}]: tool call arguments {arguments!r} are not valid JSON: {exc}"
            if not isinstance(decoded, dict):
                return f"messages[{index}]: tool call arguments {arguments!r} are not a JSON object"
    return None


def _events(body: dict[str, Any], usage: Literal["finish", "own", "none"] = "finish") -> bytes:
    """A ``/chat/completions`` body as the server-sent events of a streamed answer, as vLLM and ``transformers
    serve`` send them: a first chunk with the role, the content a few characters per chunk, each tool call in a chunk
    of its own (the arguments in two), the chunk with the finish reason, then ``[DONE]``. The usage is in the chunk
    with the finish reason (``usage="finish"``), in a last chunk of its own without choices (``"own"``), or nowhere
    (``"none"``). A body that is not a completion (an error) is one event."""
    if not body.get("choices"):
        return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()
    choice = body["choices"][0]
    message = choice.get("message") or {}
    head = {key: body[key] for key in ("id", "model", "created") if key in body}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        event = {**head, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}
        return f"data: {json.dumps(event)}\n\n"

    events = [chunk({"role": "assistant"})]
    content = message.get("content")
    if isinstance(content, str):
        events += [chunk({"content": content[start:start + 4]}) for start in range(0, len(content), 4)]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        half = len(arguments) // 2 if isinstance(arguments, str) else 0
        events.append(chunk({"tool_calls": [{"index": index, "id": call.get("id"), "type": "function", "function":
                                             {"name": function.get("name"),
                                              "arguments": arguments[:half] if half else arguments}}]}))
        if half:
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))
    counts = {"usage": body["usage"]} if "usage" in body else {}
    events.append(chunk({}, choice.get("finish_reason"), **(counts if usage == "finish" else {})))
    if usage == "own" and counts:
        events.append(f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', 'choices': [], **counts})}\n\n")
    return ("".join(events) + "data: [DONE]\n\n").encode()


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines on stderr."""

    drip: tuple[float, bool] | None = None
    recorded: RecordedRequest | None = None
    stream = False

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds`` while watching the connection: ``False`` (the request recorded in
        :attr:`ScriptedModelServer.disconnects`) as soon as the client closed it."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if not readable:
                continue
            try:
                data = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                data = b""
            if not data:
                self.close_connection = True
                self.owner._client_left(self.recorded)
                return False
            time.sleep(min(left, 0.05))  # bytes of a next request: not a disconnect
        return True

    def _emit(self, status: int, headers: dict[str, str], data: bytes) -> None:
        """Send one answer, at once or a byte at a time (:meth:`ScriptedModelServer.drip`)."""
        if self.drip is None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        seconds, headers_too = self.drip
        self.close_connection = True
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in headers.items()),
                 f"Content-Length: {len(data)}", "", ""]
        head = "\r\n".join(lines).encode()
        try:
            if not headers_too:
                self.wfile.write(head)
            stream = head + data if headers_too else data
            for index in range(len(stream)):
                self.wfile.write(stream[index:index + 1])
                self.wfile.flush()
                if not self._wait(seconds):
                    return
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            self.owner._client_left(self.recorded)

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        if self.stream and status == 200 and isinstance(payload, dict):
            self._emit(status, {"Content-Type": "text/event-stream", **(headers or {})},
                       _events(payload, self._usage_place()))
            return
        self._emit(status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(payload).encode())

    def _usage_place(self) -> Literal["finish", "own", "none"]:
        """Where this streamed answer carries its usage (:attr:`ScriptedModelServer.stream_usage`)."""
        kind = self.owner.stream_usage
        if kind == "finish":
            return "finish"
        options = self.recorded.body.get("stream_options") if self.recorded is not None else None
        asked = isinstance(options, dict) and options.get("include_usage") is True
        return "own" if kind == "asked" and asked else "none"

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": "scripted_error", "code": status}}, headers)

    def _send_raw(self, raw: RawAnswer) -> None:
        self._emit(raw.status, raw.headers, raw.body)

    def do_GET(self) -> None:
        self.drip = self.owner._take_drip("models") if self.path.rstrip("/").endswith("/models") else None
        self.owner._record(RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None))
        answer = self.owner._raw("models") if self.path.rstrip("/").endswith("/models") else None
        if answer is not None:
            self._send_raw(answer)
        elif self.path.rstrip("/").endswith("/models") and self.owner.list_models:
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "tests"} for m in self.owner.models]
            self._send(200, {"object": "list", "data": data})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.recorded = RecordedRequest("POST", self.path, headers, body)
        self.stream = (isinstance(body, dict) and body.get("stream") is True
                       and self.path.rstrip("/").endswith("/chat/completions"))
        fault = self.owner._record(self.recorded)
        self.drip = self.owner._take_drip("chat") if self.path.rstrip("/").endswith("/chat/completions") else None
        if self.path.rstrip("/").endswith("/v1/completions") and self.owner.completions is not None:
            answered = self.owner.completions(body)
            self._send_raw(answered) if isinstance(answered, RawAnswer) else self._send(200, answered)
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        if not isinstance(body, dict):
            self._error(400, "the body is not a JSON object")
            return
        refusal = _arguments_refusal(body) if self.owner.strict_tool_arguments else None
        if refusal is not None:
            self._error(400, refusal)
            return
        if fault is not None:
            if not self._wait(fault.delay):
                return
            if fault.status is not None:
                extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
                self._error(fault.status, fault.message, extra)
                return
        refused = self.owner._admitted()
        if refused is not None:
            self._error(429, "rate limit reached: too many requests per second", {"Retry-After": refused})
            return
        if self.owner.latency:
            with self.owner._serving():
                if not self._wait(self.owner.latency):
                    return
        answer = self.owner._raw("chat")
        if answer is not None:
            self._send_raw(answer)
            return
        try:
            self._send(200, self.owner._completion(body))
        except ModelError as exc:
            self._error(400, f"scripted server: {exc}")
