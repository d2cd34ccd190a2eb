"""What the result store relies on in each object store, by fsspec protocol: the store's conditional write (the
write that fails when its key exists, on which every promise of :mod:`runner.storage.store` rests) and where its
credentials come from.

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
documents the behaviour at :attr:`Protocol.condition_doc`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """One object store as the result store uses it.

    Args:
        store: the store's name (``Google Cloud Storage``).
        condition: the condition its conditional write carries (``ifGenerationMatch=0``).
        condition_doc: where the cloud documents that a write under the condition fails when the object exists.
        credentials: where credentials come from, in words, for error messages.
    """

    store: str
    condition: str
    condition_doc: str
    credentials: str


S3 = Protocol(
    store="Amazon S3",
    condition="If-None-Match: *",
    condition_doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html",
    credentials="AWS_* variables or --storage-options",
)
GCS = Protocol(
    store="Google Cloud Storage",
    condition="ifGenerationMatch=0",
    condition_doc="https://cloud.google.com/storage/docs/request-preconditions",
    credentials="Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, 'gcloud auth application-default "
                "login' or the pod's Workload Identity; or --storage-options",
)
AZURE = Protocol(
    store="Azure Blob Storage",
    condition="If-None-Match: *",
    condition_doc="https://learn.microsoft.com/en-us/rest/api/storageservices/specifying-conditional-headers-for-"
                  "blob-service-operations",
    credentials="AZURE_STORAGE_ACCOUNT_NAME with DefaultAzureCredential (AZURE_CLIENT_ID..., the pod's Workload "
                "Identity), AZURE_STORAGE_CONNECTION_STRING, or --storage-options",
)
PROTOCOLS = {"s3": S3, "s3a": S3, "gs": GCS, "gcs": GCS, "az": AZURE, "abfs": AZURE, "abfss": AZURE}
"""fsspec protocols of the object stores whose conditional write is known, and tested against an emulator."""

GENERIC_CONDITION = "a create-only write (fsspec's mode='create')"
"""What the conditional write is called on a store this module does not know."""


def protocol_info(protocol: str) -> Protocol | None:
    """The :class:`Protocol` of an fsspec protocol name (``gs``), or ``None`` for another store."""
    return PROTOCOLS.get(protocol.lower())


def condition_of(protocol: str) -> str:
    """The condition the conditional write of ``protocol`` carries (``If-None-Match: *``, ``ifGenerationMatch=0``),
    or :data:`GENERIC_CONDITION`."""
    info = protocol_info(protocol)
    return info.condition if info else GENERIC_CONDITION
