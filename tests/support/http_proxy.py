"""A forward HTTP proxy on 127.0.0.1 that counts what reaches it, for tests of the proxy variables.

It stands in for a cluster's egress proxy (``HTTP_PROXY=http://proxy.corp:3128``), which cannot run here: a client
that honours the environment sends it every request, with the absolute URL in the request line (``GET
http://127.0.0.1:8000/health HTTP/1.1``) or a ``CONNECT host:443`` for HTTPS. Each request is recorded; a plain HTTP
request is forwarded to ``upstream`` whatever host it names (a remote model endpoint, played by the scripted model
server), else answered ``502`` as a proxy that cannot reach the host does; a ``CONNECT`` is refused with ``502``.

Example::

    with ForwardProxy(upstream=model_server.url) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)          # or every spelling: proxy.environment()
        ...
        assert proxy.requests == []                           # nothing went through it
"""

from __future__ import annotations

import http.client
import sys
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runner.core.loopback import PROXY_VARIABLES

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
               "trailers", "transfer-encoding", "upgrade"}


@dataclass(frozen=True)
class ProxiedRequest:
    """One request the proxy received: ``method`` and ``target`` as the request line gave them (an absolute URL,
    or ``host:port`` for ``CONNECT``)."""

    method: str
    target: str


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class ForwardProxy:
    """A counting forward proxy (see the module docstring).

    Args:
        upstream: where plain HTTP requests are forwarded (``http://127.0.0.1:PORT``, any path ignored); ``None``:
            every request is answered ``502``.
    """

    def __init__(self, upstream: str | None = None) -> None:
        self.upstream = urllib.parse.urlsplit(upstream) if upstream else None
        self.requests: list[ProxiedRequest] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The proxy's URL, as ``HTTP_PROXY`` takes it."""
        if self._httpd is None:
            raise RuntimeError("the proxy is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def environment(self) -> dict[str, str]:
        """Every proxy variable (upper and lower case, ``ALL_PROXY`` included) set to this proxy."""
        return dict.fromkeys(PROXY_VARIABLES, self.url)

    def _record(self, method: str, target: str) -> None:
        with self._lock:
            self.requests.append(ProxiedRequest(method, target))

    def start(self) -> ForwardProxy:
        owner = self

        class Handler(_Handler):
            proxy = owner

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="forward-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> ForwardProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    proxy: ForwardProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Silence the per-request log lines on stderr."""

    def do_CONNECT(self) -> None:  # noqa: N802 - http.server's names
        self.proxy._record("CONNECT", self.path)
        self._refuse()

    def do_GET(self) -> None:  # noqa: N802
        self._forward()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

    def _forward(self) -> None:
        self.proxy._record(self.command, self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        upstream = self.proxy.upstream
        if upstream is None:
            self._refuse()
            return
        target = urllib.parse.urlsplit(self.path)
        path = urllib.parse.urlunsplit(("", "", target.path or "/", target.query, ""))
        headers = {name: value for name, value in self.headers.items() if name.lower() not in _HOP_BY_HOP}
        headers["Host"] = upstream.netloc
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
        try:
            connection.request(self.command, path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        except OSError:
            self._refuse()
            return
        finally:
            connection.close()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in _HOP_BY_HOP | {"content-length"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self) -> None:
        data = b"proxy: cannot reach the host"
        self.send_response(502)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
