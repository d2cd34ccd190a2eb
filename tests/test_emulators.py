"""The emulators the storage tests start (``tests/support/emulators.py``): a missing Azurite is one clear line saying
how to install it, not a traceback or a skipped test."""

import pytest

from tests.support import emulators
from tests.support.emulators import EmulatorError


def test_a_missing_azurite_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(emulators, "CHECKOUT_AZURITE", tmp_path / "azurite-blob")
    with pytest.raises(EmulatorError) as caught:
        with emulators.start("azure"):
            pass
    assert str(caught.value) == (
        "Azurite (the Azure Blob emulator) is neither in .test-tools/node nor on PATH: run "
        "scripts/test-prerequisites.sh (it installs the pinned release with npm), or put the folder holding "
        "azurite-blob on PATH")


def test_the_prerequisites_script_finds_everything_in_place_and_installs_nothing():
    """The README's test command ran scripts/test-prerequisites.sh before pytest: run again, it finds Azurite in the
    checkout, libfuse 2, fusermount and Chromium, and says so in one line."""
    import subprocess

    done = subprocess.run([str(emulators.CHECKOUT_AZURITE.parents[4] / "scripts" / "test-prerequisites.sh")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "test-prerequisites: ok (azurite 3.37.0 in .test-tools/node, libfuse 2, fusermount, chromium)"]
    assert emulators.azurite_command() == str(emulators.CHECKOUT_AZURITE)
