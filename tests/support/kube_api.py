"""A fake Kubernetes API server with a scripted KubeRay operator, over real HTTP on 127.0.0.1.

No Kubernetes cluster or KubeRay operator can run on the test machine (no container engine, no network), so this
stands in for one: the real ``kubernetes`` client talks to it through a real kubeconfig, and it answers the few
endpoints ``runner.kuberay.client`` uses, in the shapes the API server uses:

- ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims (create with ``fieldValidation``, read, patch,
  delete;
  ``ownerReferences`` garbage collection when their owner is deleted);
- RayJobs (``ray.io/v1``): create (with ``fieldValidation=Strict`` it refuses unknown fields, using the strict
  CRD schema when one is given), get, delete, and watch (``watch=true``, one RayJob by ``fieldSelector``);
- the submitter pod (listed by ``job-name``) and its log.

The "operator" is a script: ``statuses`` are applied to the RayJob one per watch event, in order; ``gone_after``
makes one watch end with a ``410 Gone`` ERROR event after that many events, as an API server does when the
client's resourceVersion has been compacted. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

_CORE = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/"
                   r"(?P<kind>configmaps|secrets|serviceaccounts|persistentvolumeclaims|pods)"
                   r"(?:/(?P<name>[^/]+))?"
                   r"(?P<log>/log)?$")
_RAYJOBS = re.compile(r"^/apis/ray\.io/v1/namespaces/(?P<ns>[^/]+)/rayjobs(?:/(?P<name>[^/]+))?$")


@dataclass
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class FakeKubernetes:
    """The server's state and script; :meth:`start` serves it until :meth:`stop`.

    Attributes:
        statuses: RayJob ``status`` dicts the operator sets, one per watch event.
        gone_after: after this many events on a watch, end it with 410 Gone (once).
        pod_phase: the submitter pod's phase once the RayJob exists (``None``: no pod).
        log_lines: what the submitter pod printed.
        strict_errors: ``manifest -> list of errors`` used for ``fieldValidation=Strict`` (e.g. the CRD schema).
        rayjobs_installed: ``False`` answers 404 for RayJobs, as a cluster without the KubeRay CRD does.
    """

    statuses: list[dict[str, Any]] = field(default_factory=list)
    gone_after: int | None = None
    pod_phase: str | None = "Running"
    log_lines: list[str] = field(default_factory=list)
    strict_errors: Callable[[dict[str, Any]], list[str]] | None = None
    rayjobs_installed: bool = True
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    _version: int = 100
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeKubernetes:
        fake = self

        class Handler(_Handler):
            server_state = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def write_kubeconfig(self, path: Path, namespace: str = "evals") -> Path:
        """A kubeconfig whose current context points at this server, with ``namespace`` as its default."""
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}],
            "current-context": "fake",
        }))
        return path

    def add_secret(self, name: str, namespace: str = "evals") -> None:
        self.objects[("secrets", namespace, name)] = {"metadata": {"name": name, "namespace": namespace},
                                                      "data": {"AWS_ACCESS_KEY_ID": "ZmFrZQ=="}}

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def requests_to(self, method: str, fragment: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and fragment in r.path]

    def next_version(self) -> str:
        self._version += 1
        return str(self._version)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}


class _Handler(BaseHTTPRequestHandler):
    server_state: FakeKubernetes

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        fake = self.server_state
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with fake._lock:
            fake.requests.append(Request(method, url.path, query, body))
        if match := _RAYJOBS.match(url.path):
            if not fake.rayjobs_installed:
                return self._reply(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return self._rayjobs(method, match["ns"], match["name"], query, body)
        if match := _CORE.match(url.path):
            return self._core(method, match["kind"], match["ns"], match["name"], bool(match["log"]), query, body)
        return self._reply(404, _status(404, "NotFound", f"no route for {url.path}"))

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _create(self, kind: str, ns: str, body: dict[str, Any]) -> None:
        fake = self.server_state
        name = body["metadata"]["name"]
        if (kind, ns, name) in fake.objects:
            return self._reply(409, _status(409, "AlreadyExists", f'{kind} "{name}" already exists'))
        obj = json.loads(json.dumps(body))
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), resourceVersion=fake.next_version(),
                               creationTimestamp="2026-09-01T12:00:00Z")
        fake.objects[(kind, ns, name)] = obj
        self._reply(201, obj)

    def _core(self, method: str, kind: str, ns: str, name: str | None, log: bool, query: dict[str, str],
              body: Any) -> None:
        fake = self.server_state
        if kind == "pods":
            return self._pods(ns, name, log, query)
        if method == "POST":
            return self._create(kind, ns, body)
        obj = fake.get(kind, ns, name or "")
        if obj is None:
            return self._reply(404, _status(404, "NotFound", f'{kind} "{name}" not found'))
        if method == "PATCH":
            obj["metadata"].update(body.get("metadata") or {})
            obj["metadata"]["resourceVersion"] = fake.next_version()
            return self._reply(200, obj)
        if method == "DELETE":
            del fake.objects[(kind, ns, name)]
            return self._reply(200, _status(200, "", "deleted") | {"status": "Success"})
        return self._reply(200, obj)

    def _pods(self, ns: str, name: str | None, log: bool, query: dict[str, str]) -> None:
        fake = self.server_state
        selector = query.get("labelSelector", "")
        job = selector.removeprefix("job-name=")
        pods = []
        if fake.pod_phase is not None:
            pods = [{"metadata": {"name": f"{key[2]}-abcde", "namespace": ns, "labels": {"job-name": key[2]},
                                  "creationTimestamp": "2026-09-01T12:01:00Z"},
                     "status": {"phase": fake.pod_phase}}
                    for key in fake.objects if key[0] == "rayjobs" and key[1] == ns]
        if log:
            if not any(p["metadata"]["name"] == name for p in pods):
                return self._reply(404, _status(404, "NotFound", f'pods "{name}" not found'))
            return self._reply(200, "".join(line + "\n" for line in fake.log_lines), "text/plain")
        selected = [p for p in pods if p["metadata"]["labels"]["job-name"] == job]
        self._reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                          "items": selected})

    def _rayjobs(self, method: str, ns: str, name: str | None, query: dict[str, str], body: Any) -> None:
        fake = self.server_state
        if method == "POST":
            if query.get("fieldValidation") == "Strict" and fake.strict_errors is not None:
                errors = fake.strict_errors(body)
                if errors:
                    message = "RayJob in version \"v1\" cannot be handled as a RayJob: strict decoding error: "
                    return self._reply(400, _status(400, "BadRequest", message + ", ".join(errors)))
            return self._create("rayjobs", ns, body)
        if name is None and query.get("watch") in ("true", "1", "True"):
            return self._watch(ns, query)
        obj = fake.get("rayjobs", ns, name or "")
        if obj is None:
            return self._reply(404, _status(404, "NotFound", f'rayjobs.ray.io "{name}" not found'))
        if method == "DELETE":
            del fake.objects[("rayjobs", ns, name)]
            uid = obj["metadata"]["uid"]
            for key in [k for k, o in fake.objects.items()
                        if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])]:
                del fake.objects[key]
            return self._reply(200, obj)
        return self._reply(200, obj)

    def _watch(self, ns: str, query: dict[str, str]) -> None:
        fake = self.server_state
        name = query.get("fieldSelector", "").removeprefix("metadata.name=")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        sent = 0
        while fake.statuses:
            obj = fake.get("rayjobs", ns, name)
            if obj is None:
                break
            if fake.gone_after is not None and sent >= fake.gone_after:
                fake.gone_after = None
                event = {"type": "ERROR", "object": _status(410, "Expired", "too old resource version: 101 (150)")}
                self.wfile.write((json.dumps(event) + "\n").encode())
                break
            obj["status"] = fake.statuses.pop(0)
            obj["metadata"]["resourceVersion"] = fake.next_version()
            self.wfile.write((json.dumps({"type": "MODIFIED", "object": obj}) + "\n").encode())
            self.wfile.flush()
            sent += 1
        self.close_connection = True
