"""Azure credentials checked as the store opens: with an account name and nothing that authenticates, one line that
names the account and the ways to give credentials, in well under a second, instead of every request waiting on
DefaultAzureCredential's sources and failing as an outage. Against the real adlfs and azure-identity (no Azure
service is reached: the token request fails before any)."""

from __future__ import annotations

import time

import pytest

from runner.core.errors import StorageError
from runner.storage import ResultStore, credentials

AZURE_VARIABLES = ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY",
                   "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CLIENT_ID", "AZURE_CLIENT_ID", "AZURE_TENANT_ID",
                   "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_STORAGE_ANON", "IDENTITY_ENDPOINT",
                   "MSI_ENDPOINT")


@pytest.fixture
def bare_azure(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """An account name and no credential: no variables, no Azure CLI login (a home without ~/.azure)."""
    for name in AZURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "mystorageaccount")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path / ".azure"))


def test_an_azure_store_without_credentials_is_one_line_at_once(bare_azure: None) -> None:
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        ResultStore("az://runs/toy").fs
    assert time.monotonic() - started < credentials.AZURE_TOKEN_TIMEOUT_S
    message = str(caught.value)
    assert message.startswith("cannot open az://runs/toy: no Azure credential for storage account mystorageaccount (")
    assert "nothing was written; run 'az login', or set AZURE_STORAGE_CONNECTION_STRING" in message
    assert "\n" not in message


def test_the_cli_refuses_it_with_exit_2_before_writing(bare_azure: None, cli) -> None:
    result = cli("-b", "toy", "-s", "calculator", "--sequential", "--storage", "az://runs/toy")
    assert result.returncode == 2
    assert "no Azure credential for storage account mystorageaccount" in result.stderr
    assert result.stderr.count("\n") == 1 and "DefaultAzureCredential failed" in result.stderr


class DefaultAzureCredential:
    """Stands in for azure-identity's credential where its sources hang (a managed-identity endpoint that never
    answers), which this machine cannot reproduce on demand."""

    def get_token(self, *scopes: str) -> None:
        time.sleep(5)


class HangingAzureFs:
    account_name = "slowaccount"
    sync_credential = DefaultAzureCredential()


def test_a_credential_that_never_answers_is_refused_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(credentials, "AZURE_TOKEN_TIMEOUT_S", 0.2)
    with pytest.raises(StorageError, match=r"^cannot open az://c/run: no Azure credential for storage account "
                                           r"slowaccount answered within 0.2 s"):
        credentials.check(HangingAzureFs(), "az://c/run")


def test_other_stores_and_given_keys_are_not_checked(tmp_path) -> None:
    credentials.check(ResultStore(str(tmp_path)).fs, str(tmp_path))  # no sync_credential: nothing to do
    keyed = type("Keyed", (), {"sync_credential": None, "account_name": "a"})()
    credentials.check(keyed, "az://c/run")


def test_a_token_refused_later_reads_as_refused_credentials() -> None:
    from azure.core.exceptions import ClientAuthenticationError

    from runner.storage.error_kinds import FaultKind, advice, fault_kind

    error = ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")
    assert fault_kind(error) is FaultKind.DENIED
    assert advice("az://c/run", error).startswith("the storage refused the credentials: check them (")
