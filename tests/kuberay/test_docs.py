"""The commands in docs/kubernetes.md work: every ``helm install`` of the chart renders (Helm's engine, the same
``-f``/``--set`` values) to a RayJob valid for KubeRay, and every ``submit --dry-run`` succeeds."""

from __future__ import annotations

import re
import shlex

import helm_python
import pytest
import yaml

from runner.cli import main
from tests.kuberay.conftest import REPO, render

DOC = (REPO / "docs" / "kubernetes.md").read_text()
ENV = {"IMAGE": "registry.example.com/evals/runner", "TAG": "0.1.0-ray2.60.0-py311"}


def shell_commands(text: str) -> list[list[str]]:
    """Every command of the doc's bash blocks, continuation lines joined, ``$VAR`` expanded, split as a shell would."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                expanded = re.sub(r"\$(\w+)", lambda m: ENV[m.group(1)], line)
                commands.append(shlex.split(expanded, comments=True))
    return commands


def merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def helm_installs() -> list[tuple[str, dict]]:
    """(release, values) of each ``helm install RELEASE ./helm/runner ...`` in the doc, -f then --set as Helm does."""
    installs = []
    for argv in shell_commands(DOC):
        if argv[:2] != ["helm", "install"] or argv[3] != "./helm/runner":
            continue
        files, sets, rest = [], [], iter(argv[4:])
        for arg in rest:
            if arg == "-f":
                files.append(yaml.safe_load((REPO / next(rest)).read_text()))
            elif arg == "--set":
                sets.append(helm_python.parse_set_string(next(rest)))
            elif arg == "-n":
                next(rest)
        values: dict = {}
        for part in files + sets:
            merge(values, part)
        installs.append((argv[2], values))
    return installs


def dry_runs() -> list[list[str]]:
    return [argv[3:argv.index(">")] if ">" in argv else argv[3:]
            for argv in shell_commands(DOC) if argv[:4] == ["python", "-m", "runner", "submit"]
            and "--dry-run" in argv]


def test_the_doc_has_the_commands_checked_here():
    assert len(helm_installs()) == 5 and len(dry_runs()) == 4


@pytest.mark.parametrize("release, values", helm_installs(), ids=lambda v: v if isinstance(v, str) else "")
def test_documented_helm_installs_render_valid_rayjobs(chart, rayjob_schema, release, values):
    rayjob = render(chart, values, name=release)["RayJob"]
    assert rayjob["metadata"]["name"] == f"{release}-runner"
    assert rayjob_schema.errors(rayjob) == []
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["image"] == f"{ENV['IMAGE']}:{ENV['TAG']}"


@pytest.mark.parametrize("argv", dry_runs(), ids=lambda argv: argv[-1])
def test_documented_dry_runs_succeed(capsys, rayjob_schema, argv):
    assert main(argv) == 0, capsys.readouterr().err
    rayjob = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d["kind"] == "RayJob"][0]
    assert rayjob_schema.errors(rayjob) == []
