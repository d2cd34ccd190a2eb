"""A table of secret shapes (and options that are not secrets), shared by the tests of every path that writes
configuration: the store's messages, run.json, the ConfigMap, the chart and ``submit --dry-run``."""

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
]
NOT_SECRET = {"endpoint_url": "http://minio.minio:9000", "region_name": "eu-west-1", "anon": False,
              "keyring": "none", "default_block_size": 5242880, "token": None}
