"""The images and the pins, checked statically (no container engine here): one Ray version everywhere, a Dockerfile
on the official Ray image and a variant on vLLM's own image, both running as non-root with no ENTRYPOINT/CMD, and a
build context of only what they copy."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from runner._version import __version__
from runner.kuberay import deploy_options
from tests.kuberay.conftest import CHART, REPO

DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()
VLLM_DOCKERFILE = (REPO / "docker" / "Dockerfile.vllm").read_text()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def pyproject_ray() -> str:
    match = re.search(r'"ray\[default\]==([0-9.]+)"', (REPO / "pyproject.toml").read_text())
    assert match, "pyproject.toml pins ray[default]==X.Y.Z"
    return match.group(1)


def build_args(text: str) -> dict[str, str]:
    """The ``ARG NAME=default`` values of a Dockerfile."""
    return dict(arg.split("=", 1) for kind, arg in instructions(text) if kind == "ARG" and "=" in arg)


def test_one_ray_version_everywhere():
    ray = pyproject_ray()
    args = build_args(DOCKERFILE)
    assert build_args(VLLM_DOCKERFILE)["RAY_VERSION"] == ray
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    gpu = yaml.safe_load((CHART / "ci" / "gpu-values.yaml").read_text())
    shipped = [d for d in yaml.safe_load_all((REPO / "k8s" / "rayjob.yaml").read_text()) if d["kind"] == "RayJob"][0]
    assert args["RAY_VERSION"] == ray
    assert values["rayVersion"] == deploy_options.RAY_VERSION == shipped["spec"]["rayClusterSpec"]["rayVersion"] == ray
    tag = f"{__version__}-ray{ray}-{args['PYTHON_TAG']}"
    assert values["image"]["tag"] == deploy_options.IMAGE_TAG == tag
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
    for dockerfile in (DOCKERFILE, VLLM_DOCKERFILE):
        install = [arg for kind, arg in instructions(dockerfile) if kind == "RUN" and "pip install" in arg]
        assert len(install) == 1
        extras = re.search(r'pip install --no-cache-dir (?:"ray\[default\]==\$\{RAY_VERSION\}" )?"\.\[([a-z,-]+)\]"',
                           install[0])
        assert extras and {"gcs", "azure", "bfcl", "gaia"} <= set(extras.group(1).split(","))
        assert "import ray, runner, s3fs, gcsfs, adlfs" in install[0]


def test_both_images_run_lm_eval_tasks():
    """The image has the lm-eval extra (HFLM on the workers); the vLLM image lm-eval's API client only, at the
    extra's pinned release (a second torch would shadow vLLM's), and both import lm_eval when they are built."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [d for d in extras["lm-eval"] if d.startswith("lm-eval")]
    version = pin.split("==")[1]
    (install,) = [arg for kind, arg in instructions(DOCKERFILE) if kind == "RUN" and "pip install" in arg]
    assert '".[gcs,azure,bfcl,gaia,lm-eval]"' in install and "lm_eval" in install
    (install,) = [arg for kind, arg in instructions(VLLM_DOCKERFILE) if kind == "RUN" and "pip install" in arg]
    assert f'"lm-eval[api]=={version}"' in install and "lm_eval" in install and "lm-eval]" not in install


def test_dockerfile_runs_as_ray_with_no_entrypoint_or_cmd():
    steps = instructions(DOCKERFILE)
    assert not [kind for kind, _ in steps if kind in ("ENTRYPOINT", "CMD")]
    users = [arg for kind, arg in steps if kind == "USER"]
    assert users and users[-1] == "ray"
    first_run = next(i for i, (kind, _) in enumerate(steps) if kind == "RUN")
    last_user = max(i for i, (kind, _) in enumerate(steps) if kind == "USER")
    assert last_user < first_run, "the install runs as the non-root user too"


