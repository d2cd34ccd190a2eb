"""Traffic to the run's own model replicas never goes through a proxy of the environment.

HTTP clients read ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``ALL_PROXY``, in upper or lower case, from the environment
(httpx, which the ``openai`` client uses, through ``urllib.request.getproxies``; ``requests`` alike), and send every
request to that proxy unless ``NO_PROXY`` names the host: no client leaves loopback out on its own. Many clusters
set a proxy for the way out and no ``NO_PROXY``, and a proxy cannot reach a replica's port on this machine's
loopback: the readiness probe of a run's ``transformers serve`` went to the proxy once a second until the start-up
timeout (issue 27), and SGLang's own warm-up request to itself fails the same way (sgl-project/sglang#9155, #9814).

So the runner's clients of a replica (its readiness and health probes, the model layer's calls to a served model)
are built with ``trust_env=False``, and the replica's server gets :func:`bypass_loopback`'s ``NO_PROXY`` for the
requests it makes to itself. A model at a URL the user gave is reached as the environment says, proxy included.

Those clients also share one TLS context (:func:`tls_context`): a replica speaks plain HTTP, but httpx builds a
context for every client it makes.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
"""The variables that send a client's requests to a proxy (Python's ``urllib`` reads any ``<scheme>_proxy``, the
lower-case spelling winning; these are the ones clusters set)."""
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The names of this machine's loopback: where every replica listens (``runner.serving.engines.HOST``)."""


def proxied(environ: Mapping[str, str]) -> dict[str, str]:
    """The proxy variables set (non-empty) in ``environ``: name -> value."""
    return {name: environ[name] for name in PROXY_VARIABLES if environ.get(name)}


def bypass_loopback(environ: Mapping[str, str]) -> dict[str, str]:
    """``NO_PROXY`` and ``no_proxy`` for a process started with ``environ``: the hosts either spelling already names
    (in their order, once each), then the loopback hosts (:data:`LOOPBACK_HOSTS`) not among them. Both spellings get
    the same value, since clients read one or the other (``urllib`` prefers the lower case, and an empty one
    cancels the other).

    Args:
        environ: the process's environment (not changed).

    Returns:
        ``{"NO_PROXY": value, "no_proxy": value}``, to set over ``environ``.
    """
    hosts: list[str] = []
    for name in NO_PROXY_VARIABLES:
        for host in (environ.get(name) or "").split(","):
            host = host.strip()
            if host and host not in hosts:
                hosts.append(host)
    hosts += [host for host in LOOPBACK_HOSTS if host not in hosts]
    value = ",".join(hosts)
    return {name: value for name in NO_PROXY_VARIABLES}


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of this process's clients of replicas (``verify=`` of an httpx client): a replica speaks
    plain HTTP on loopback, so it is never used to verify anything, but httpx builds one for every client it makes
    otherwise, loading the CA bundle (30 to 60 ms of CPU each, measured on 2 cores): for a health probe every 5 s, on
    the cores a CPU replica serves from, and for a worker's first model call, while it holds the event loop of every
    item in flight."""
    return ssl.create_default_context()
