"""A fresh install of the README's first command is the program the tests ran: pip resolves it as on a new machine
and every package it picks is the release installed here, where the tests run (issue 37: the same command once got
transformers 5.25, whose streams carry no usage unless asked, where the tests ran 5.17).

pip resolves the command with ``--dry-run --ignore-installed --report`` (what is installed here is ignored, nothing is
installed, and a wheel whose metadata the index serves on its own is not downloaded), with torch held at the release
installed here: the README installs torch first (its CPU build), as ``.ci/run`` does.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "ray-bench-runner"
INSTALLED_FIRST = ("torch",)
"""Installed before the README's command (its CPU build of torch): held at the release installed here."""


def first_install_command() -> list[str]:
    """The arguments of ``pip install`` in the README's first command (``['-e', '.[local]']``)."""
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("pip install "):
            return shlex.split(line.split("&&")[0])[2:]
    raise AssertionError("the README has no line that begins with 'pip install'")


def installed_here() -> dict[str, str]:
    """Canonical name -> version of every distribution installed where the tests run."""
    return {canonicalize_name(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()
            if dist.metadata["Name"]}


def test_the_readmes_first_command_installs_the_releases_the_tests_ran_with(tmp_path: Path) -> None:
    arguments = first_install_command()
    assert arguments == ["-e", ".[local]"]  # the command the README explains (the embedded model's run)
    here = installed_here()
    held = tmp_path / "installed-first.txt"
    held.write_text("".join(f"{name}=={Version(here[name]).public}\n" for name in INSTALLED_FIRST))
    report = tmp_path / "report.json"
    environment = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    resolved = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
         str(report), "--constraint", str(held), *arguments],
        check=False, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=280)
    assert resolved.returncode == 0, f"pip could not resolve the README's install: {resolved.stderr[-3000:]}"
    picked = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert picked.get("transformers") and picked.get("huggingface-hub")  # the packages the served model runs on
    others = [f"{name} {version} (the tests ran with {here[name]})" if name in here else
              f"{name} {version} (not installed where the tests ran)"
              for name, version in sorted(picked.items())
              if name != PROJECT and (name not in here or Version(version) != Version(here[name]))]
    assert not others, "the README's first command installs releases the tests never ran: " + "; ".join(others)
