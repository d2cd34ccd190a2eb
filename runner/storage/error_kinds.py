"""What kind of failure a storage backend raised, and the advice that fits it.

fsspec backends raise their own exceptions:

- s3fs turns S3's answers into ``OSError`` subclasses (``PermissionError`` for 403, ``FileNotFoundError`` for 404,
  ``OSError(EBUSY)`` for 503...) and keeps botocore's ``ClientError``, with the HTTP status, as ``__cause__``
  (``s3fs/errors.py``, ``translate_boto_error``);
- gcsfs raises ``FileNotFoundError`` for 404, ``FileExistsError`` for 412, a plain ``OSError("Forbidden: ...")``
  for 403, ``requests``' ``ProxyError`` for 502, and its ``HttpError`` with the status as ``code`` for the rest
  (``gcsfs/retry.py``, ``validate_response``);
- adlfs lets azure-core's ``HttpResponseError`` through, with the status as ``status_code``
  (``ClientAuthenticationError`` for 401/403, ``ResourceNotFoundError`` for 404), and azure-core's
  ``ServiceRequestError`` (no request sent: the connection failed) and ``ServiceResponseError`` (the connection
  broke before the answer);
- network faults arrive as botocore's, aiohttp's, requests' or azure-core's exceptions.

:func:`fault_kind` reads the HTTP status anywhere in the exception's chain first, then the exception's type and
``errno``, without importing any backend. What differs by store (its clients' network failures, a 403 by message,
its credentials in words) it reads from the stores' facts (:mod:`runner.storage.protocols`).
"""

from __future__ import annotations

import enum
import errno
import sys
from collections.abc import Iterable, Iterator

from runner.storage.local_disk import WAY_OUT, HardLinksUnsupported
from runner.storage.protocols import LOCAL_PROTOCOLS, STORES, condition_of, credentials_of, protocol_of

__all__ = ["FaultKind", "advice", "credentials_of", "fault_kind", "http_status", "is_transient", "protocol_of"]

_TRANSIENT_ERRNOS = {errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE,
                     getattr(errno, "EREMOTEIO", errno.EIO)}
"""``errno`` values of failures that go away by themselves: s3fs maps HTTP 503/SlowDown and 409 to ``EBUSY`` and
500/InternalError to ``EREMOTEIO``."""


