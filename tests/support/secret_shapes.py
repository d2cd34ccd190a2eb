"""A table of secret shapes (and options that are not secrets), shared by the tests of every path that writes
configuration: the store's messages, run.json, the ConfigMap, the chart and ``submit --dry-run``. Every secret string
is path-safe (no ``/``), so a store can be made to echo it in a real error message."""

SHAPES = [
    ("top-level-key-and-secret", {"key": "AKIA-TOP-1", "secret": "top-secret-2"}, "key",
     ["AKIA-TOP-1", "top-secret-2"]),
    ("nested-client-kwargs", {"client_kwargs": {"aws_secret_access_key": "nested-secret-3", "region_name": "eu"}},
     "client_kwargs.aws_secret_access_key", ["nested-secret-3"]),
    ("deep-in-lists", {"config_kwargs": {"profiles": [{"auth": {"password": "deep-pass-4"}}]}},
     "config_kwargs.profiles[0].auth.password", ["deep-pass-4"]),
    ("camel-case-key-id", {"clientKwargs": {"AccessKeyId": "AKIA-CAMEL-5"}}, "clientKwargs.AccessKeyId",
     ["AKIA-CAMEL-5"]),
    ("token-as-a-dict", {"token": {"type": "service_account", "private_key": "BEGIN-KEY-6"}}, "token.type",
     ["service_account", "BEGIN-KEY-6"]),
    ("session-token", {"client_kwargs": {"aws_session_token": "session-token-7"}},
     "client_kwargs.aws_session_token", ["session-token-7"]),
    ("sas-token", {"account_name": "evals", "sas_token": "sv-2022-sig-8"}, "sas_token", ["sv-2022-sig-8"]),
    ("credential", {"credentials": "cred-blob-9"}, "credentials", ["cred-blob-9"]),
    ("client-secret", {"tenant_id": "t", "client_secret": "client-secret-10"}, "client_secret",
     ["client-secret-10"]),
    ("connection-string-by-name", {"connection_string": "AccountName=evals;AccountKey=conn-key-11=="},
     "connection_string", ["AccountName=evals;AccountKey=conn-key-11==", "conn-key-11=="]),
    ("connection-string-by-value",
     {"options": {"conn": "DefaultEndpointsProtocol=https;AccountName=evals;AccountKey=conn-key-12==;"
                          "EndpointSuffix=core.windows.net"}},
     "options.conn", ["conn-key-12=="]),
    ("url-with-credentials", {"endpoint_url": "http://minio-user:url-pass-13@minio.minio:9000"}, "endpoint_url",
     ["url-pass-13"]),
    # Azure Blob Storage (adlfs): an account key, a SAS as `credential`, a connection string holding a SAS, and a
    # SAS URL under a name that says nothing (its sig= is the secret).
    ("azure-account-key", {"account_name": "evals", "account_key": "acct-key-18=="}, "account_key",
     ["acct-key-18=="]),
    ("azure-sas-as-credential", {"account_name": "evals", "credential": "sv=2022-11-02&ss=b&sp=rw&sig=sas-sig-19"},
     "credential", ["sv=2022-11-02&ss=b&sp=rw&sig=sas-sig-19", "sas-sig-19"]),
    ("azure-connection-string-with-sas",
     {"connection_string": "AccountName=evals;SharedAccessSignature=sv=2022-11-02&sp=rw&sig=sas-sig-20"},
     "connection_string", ["AccountName=evals;SharedAccessSignature=sv=2022-11-02&sp=rw&sig=sas-sig-20",
                           "sv=2022-11-02&sp=rw&sig=sas-sig-20", "sas-sig-20"]),
    ("azure-sas-url-by-value", {"client": {"url": "https://evals.blob.core.windows.net/runs?sv=2022-11-02&sp=r&"
                                                  "sig=sas-sig-21&se=2026-12-01"}},
     "client.url", ["sas-sig-21"]),
    # Google Cloud Storage (gcsfs): a service account's JSON key file given as `token`, and its private key alone.
    ("gcs-service-account-json", {"project": "evals", "token": {
        "type": "service_account", "project_id": "evals-project-25", "private_key_id": "pk-id-22",
        "private_key": "-----BEGIN PRIVATE KEY-----MIIE-key-23-----END PRIVATE KEY-----",
        "client_email": "runner@evals.iam.gserviceaccount.com"}},
     "token.type", ["service_account", "evals-project-25", "pk-id-22",
                    "-----BEGIN PRIVATE KEY-----MIIE-key-23-----END PRIVATE KEY-----",
                    "runner@evals.iam.gserviceaccount.com"]),
    ("gcs-private-key-alone", {"private_key": "-----BEGIN PRIVATE KEY-----MIIE-key-24-----END PRIVATE KEY-----"},
     "private_key", ["-----BEGIN PRIVATE KEY-----MIIE-key-24-----END PRIVATE KEY-----"]),
]
NOT_SECRET = {"endpoint_url": "http://minio.minio:9000", "region_name": "eu-west-1", "anon": False,
              "keyring": "none", "default_block_size": 5242880, "token": None}
