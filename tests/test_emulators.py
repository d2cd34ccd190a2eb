"""The emulators the storage tests start (``tests/support/emulators.py``): a missing Azurite is one clear line saying
how to install it, not a traceback or a skipped test."""

import pytest

from tests.support import emulators
from tests.support.emulators import EmulatorError


def test_a_missing_azurite_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EmulatorError) as caught:
        with emulators.start("azure"):
            pass
    assert str(caught.value) == (
        "Azurite (the Azure Blob emulator) is not on PATH: install it with 'npm install -g azurite' (Node.js 18 or "
        "later), or put the folder holding azurite-blob on PATH (.ci/run installs it under .ci-node/)")
