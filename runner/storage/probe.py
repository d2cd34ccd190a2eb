"""The probe of a store's write-once primitive, once per run, before the lease and any record.

Every promise of the store rests on one primitive: a write that fails when its key exists (``If-None-Match: *`` on
S3 and Azure Blob Storage, ``ifGenerationMatch=0`` on Google Cloud Storage: :mod:`runner.storage.protocols`; on a
local disk a temporary file hard-linked to its name, :mod:`runner.storage.local_disk`). A store that ignores the
condition overwrites a record and lets two drivers take one lease; one that does not implement it answers 501 to
every record write. The probe writes one key twice under the condition: the second write must be refused. On a
local disk it makes one hard link: a filesystem that makes none (a FUSE mount of a bucket) is refused in one line
that names hard links and the way out.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import structlog

from runner.core.errors import StorageError, exception_line
from runner.storage import local_disk
from runner.storage.error_kinds import FaultKind, fault_kind
from runner.storage.object_store import ObjectStore
from runner.storage.protocols import condition_of, honoured_by, protocol_of

PROBE_PREFIX = ".conditional-write-probe-"
"""The probe's key under the run root (one fresh name per probe, deleted afterwards)."""

OPT_IN = "--allow-overwriting-store"
_HONOURED_BY = f"{honoured_by()} do"


def check_conditional_writes(store: ObjectStore, allow_overwriting: bool = False) -> bool:
    """Probe whether ``store`` honours conditional writes; on a local disk, whether its filesystem makes hard links
    (:func:`check_hard_links`).

    Args:
        store: the run's store.
        allow_overwriting: on a store that does not honour them, write anyway: :attr:`ObjectStore.conditional
            <runner.storage.object_store.ObjectStore.conditional>` is turned off (an existence check, then a plain
            write) and a ``storage.unconditional`` warning says what that risks.

    Returns:
        whether the store honours conditional writes.

    Raises:
        StorageError: the store does not honour them and ``allow_overwriting`` is off (one line naming the
            problem and the way out), the probe could not be written, or a local store's filesystem makes no hard
            links.
    """
    if store.is_local:
        check_hard_links(store)
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
            store.delete_object(path)
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


def check_hard_links(store: ObjectStore) -> None:
    """Make one hard link where the local ``store``'s run will write: in its run folder, or, before that exists, in
    the nearest folder above it that does (the run's folders will be made there, on the same filesystem), and remove
    it; nothing else is created. A folder this process cannot write is left to the run's first write, which says so.

    Raises:
        StorageError: the filesystem makes no hard links (:class:`~runner.storage.local_disk.HardLinksUnsupported`):
            one line naming them and the way out (the bucket's own URL, or a local disk).
    """
    folder = store.root
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    path = os.path.join(folder, f"{PROBE_PREFIX}{uuid.uuid4().hex}")
    try:
        local_disk.write_once(path, b"probe")
    except local_disk.HardLinksUnsupported as exc:
        raise StorageError(
            f"storage {store.display(store.root)} is on a filesystem that makes no hard links ({exc.strerror}), and "
            f"the local store writes every record through one (a temporary file linked to the record's name: "
            f"written once, whole); {local_disk.WAY_OUT}") from None
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
