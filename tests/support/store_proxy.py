"""A fault-injecting HTTP proxy on 127.0.0.1 in front of an object store's server (moto's S3, fake-gcs-server,
Azurite in the tests), for storage faults.

It stands in for what sits between a run and its object store in production (a load balancer, a gateway, a flaky
network, a store with gaps), which cannot run here. Every request is forwarded to the real API unless a fault
matches it; a fault can:

- ``slowdown``: answer 503 with S3's ``SlowDown`` XML (what S3 says when a prefix is throttled);
- ``html503``: answer 503 with a gateway's HTML page (no error code of the store at all);
- ``status``: answer any status with any body;
- ``delay``: wait ``delay`` seconds, then forward;
- ``reset``: read the request, then reset the connection without an answer;
- ``lose_response``: forward the request (the store stores the object), then reset the connection instead of
  answering;
- ``ignore_precondition``: forward a conditional write without its condition (a store that ignores conditional
  writes): S3's and Azure's ``If-None-Match`` header, GCS's ``ifGenerationMatch`` query parameter;
- ``reject_precondition``: answer 501 ``NotImplemented`` to a request that carries such a condition.

A fault matches by ``op``, the operation whatever the store's protocol (``write``: an object upload, a PUT on S3
and Azure, a POST to ``/upload/`` on GCS; ``read``, ``list``, ``delete``), or by HTTP ``method``, and by a substring
of the object's key (``path``: matched against the URL-decoded request path and query, and on GCS the object name
a multipart upload carries in its body); it lets the first ``after`` matching requests through, then applies to
every ``every``-th one, at most ``times`` times, and for ``seconds`` from the first request it hit (each ``None``:
no bound). The proxy records every request with the fault it met.

Example::

    with FaultyStoreProxy(s3_server["AWS_ENDPOINT_URL"]) as proxy:
        proxy.inject("html503", op="write", path="/records/", seconds=2)     # a 2 s outage of record writes
        env = {**s3_server, "AWS_ENDPOINT_URL": proxy.url}
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SLOWDOWN_XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your '
                b'request rate.</Message><RequestId>proxy</RequestId></Error>')
GATEWAY_HTML = (b"<html><head><title>503 Service Temporarily Unavailable</title></head><body><center><h1>503 "
                b"Service Temporarily Unavailable</h1></center><hr><center>nginx</center></body></html>")
NOT_IMPLEMENTED_XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code><Message>A header '
                       b'you provided implies functionality that is not implemented.</Message><Header>If-None-Match'
                       b'</Header><RequestId>proxy</RequestId></Error>')
KINDS = ("slowdown", "html503", "status", "delay", "reset", "lose_response", "ignore_precondition",
         "reject_precondition")
OPS = ("write", "read", "list", "delete")
_CONDITION = re.compile(r"([?&])ifGenerationMatch=0(&|$)")
_GCS_NAME = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "expect"}


@dataclass
class Fault:
    """One fault (see the module's docstring); :attr:`applied` counts the requests it hit."""

    kind: str
    op: str | None = None
    method: str | None = None
    path: str | None = None
    after: int = 0
    every: int = 1
    times: int | None = None
    seconds: float | None = None
    status: int = 503
    body: bytes = b""
    content_type: str = "application/xml"
    delay: float = 0.0
    started: float | None = None
    matched: int = 0
    applied: int = 0

    def take(self, request: Seen) -> bool:
        """Whether this fault applies to the request (counting it if so)."""
        if self.op is not None and request.op != self.op:
            return False
        if self.method is not None and request.method != self.method:
            return False
        if self.path is not None and self.path not in request.key:
            return False
        if self.kind in ("ignore_precondition", "reject_precondition") and not request.conditional:
            return False
        if self.started is not None and self.seconds is not None and time.monotonic() - self.started > self.seconds:
            return False
        if self.times is not None and self.applied >= self.times:
            return False
        self.matched += 1
        if self.matched <= self.after or (self.matched - self.after) % self.every:
            return False
        if self.started is None:
            self.started = time.monotonic()
        self.applied += 1
        return True


@dataclass
class Seen:
    """One request the proxy received: method, path (with the query), lower-cased headers, the operation
    (:func:`operation`), what a fault's ``path`` is matched against (``key``), and the fault it met (or ``None``)."""

    method: str
    path: str
    headers: dict[str, str]
    op: str | None = None
    key: str = ""
    fault: str | None = None

    @property
    def conditional(self) -> bool:
        """Whether the request is a conditional write: ``If-None-Match`` (S3, Azure) or ``ifGenerationMatch=0``
        (GCS)."""
        return "if-none-match" in self.headers or _CONDITION.search(self.path) is not None


def operation(method: str, path: str) -> str | None:
    """What a request of one of the three stores' APIs does: ``write`` (S3's and Azure's PUT of an object, GCS's
    POST to ``/upload/``), ``read`` (a GET of an object), ``list`` (S3's ``list-type``, GCS's ``/o?``, Azure's
    ``comp=list``), ``delete``; ``None`` for anything else (a HEAD, a bucket's creation)."""
    url = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(url.query)
    if method == "DELETE":
        return "delete"
    if method == "POST" and url.path.startswith("/upload/"):
        return "write"
    if method == "PUT" and "comp" not in query and "restype" not in query:
        return "write"
    if method == "PUT" and query.get("comp") == ["blocklist"]:
        return "write"
    if method == "GET":
        if "list-type" in query or query.get("comp") == ["list"] or url.path.endswith("/o"):
            return "list"
        return "read"
    return None


def object_key(path: str, body: bytes) -> str:
    """What a fault's ``path`` is matched against: the URL-decoded path and query, and for a GCS multipart upload
    the object name from the JSON metadata at the start of its body."""
    key = urllib.parse.unquote(path)
    if "uploadType=multipart" in path:
        found = _GCS_NAME.search(body[:4096])
        if found:
            key += " " + json.loads(b'"' + found.group(1) + b'"')
    return key


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultyStoreProxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a connection ends under a fault or a client hangs up; report anything else."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, OSError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer's headers and body go out in two writes: with Nagle's algorithm on, the body waits for the client's
    # delayed ACK of the headers, 40 ms a request on Linux (a GET through the proxy took 62 ms against 14 ms direct).
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.proxy._connections.add(self.connection)

    def finish(self) -> None:
        self.server.proxy._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: the proxy records requests in :attr:`FaultyStoreProxy.requests`."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._handle()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        body = self._read_body()
        headers = {key.lower(): value for key, value in self.headers.items()}
        seen = Seen(self.command, self.path, headers, operation(self.command, self.path),
                    object_key(self.path, body))
        fault = self.server.proxy._fault_for(seen)
        seen.fault = fault.kind if fault else None
        self.server.proxy._seen(seen)
        if fault is None:
            self._forward(body, headers)
        elif fault.kind == "slowdown":
            self._answer(503, SLOWDOWN_XML, "application/xml")
        elif fault.kind == "html503":
            self._answer(503, GATEWAY_HTML, "text/html")
        elif fault.kind == "status":
            self._answer(fault.status, fault.body, fault.content_type)
        elif fault.kind == "reject_precondition":
            self._answer(501, NOT_IMPLEMENTED_XML, "application/xml")
        elif fault.kind == "delay":
            time.sleep(fault.delay)
            self._forward(body, headers)
        elif fault.kind == "ignore_precondition":
            headers.pop("if-none-match", None)
            self._forward(body, headers, _CONDITION.sub(lambda m: m.group(1) if m.group(2) else "", self.path))
        elif fault.kind == "lose_response":
            self._upstream(body, headers)
            self._reset()
        else:
            self._reset()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _upstream(self, body: bytes, headers: dict[str, str],
                  path: str | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
        target = urllib.parse.urlsplit(self.server.proxy.upstream)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            sent = {key: value for key, value in headers.items() if key not in _HOP_BY_HOP}
            sent["content-length"] = str(len(body))
            connection.request(self.command, path or self.path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def _forward(self, body: bytes, headers: dict[str, str], path: str | None = None) -> None:
        status, answer_headers, data = self._upstream(body, headers, path)
        self.send_response(status)
        for key, value in answer_headers:
            if key.lower() in _HOP_BY_HOP or (key.lower() == "content-length" and self.command != "HEAD"):
                continue
            self.send_header(key, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _reset(self) -> None:
        """Close the connection with a TCP reset (``SO_LINGER`` 0), no answer sent."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()


class FaultyStoreProxy:
    """The proxy (see the module's docstring).

    Args:
        upstream: the store's server's URL, e.g. ``http://127.0.0.1:5000``.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.faults: list[Fault] = []
        self.requests: list[Seen] = []
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="store-proxy", daemon=True)

    @property
    def url(self) -> str:
        """The proxy's URL, for ``AWS_ENDPOINT_URL``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def inject(self, kind: str, **options: Any) -> Fault:
        """Add a fault of ``kind`` (one of :data:`KINDS`) with :class:`Fault`'s options; returns it."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {', '.join(KINDS)}")
        fault = Fault(kind, **options)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every fault: requests are forwarded as they are."""
        with self._lock:
            self.faults.clear()

    def met(self, kind: str) -> list[Seen]:
        """The requests that met a fault of ``kind``."""
        with self._lock:
            return [seen for seen in self.requests if seen.fault == kind]

    def _fault_for(self, request: Seen) -> Fault | None:
        with self._lock:
            return next((fault for fault in self.faults if fault.take(request)), None)

    def _seen(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)

    def __enter__(self) -> FaultyStoreProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop serving and close the connections clients keep alive, so none reaches this proxy afterwards."""
        self._server.shutdown()
        self._server.server_close()
        for connection in list(self._connections):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
