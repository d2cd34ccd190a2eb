"""The image and the pins, checked statically (no container engine here): one Ray version everywhere, a Dockerfile
on the official Ray image that runs as non-root with no ENTRYPOINT/CMD, and a build context of only what it copies."""

from __future__ import annotations

import re
import tomllib

import yaml

from runner._version import __version__
from runner.kuberay import options
from tests.kuberay.conftest import CHART, REPO

DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def pyproject_ray() -> str:
    match = re.search(r'"ray\[default\]==([0-9.]+)"', (REPO / "pyproject.toml").read_text())
    assert match, "pyproject.toml pins ray[default]==X.Y.Z"
    return match.group(1)


def test_one_ray_version_everywhere():
    ray = pyproject_ray()
    args = dict(arg.split("=", 1) for kind, arg in instructions(DOCKERFILE) if kind == "ARG" and "=" in arg)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    gpu = yaml.safe_load((CHART / "ci" / "gpu-values.yaml").read_text())
    shipped = [d for d in yaml.safe_load_all((REPO / "k8s" / "rayjob.yaml").read_text()) if d["kind"] == "RayJob"][0]
    assert args["RAY_VERSION"] == ray
    assert values["rayVersion"] == options.RAY_VERSION == shipped["spec"]["rayClusterSpec"]["rayVersion"] == ray
    tag = f"{__version__}-ray{ray}-{args['PYTHON_TAG']}"
    assert values["image"]["tag"] == options.IMAGE_TAG == tag
    assert gpu["workerGroups"][1]["image"]["tag"] == f"{tag}-gpu"
    assert shipped["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] \
        .endswith(f":{tag}")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__


def test_dockerfile_builds_on_the_official_ray_image_for_python_311():
    steps = instructions(DOCKERFILE)
    args = dict(arg.split("=", 1) for kind, arg in steps if kind == "ARG" and "=" in arg)
    assert args["PYTHON_TAG"] == "py311" and args["RAY_TAG_SUFFIX"] == '""'
    froms = [arg for kind, arg in steps if kind == "FROM"]
    assert froms == ["rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}${RAY_TAG_SUFFIX}"]
    assert any(kind == "RUN" and "ray.__version__ == '${RAY_VERSION}'" in arg for kind, arg in steps)


def test_the_image_reaches_s3_gcs_and_azure_blob():
    """The image installs the gcs and azure extras beside s3fs, and imports the three backends when it is built."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [d.split(">")[0] for d in extras["gcs"]] == ["gcsfs"] and [d.split(">")[0] for d in extras["azure"]] == [
        "adlfs"]
    install = [arg for kind, arg in instructions(DOCKERFILE) if kind == "RUN" and "pip install" in arg]
    assert len(install) == 1 and 'pip install --no-cache-dir ".[gcs,azure]"' in install[0]
    assert "import ray, runner, s3fs, gcsfs, adlfs;" in install[0]


def test_dockerfile_runs_as_ray_with_no_entrypoint_or_cmd():
    steps = instructions(DOCKERFILE)
    assert not [kind for kind, _ in steps if kind in ("ENTRYPOINT", "CMD")]
    users = [arg for kind, arg in steps if kind == "USER"]
    assert users and users[-1] == "ray"
    first_run = next(i for i, (kind, _) in enumerate(steps) if kind == "RUN")
    last_user = max(i for i, (kind, _) in enumerate(steps) if kind == "USER")
    assert last_user < first_run, "the install runs as the non-root user too"


def test_dockerignore_lets_in_only_what_the_dockerfile_copies():
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied = set()
    for kind, arg in instructions(DOCKERFILE):
        if kind == "COPY":
            parts = [p for p in arg.split() if not p.startswith("--")]
            copied.update(p.rstrip("/") for p in parts[:-1])
    assert copied == allowed == {"pyproject.toml", "README.md", "runner"}
