"""A store's credentials checked once when it is opened, where a missing one would otherwise look like an outage.

Azure Blob Storage through adlfs with an account name and no key, SAS token or connection string authenticates with
azure-identity's ``DefaultAzureCredential``, which tries each of its sources in turn (environment, workload identity,
managed identity, the Azure CLI...) on every request. Where none works, each request fails only after the managed
identity endpoint's own timeouts, and azure-identity logs a dozen lines each time: a run without ``az login`` took
148 s and ended on the probe's deadline, reported as an unavailable store. Here one token is asked for as the store is
opened, with a deadline of its own; a failure is one line that names the credentials and the ways to give them.

S3 and GCS need no such check: botocore and google-auth fail at once, with errors the store's messages already
read as refused credentials (:mod:`runner.storage.error_kinds`). Which store's credential is checked, for which scope,
and the ways to give one, are the store's facts (:attr:`runner.storage.protocols.StoreFacts.token_credential`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from runner.core.errors import StorageError, one_line
from runner.storage.protocols import STORES, StoreFacts

AZURE_TOKEN_TIMEOUT_S = 30.0
"""Seconds the first token of ``DefaultAzureCredential`` may take (its managed-identity probe alone can take tens
of seconds where no endpoint answers)."""


def check(fs: Any, uri: str) -> None:
    """Check the credentials of the filesystem ``fs`` just opened for ``uri`` where a missing one would otherwise
    surface late and disguised: a filesystem whose credential is a store's
    :attr:`~runner.storage.protocols.StoreFacts.token_credential` (today: adlfs on ``DefaultAzureCredential``) gets
    one token for the store's scope; other filesystems pass at once.

    Raises:
        StorageError: no credential gives a token within :data:`AZURE_TOKEN_TIMEOUT_S` seconds, or the credential
            refused (one line naming the account and the ways to give credentials).
    """
    credential = getattr(fs, "sync_credential", None)
    facts = _checked_store(type(credential).__name__) if credential is not None else None
    if facts is None:
        return
    ways = facts.credential_ways
    account = getattr(fs, "account_name", None) or "?"
    outcome: dict[str, BaseException | None] = {}

    def fetch() -> None:
        try:
            credential.get_token(facts.token_scope)
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - reported below, in one line
            outcome["error"] = exc

    identity_log = logging.getLogger("azure.identity")
    level = identity_log.level
    identity_log.setLevel(logging.CRITICAL)  # its own account of each source it tried: the line below says it
    try:
        worker = threading.Thread(target=fetch, name="azure-credential-check", daemon=True)
        worker.start()
        worker.join(AZURE_TOKEN_TIMEOUT_S)
    finally:
        identity_log.setLevel(level)
    if "error" not in outcome:
        raise StorageError(f"cannot open {uri}: no Azure credential for storage account {account} answered within "
                           f"{AZURE_TOKEN_TIMEOUT_S:g} s ({facts.token_credential} tried its sources in turn); "
                           f"nothing was written; {ways}")
    error = outcome["error"]
    if error is not None:
        first = one_line(str(error)).split(". ", 1)[0][:200]
        raise StorageError(f"cannot open {uri}: no Azure credential for storage account {account} "
                           f"({type(error).__name__}: {first}); nothing was written; {ways}")


def _checked_store(credential_type: str) -> StoreFacts | None:
    """The facts of the store whose credential of type name ``credential_type`` is checked at open, or ``None``."""
    return next((facts for facts in STORES if facts.token_credential == credential_type), None)
