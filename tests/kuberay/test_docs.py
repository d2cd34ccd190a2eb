"""The commands in docs/kubernetes.md work: every ``helm install`` of the chart renders (Helm's engine, the same
``-f``/``--set`` values) to a RayJob valid for KubeRay, and every ``submit --dry-run`` succeeds."""

from __future__ import annotations

import json
import re
import shlex

import helm_python
import pytest
import yaml

from runner.cli import main
from runner.core.config import RunConfig
from tests.kuberay.conftest import REPO, render

DOC = (REPO / "docs" / "kubernetes.md").read_text()
ENV = {"IMAGE": "registry.example.com/evals/runner", "TAG": "0.1.0-ray2.60.0-py311",
       "VLLM_TAG": "0.1.0-ray2.60.0-vllm0.33.0"}


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


def helm_installs(doc: str = DOC) -> list[tuple[str, dict]]:
    """(release, values) of each ``helm install RELEASE ./helm/runner ...`` in ``doc``, -f then --set as Helm does."""
    installs = []
    for argv in shell_commands(doc):
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
    assert len(helm_installs()) == 6 and len(dry_runs()) == 5


@pytest.mark.parametrize("release, values", helm_installs(), ids=lambda v: v if isinstance(v, str) else "")
def test_documented_helm_installs_render_valid_rayjobs(chart, rayjob_schema, release, values):
    rayjob = render(chart, values, name=release)["RayJob"]
    assert rayjob["metadata"]["name"] == f"{release}-runner"
    assert rayjob_schema.errors(rayjob) == []
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["image"] == f"{ENV['IMAGE']}:{values.get('image', {}).get('tag', ENV['TAG'])}"


@pytest.mark.parametrize("argv", dry_runs(), ids=lambda argv: argv[-1])
def test_documented_dry_runs_succeed(capsys, rayjob_schema, argv):
    assert main(argv) == 0, capsys.readouterr().err
    rayjob = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d["kind"] == "RayJob"][0]
    assert rayjob_schema.errors(rayjob) == []


def test_the_gpu_section_s_helm_install_and_submit_make_the_same_run(chart, capsys):
    """The two commands of "Models served by the run on GPUs": the same run config, and the same GPU worker group
    (the claim's name aside: the release's or the RayJob's)."""
    section = DOC[DOC.index("## Models served by the run on GPUs"):DOC.index("### The model cache")]
    (release, values), = [(r, v) for r, v in helm_installs() if f"helm install {r} " in section]
    (argv,) = [argv for argv in dry_runs() if "--serve" in argv]
    helm = render(chart, values, name=release)
    assert main(argv) == 0, capsys.readouterr().err
    printed = {d["kind"]: d for d in yaml.safe_load_all(capsys.readouterr().out)}
    configs = [RunConfig.model_validate(yaml.safe_load(out["ConfigMap"]["data"]["config.yaml"]))
               for out in (helm, printed)]
    assert configs[0] == configs[1] and configs[0].serve[0].engine_args == ["--max-model-len=8192"]
    groups = [out["RayJob"]["spec"]["rayClusterSpec"]["workerGroupSpecs"] for out in (helm, printed)]
    claims = [out["PersistentVolumeClaim"]["metadata"]["name"] for out in (helm, printed)]
    assert claims == [f"{release}-runner-models", f"{printed['RayJob']['metadata']['name']}-models"]
    assert json.loads(json.dumps(groups[0]).replace(claims[0], claims[1])) == groups[1]
    assert helm["PersistentVolumeClaim"]["spec"] == printed["PersistentVolumeClaim"]["spec"]


def test_the_kuberay_command_of_the_models_doc_renders_a_served_run_on_gpus(chart, rayjob_schema):
    """docs/models.md, "Models served by the run": its KubeRay command is the chart as built here."""
    models = (REPO / "docs" / "models.md").read_text()
    section = models[models.index("## Models served by the run"):]
    (release, values), = helm_installs(section[:section.index("```\n\n") + 3])
    rayjob = render(chart, values, name=release)["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    (group,) = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["rayStartParams"] == {"num-gpus": "1"}
    assert group["template"]["spec"]["containers"][0]["image"].endswith(":0.1.0-ray2.60.0-vllm0.33.0")


def test_the_lm_eval_doc_s_helm_install_and_submit_make_the_same_valid_run(chart, rayjob_schema, capsys):
    """docs/lm-eval.md, "GSM8K and MMLU on a KubeRay cluster": both commands render a RayJob valid for KubeRay and
    the same run config (the benchmark is built where one submits, not prepared: the datasets load on the head)."""
    doc = (REPO / "docs" / "lm-eval.md").read_text()
    (release, values), = helm_installs(doc)
    helm = render(chart, values, name=release)
    assert rayjob_schema.errors(helm["RayJob"]) == []
    (argv,) = [argv[3:argv.index(">")] for argv in shell_commands(doc)
               if argv[:4] == ["python", "-m", "runner", "submit"]]
    assert main(argv) == 0, capsys.readouterr().err
    printed = {d["kind"]: d for d in yaml.safe_load_all(capsys.readouterr().out)}
    assert rayjob_schema.errors(printed["RayJob"]) == []
    configs = [RunConfig.model_validate(yaml.safe_load(out["ConfigMap"]["data"]["config.yaml"])) for out in (helm, printed)]
    assert configs[0] == configs[1]
    assert (configs[0].benchmark, configs[0].benchmark_args["tasks"], configs[0].model) == (
        "lm-eval", "gsm8k,mmlu", "vllm:Qwen/Qwen2.5-7B-Instruct")