@pytest.mark.parametrize("dockerfile", [DOCKERFILE, VLLM_DOCKERFILE], ids=["ray", "vllm"])
def test_dockerignore_lets_in_only_what_the_dockerfile_copies(dockerfile):
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied = set()
    for kind, arg in instructions(dockerfile):
        if kind == "COPY":
            parts = [p for p in arg.split() if not p.startswith("--")]
            copied.update(p.rstrip("/") for p in parts[:-1])
    assert copied == allowed == {"pyproject.toml", "README.md", "runner"}


def checked_vllm_version() -> str:
    """The vLLM release whose argument parser scripts/check_vllm_args.py checks the runner's command lines with."""
    match = re.search(r'"--vllm-version", default="([0-9.]+)"', (REPO / "scripts" / "check_vllm_args.py").read_text())
    assert match, "scripts/check_vllm_args.py has a default --vllm-version"
    return match.group(1)


def test_the_vllm_variant_is_on_the_pinned_vllm_openai_image():
    """vLLM's own image at the release whose parser the runner's vllm serve command lines were checked against;
    the tag the chart's examples use names the package, Ray and vLLM."""
    steps = instructions(VLLM_DOCKERFILE)
    args = build_args(VLLM_DOCKERFILE)
    assert args["VLLM_VERSION"] == deploy_options.VLLM_VERSION == checked_vllm_version()
    assert [arg for kind, arg in steps if kind == "FROM"] == ["vllm/vllm-openai:v${VLLM_VERSION}"]
    assert deploy_options.VLLM_IMAGE_TAG == f"{__version__}-ray{pyproject_ray()}-vllm{args['VLLM_VERSION']}"
    example = yaml.safe_load((CHART / "ci" / "vllm-values.yaml").read_text())
    assert example["image"]["tag"] == deploy_options.VLLM_IMAGE_TAG
    run = " ".join(arg for kind, arg in steps if kind == "RUN")
    assert "assert vllm.__version__.split('+')[0] == '${VLLM_VERSION}'" in run


def test_the_vllm_variant_keeps_the_engine_environment_untouched():
    """The runner and Ray go into a virtual environment of their own (vLLM needs openai>=2.25, the runner openai<2):
    every pip install is that environment's pip, Ray is the pinned release, and the environment comes first on PATH
    while `vllm` is still found on it (runner.serving.engines.executable)."""
    steps = instructions(VLLM_DOCKERFILE)
    run = " ".join(arg for kind, arg in steps if kind == "RUN")
    installs = re.findall(r"(\S+) install ", run)
    assert installs == ["/opt/runner/bin/pip"]
    assert "python3 -m venv /opt/runner" in run
    assert '"ray[default]==${RAY_VERSION}"' in run and "assert ray.__version__ == '${RAY_VERSION}'" in run
    assert "shutil.which('vllm')" in run
    envs = [arg for kind, arg in steps if kind == "ENV"]
    assert "PATH=/opt/runner/bin:$PATH" in envs


def test_the_vllm_variant_runs_as_the_pods_user_with_no_entrypoint():
    """The chart's pods run as uid 1000, gid 100 (Ray's image's "ray" user): the variant makes that user, with a home
    for its caches, installs as root before it, ends as it, and clears vLLM's ENTRYPOINT (vllm serve): KubeRay starts
    Ray, and the runner starts vllm serve."""
    steps = instructions(VLLM_DOCKERFILE)
    run = " ".join(arg for kind, arg in steps if kind == "RUN")
    assert "useradd --create-home --uid 1000 --gid 100 --shell /bin/bash ray" in run
    users = [(i, arg) for i, (kind, arg) in enumerate(steps) if kind == "USER"]
    assert users[0][1] == "root" and users[-1][1] == "ray"
    last_run = max(i for i, (kind, _) in enumerate(steps) if kind == "RUN")
    assert users[-1][0] > last_run
    assert [arg for kind, arg in steps if kind == "ENTRYPOINT"] == ["[]"]
    assert not [kind for kind, _ in steps if kind == "CMD"]
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    assert (defaults["runAsUser"], defaults["runAsGroup"]) == (1000, 100)