def _union(pairs: Iterable[tuple[str, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    """(module, class names) pairs as module -> class names, each once, in order."""
    merged: dict[str, tuple[str, ...]] = {}
    for module, names in pairs:
        merged[module] = tuple(dict.fromkeys([*merged.get(module, ()), *names]))
    return merged


_NETWORK_ERRORS = _union(pair for facts in STORES for pair in facts.network_errors)
"""Network failures of the HTTP clients under every store's fsspec backend (module -> class names,
:attr:`StoreFacts.network_errors <runner.storage.protocols.StoreFacts.network_errors>`). Looked up only in modules
already imported."""
_COULD_NOT_CONNECT = frozenset(name for facts in STORES for name in facts.could_not_connect)
"""The network failures above that mean no connection was made (rather than one that broke)."""
_FORBIDDEN_MESSAGES = tuple(facts.forbidden_message for facts in STORES if facts.forbidden_message)
"""How backends word a 403 they report by message alone (gcsfs: ``gcsfs/retry.py``, ``validate_response``)."""
_REFUSED_CREDENTIALS = frozenset(name for facts in STORES for name in facts.refused_credential_errors)
"""Exception class names that mean no credential gave a token (azure-identity: nothing was sent, so no status)."""


class FaultKind(str, enum.Enum):
    """What a storage failure means for the user.

    ``denied``: the credentials are refused (401/403). ``missing``: the bucket or path does not exist (404).
    ``unavailable``: the store answered with a server error (5xx other than 501) or throttling (429), or the
    connection broke or timed out after it was made; it looks temporary. ``unreachable``: no connection could be
    made (a wrong endpoint, or a store that is down). ``unsupported``: the store does not implement the request
    (501, e.g. conditional writes). ``other``: anything else.
    """

    DENIED = "denied"
    MISSING = "missing"
    UNAVAILABLE = "unavailable"
    UNREACHABLE = "unreachable"
    UNSUPPORTED = "unsupported"
    OTHER = "other"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes and contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_status(exc: BaseException) -> int | None:
    """The HTTP status a storage backend's exception carries (botocore's ``response``, aiohttp's ``status``,
    gcsfs' ``code``, azure-core's ``status_code``), anywhere in its chain; ``None`` if none does."""
    for error in _chain(exc):
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(status, int):
                return status
        for name in ("status", "code", "status_code"):
            value = getattr(error, name, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
    return None


def _network_error(error: BaseException) -> str | None:
    """``"unreachable"`` or ``"unavailable"`` for a network failure of an HTTP client, else ``None``."""
    for module_name, class_names in _NETWORK_ERRORS.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for class_name in class_names:
            cls = getattr(module, class_name, None)
            if isinstance(cls, type) and isinstance(error, cls):
                could_not_connect = any(base.__name__ in _COULD_NOT_CONNECT for base in type(error).__mro__)
                return "unreachable" if could_not_connect else "unavailable"
    return None


def fault_kind(exc: BaseException) -> FaultKind:
    """The :class:`FaultKind` of an exception a storage backend raised."""
    status = http_status(exc)
    if status is not None:
        if status == 501:
            return FaultKind.UNSUPPORTED
        if status >= 500 or status == 429:
            return FaultKind.UNAVAILABLE
        if status in (401, 403):
            return FaultKind.DENIED
        if status == 404:
            return FaultKind.MISSING
    for error in _chain(exc):
        network = _network_error(error)
        if network is not None:
            return FaultKind(network)
        if isinstance(error, PermissionError) or (type(error) is OSError
                                                  and str(error).startswith(_FORBIDDEN_MESSAGES)):
            return FaultKind.DENIED
        if any(base.__name__ in _REFUSED_CREDENTIALS for base in type(error).__mro__):
            return FaultKind.DENIED
        if isinstance(error, FileNotFoundError):
            return FaultKind.MISSING
        if isinstance(error, ConnectionRefusedError):
            return FaultKind.UNREACHABLE
        if isinstance(error, (TimeoutError, ConnectionError)):
            return FaultKind.UNAVAILABLE
        if isinstance(error, OSError) and error.errno == errno.ENOSYS:
            return FaultKind.UNSUPPORTED
        if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
            return FaultKind.UNAVAILABLE
    return FaultKind.OTHER


def is_transient(exc: BaseException) -> bool:
    """Whether a failed write is worth retrying for a while: the store is unavailable or unreachable (a gateway
    restarting refuses connections too)."""
    return fault_kind(exc) in (FaultKind.UNAVAILABLE, FaultKind.UNREACHABLE)


def advice(uri: str | None, exc: BaseException | None = None, flag: str | None = None) -> str:
    """What to check when the store at ``uri`` failed with ``exc``, for its protocol and the :class:`FaultKind`;
    ``flag`` names the option the URI came from when it is not the run's storage (``--cache``)."""
    protocol = protocol_of(uri)
    local = protocol in LOCAL_PROTOCOLS
    kind = fault_kind(exc) if exc is not None else FaultKind.OTHER
    named, store = (f"the {flag} URI", f"the {flag} storage") if flag else ("the storage URI", "the storage")
    if local and exc is not None and any(isinstance(error, HardLinksUnsupported) for error in _chain(exc)):
        way_out = WAY_OUT.replace("--storage", flag) if flag else WAY_OUT
        return (f"the filesystem makes no hard links, through which the local store writes each file once and "
                f"whole; {way_out}")
    if local:
        return f"check {named} and that this process can write there"
    if kind is FaultKind.DENIED:
        return f"{store} refused the credentials: check them ({credentials_of(protocol)})"
    if kind is FaultKind.MISSING:
        return f"check that the bucket (or container) of {named} exists, and the endpoint if you set one"
    if kind is FaultKind.UNAVAILABLE:
        return (f"{store} looks temporarily unavailable (a server error, throttling or a network fault); try "
                "again once it answers")
    if kind is FaultKind.UNSUPPORTED:
        return (f"{store} does not implement a request runner sends (conditional writes, {condition_of(protocol)}); "
                "use a store that does, or see --allow-overwriting-store")
    return f"check {named} and its credentials ({credentials_of(protocol)})"
