"""The probe of an object store's conditional writes, once per run, before the lease and any record.

Every promise of the store rests on one primitive: a write that fails when its key exists (``If-None-Match: *`` on
S3 and Azure Blob Storage, ``ifGenerationMatch=0`` on Google Cloud Storage: :mod:`runner.storage.protocols`). A
store that ignores the condition overwrites a record and lets two drivers take one lease; one that does not
implement it answers 501 to every record write. The probe writes one key twice under the condition: the second
write must be refused.
"""

from __future__ import annotations

import contextlib
import uuid

import structlog

from runner.core.errors import StorageError, exception_line
from runner.storage.error_kinds import FaultKind, fault_kind, protocol_of
from runner.storage.protocols import condition_of
from runner.storage.store import ResultStore

PROBE_PREFIX = ".conditional-write-probe-"
"""The probe's key under the run root (one fresh name per probe, deleted afterwards)."""

OPT_IN = "--allow-overwriting-store"
_HONOURED_BY = "Amazon S3, Google Cloud Storage and Azure Blob Storage do"


def check_conditional_writes(store: ResultStore, allow_overwriting: bool = False) -> bool:
    """Probe whether ``store`` honours conditional writes; on a local disk (``os.link``) nothing is probed.

    Args:
        store: the run's store.
        allow_overwriting: on a store that does not honour them, write anyway: :attr:`ResultStore.conditional`
            is turned off (an existence check, then a plain write) and a ``storage.unconditional`` warning says
            what that risks.

    Returns:
        whether the store honours conditional writes.

    Raises:
        StorageError: the store does not honour them and ``allow_overwriting`` is off (one line naming the
            problem and the way out), or the probe could not be written.
    """
    if store.is_local:
        return True
    path = store.path(f"{PROBE_PREFIX}{uuid.uuid4().hex}")
    shown = store.display(path)
    condition = condition_of(protocol_of(store.uri))
    problem = None
    try:
        store.create(path, b"first")
        try:
            store.create(path, b"second")
            problem = f"a second write of one key with {condition} replaced the first"
        except FileExistsError:
            pass
    except Exception as exc:  # noqa: BLE001 - a backend failure becomes one line
        if fault_kind(exc) is not FaultKind.UNSUPPORTED:
            raise StorageError(store.explain(f"cannot write {shown}", exc)) from None
        problem = f"it answered a write with {condition} with 501 Not Implemented ({exception_line(exc)})"
    finally:
        with contextlib.suppress(Exception):
            store.fs.rm_file(path)
    if problem is None:
        return True
    risk = ("records could be overwritten and a second driver on the run would not be refused")
    if not allow_overwriting:
        raise StorageError(
            f"storage {store.uri} does not honour conditional writes: {problem}, so {risk}; use a store that "
            f"honours {condition} ({_HONOURED_BY}), or pass {OPT_IN} to write each record after an existence check "
            "instead"
        )
    store.conditional = False
    structlog.get_logger("runner").warning(
        "storage.unconditional", storage=store.uri, problem=problem,
        detail=f"{OPT_IN}: records are written after an existence check, which two writers can race; {risk}")
    return False
