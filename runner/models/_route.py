"""Where one attempt of a model call goes: a snapshot of the model's endpoint, read once at the attempt's start.

A model the run serves in this process is found in :mod:`runner.core.served`'s table, which a replica's restart
changes at any moment (another port, another served name). An attempt reads the table once, into a :class:`Route`,
and uses only that for everything it does: the URL it sends to, the ``model`` of its body, its limiter key, whether
it streams, and the URL its errors name. So a restart between two steps of an attempt cannot send one replica's
model name to another replica's URL; the attempt that follows a failure takes a new route, and so reaches the
restarted replica.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.core.limits import Endpoint
from runner.core.secrets import mask
from runner.core.served import SERVED_ENDPOINT, ServedEndpoint, served_endpoint


@dataclass(frozen=True)
class Route:
    """One attempt's view of a model's endpoint (see the module's docstring).

    Args:
        base_url: the API root the attempt's requests go to (``http://host:port/v1``).
        wire_model: the model name the request's body carries (a served replica's own name, else the model's).
        endpoint: the key of the run's rate limits and response cache (:class:`~runner.core.limits.Endpoint`):
            every replica of a served model is one endpoint (``served-by-run``), whatever its port.
        replica: the served replica the route was read from, ``None`` for a model the run does not serve here.
    """

    base_url: str
    wire_model: str
    endpoint: Endpoint
    replica: ServedEndpoint | None = None

    @property
    def url(self) -> str:
        """:attr:`base_url` as messages and logs show it: a password in it masked."""
        return mask(self.base_url)

    @property
    def served(self) -> bool:
        """Whether the route goes to a replica the run serves in this process."""
        return self.replica is not None

    @property
    def stream(self) -> bool:
        """Whether the attempt streams its answer (its replica's server cancels only streams,
        :attr:`~runner.core.served.ServedEndpoint.stream`)."""
        return self.replica is not None and self.replica.stream

    @property
    def tokenizer(self) -> str | None:
        """Where the replica's tokenizer loads from when the model layer must count prompts itself; else ``None``."""
        return self.replica.tokenizer if self.replica is not None else None

    @property
    def max_tokens(self) -> int | None:
        """The replica's output limit, in tokens, for a call that sets none; ``None``: the server's own default."""
        return self.replica.max_tokens if self.replica is not None else None


def route_of(provider: str, model: str, base_url: str, pinned: bool) -> Route:
    """The route of a request sent now: to the replica of ``provider:model`` that the run serves in this process
    (one read of :mod:`runner.core.served`'s table), unless the model was given its URL (``pinned``) or none is
    ready; else to ``base_url``.

    Args:
        provider, model: the model (``model`` as its server knows it).
        base_url: the API root fixed when the model was built (given, from the environment, or the provider's).
        pinned: whether that root was given, so that the table is not read.
    """
    name = f"{provider}:{model}" if model else provider
    replica = None if pinned else served_endpoint(name)
    if replica is None:
        return Route(base_url, model, Endpoint(provider, base_url, model))
    return Route(replica.base_url, replica.served_name, Endpoint(provider, SERVED_ENDPOINT, model), replica)
