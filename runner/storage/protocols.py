"""What the result store relies on in each object store, in one table: one frozen :class:`StoreFacts` per store, by
fsspec protocol: the store's conditional write (the write that fails when its key exists, on which every promise of
:mod:`runner.storage.store` rests), where its credentials come from, how its clients report a network failure or
refused credentials, and which credential is checked as it opens. :mod:`runner.storage.error_kinds` (what a failure
means, and the advice), :mod:`runner.storage.credentials` (the check at open) and :mod:`runner.storage.probe` read it,
so a fact about a store is written once.

The store asks every backend for it the same way, ``fs.pipe_file(path, data, mode="create")``, and each fsspec
backend sends its store's own primitive:

- S3 (s3fs): ``PutObject`` with ``If-None-Match: *``; an existing key answers 412 ``PreconditionFailed``
  (``s3fs.core.S3FileSystem._pipe_file``: ``IfNoneMatch="*"``).
- Google Cloud Storage (gcsfs): an upload with the query parameter ``ifGenerationMatch=0``; an existing object
  answers 412 (``gcsfs.core.simple_upload`` and ``initiate_upload``: ``kw = {"ifGenerationMatch": "0"} if mode ==
  "create"``; ``gcsfs.retry.validate_response``: 412 -> ``FileExistsError``).
- Azure Blob Storage (adlfs): ``Put Blob`` (or ``Put Block List``) with ``If-None-Match: *``; an existing blob
  answers 409 ``BlobAlreadyExists`` or 412 ``ConditionNotMet``, which azure-storage-blob both raises as
  ``ResourceExistsError`` (``adlfs.spec.AzureBlobFileSystem._pipe_file``: ``mode="create"`` ->
  ``upload_blob(overwrite=False)``, sent as ``If-None-Match: *``, ``azure.storage.blob._upload_helpers``;
  ``ResourceExistsError`` -> ``FileExistsError``).

Each was checked against its emulator by the requests it sends (``tests/storage/test_probe.py``); each cloud
documents the behaviour at :attr:`StoreFacts.condition_doc`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoreFacts:
    """One object store as the result store uses it.

    Args:
        store: the store's name (``Google Cloud Storage``).
        protocols: the fsspec protocols that open it (``gs``, ``gcs``), lower case.
        condition: the condition its conditional write carries (``ifGenerationMatch=0``); ``None`` where it is not
            known (nor tested against an emulator): messages then say :data:`GENERIC_CONDITION`.
        condition_doc: where the cloud documents that a write under the condition fails when the object exists.
        credentials: where credentials come from, in words, for error messages.
        network_errors: the network failures of the HTTP clients under its fsspec backend, as (module, class names)
            pairs: a connection refused, closed or reset, a read that timed out, a body cut short.
        could_not_connect: those of ``network_errors`` (or their bases) that mean no connection was made, rather
            than one that broke.
        forbidden_message: how its backend words a 403 it reports by message alone (gcsfs: ``Forbidden: ``).
        refused_credential_errors: exception class names (anywhere in an exception's bases) that mean no credential
            gave a token: nothing was sent, so there is no HTTP status.
        token_credential: the class name of the credential whose first token is asked for as the store is opened
            (:mod:`runner.storage.credentials`), ``None`` for none.
        token_scope: the OAuth scope that token is asked for.
        credential_ways: the ways to give credentials, in words, for the message of a failed check.
    """

    store: str
    protocols: tuple[str, ...]
    condition: str | None
    condition_doc: str | None
    credentials: str
    network_errors: tuple[tuple[str, tuple[str, ...]], ...] = ()
    could_not_connect: tuple[str, ...] = ()
    forbidden_message: str | None = None
    refused_credential_errors: tuple[str, ...] = ()
    token_credential: str | None = None
    token_scope: str | None = None
    credential_ways: str | None = None


_AIOHTTP = ("aiohttp", ("ClientConnectionError", "ClientPayloadError", "ServerTimeoutError"))
_URLLIB3 = ("urllib3.exceptions", ("ProtocolError", "TimeoutError"))

S3 = StoreFacts(
    store="Amazon S3",
    protocols=("s3", "s3a"),
    condition="If-None-Match: *",
    condition_doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html",
    credentials="AWS_* variables or --storage-options",
    # s3fs on aiobotocore (aiohttp); botocore's own clients (urllib3) fetch credentials.
    network_errors=(("botocore.exceptions", ("ConnectionError", "HTTPClientError")), _AIOHTTP, _URLLIB3),
    could_not_connect=("EndpointConnectionError", "ClientConnectorError"),
)
GCS = StoreFacts(
    store="Google Cloud Storage",
    protocols=("gs", "gcs"),
    condition="ifGenerationMatch=0",
    condition_doc="https://cloud.google.com/storage/docs/request-preconditions",
    credentials="Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, 'gcloud auth application-default "
                "login' or the pod's Workload Identity; or --storage-options",
    # gcsfs on aiohttp; google-auth on requests (urllib3).
    network_errors=(_AIOHTTP, _URLLIB3, ("requests.exceptions", ("ConnectionError", "Timeout"))),
    could_not_connect=("ClientConnectorError",),
    forbidden_message="Forbidden: ",  # gcsfs/retry.py, validate_response: the only status it reports by message
)
AZURE = StoreFacts(
    store="Azure Blob Storage",
    protocols=("az", "abfs", "abfss"),
    condition="If-None-Match: *",
    condition_doc="https://learn.microsoft.com/en-us/rest/api/storageservices/specifying-conditional-headers-for-"
                  "blob-service-operations",
    credentials="AZURE_STORAGE_ACCOUNT_NAME with DefaultAzureCredential (AZURE_CLIENT_ID..., the pod's Workload "
                "Identity), AZURE_STORAGE_CONNECTION_STRING, or --storage-options",
    network_errors=(("azure.core.exceptions", ("ServiceRequestError", "ServiceResponseError")),),
    could_not_connect=("ServiceRequestError",),
    refused_credential_errors=("ClientAuthenticationError",),  # azure-identity: no credential gave a token
    token_credential="DefaultAzureCredential",
    token_scope="https://storage.azure.com/.default",  # Azure Storage's data plane
    credential_ways="run 'az login', or set AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY or "
                    "AZURE_STORAGE_SAS_TOKEN, a service principal (AZURE_CLIENT_ID, AZURE_TENANT_ID, "
                    "AZURE_CLIENT_SECRET), a pod's Workload Identity, or --storage-options",
)
AZURE_DATA_LAKE_GEN1 = StoreFacts(
    store="Azure Data Lake Storage Gen1",
    protocols=("adl",),
    condition=None,
    condition_doc=None,
    credentials="AZURE_STORAGE_* variables or --storage-options",
)

STORES = (S3, GCS, AZURE, AZURE_DATA_LAKE_GEN1)
"""Every object store with facts of its own, in the order messages name them."""
STORE_FACTS: dict[str, StoreFacts] = {protocol: facts for facts in STORES for protocol in facts.protocols}
"""The facts of each store by fsspec protocol (``s3``, ``gs``, ``az``...)."""
PROTOCOLS: dict[str, StoreFacts] = {protocol: facts for protocol, facts in STORE_FACTS.items() if facts.condition}
"""fsspec protocols of the object stores whose conditional write is known, and tested against an emulator."""

LOCAL_PROTOCOLS = frozenset({"file", "local"})
"""fsspec protocols of a local disk (written through :mod:`runner.storage.local_disk`, not a conditional write)."""

GENERIC_CONDITION = "a create-only write (fsspec's mode='create')"
"""What the conditional write is called on a store this module does not know."""


def protocol_of(uri: str | None) -> str:
    """The protocol of ``uri`` (``file`` for a plain path or none)."""
    return uri.split("://", 1)[0] if uri and "://" in uri else "file"


def store_facts(protocol: str) -> StoreFacts | None:
    """The :class:`StoreFacts` of an fsspec protocol name (``gs``, any case), or ``None`` for another store."""
    return STORE_FACTS.get(protocol.lower())


def condition_of(protocol: str) -> str:
    """The condition the conditional write of ``protocol`` carries (``If-None-Match: *``, ``ifGenerationMatch=0``),
    or :data:`GENERIC_CONDITION`."""
    facts = store_facts(protocol)
    return facts.condition if facts is not None and facts.condition else GENERIC_CONDITION


def honoured_by() -> str:
    """The stores whose conditional write is known, in words: ``Amazon S3, Google Cloud Storage and Azure Blob
    Storage``."""
    names = list(dict.fromkeys(facts.store for facts in PROTOCOLS.values()))
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def credentials_of(protocol: str) -> str:
    """Where the credentials of ``protocol`` come from, in words (its :attr:`StoreFacts.credentials`, or the
    filesystem's own for another store)."""
    facts = store_facts(protocol)
    if facts is not None:
        return facts.credentials
    return f"the {protocol} filesystem's credentials or --storage-options"
