"""A fresh install of the README's commands is the program the tests ran: pip resolves each as on a new machine and
every package it picks is the release installed here, where the tests run (issue 37: the first command once got
transformers 5.25, whose streams carry no usage unless asked, where the tests ran 5.17; later, a virtualenv released
between the README's two commands made them two programs). The commands take ``-c constraints.txt``, the releases of
CI's environment (``scripts/freeze_constraints.sh``), so what was released since changes nothing.

pip resolves each command with ``--dry-run --ignore-installed --report`` (what is installed here is ignored, nothing
is installed, and a wheel whose metadata the index serves on its own is not downloaded). Releases are compared
without their local label: torch ``2.13.0+cpu`` (CI's CPU build) is release ``2.13.0``, the one the constraints pin.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "ray-bench-runner"


def install_commands() -> list[list[str]]:
    """The arguments of ``pip install`` in each of the README's two commands (the lines that begin with it)."""
    commands = [shlex.split(line.split("&&")[0])[2:] for line in
                (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("pip install ")]
    assert len(commands) == 2, "the README starts with two commands that begin with 'pip install'"
    return commands


def installed_here() -> dict[str, str]:
    """Canonical name -> version of every distribution installed where the tests run."""
    return {canonicalize_name(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()
            if dist.metadata["Name"]}


@pytest.mark.parametrize("which", [0, 1], ids=["main-job", "tests"])
def test_the_readmes_commands_install_the_releases_the_tests_ran_with(tmp_path: Path, which: int) -> None:
    arguments = install_commands()[which]
    extra = (".[local]", ".[test]")[which]
    assert arguments == ["-c", "constraints.txt", "-e", extra]  # the commands the README explains
    here = installed_here()
    report = tmp_path / "report.json"
    environment = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    resolved = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
         str(report), *arguments],
        check=False, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=280)
    assert resolved.returncode == 0, f"pip could not resolve the README's install: {resolved.stderr[-3000:]}"
    picked = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert picked.get("transformers") and picked.get("huggingface-hub")  # the packages the served model runs on
    others = [f"{name} {version} (the tests ran with {here[name]})" if name in here else
              f"{name} {version} (not installed where the tests ran)"
              for name, version in sorted(picked.items())
              if name != PROJECT and (name not in here or Version(version).public != Version(here[name]).public)]
    assert not others, "the README's command installs releases the tests never ran: " + "; ".join(others)
