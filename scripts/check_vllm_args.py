"""Check the ``vllm serve`` command lines the runner builds against vLLM's own argument parser.

vLLM needs a GPU and cannot run on the test machines, so its command lines are tested as data
(tests/serving/test_engines.py); this script goes one step further: it installs vLLM in a virtual environment of
its own (``pip install vllm``: CUDA torch and several GB, once), builds the runner's command lines for a set of
worker shapes (1 GPU, tensor parallelism, a fraction of a GPU, user flags), and parses each exactly as the ``vllm``
command does (the ``serve`` subcommand of ``vllm.entrypoints.cli``: its parser, then its ``validate``), then builds
``EngineArgs`` from the result. Nothing is loaded and no GPU is needed (vLLM's CPU platform supplies the defaults).

    python scripts/check_vllm_args.py [--venv DIR] [--vllm-version 0.33.0]

Exit status 0 when vLLM accepts every command line; 1 otherwise (each refusal printed with vLLM's message).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.serving.engines import ENGINES  # noqa: E402
from runner.serving.spec import ReplicaSpec  # noqa: E402

CASES: list[tuple[str, ReplicaSpec, list[str]]] = [
    ("one GPU", ReplicaSpec(model="vllm:Qwen/Qwen2.5-7B-Instruct", engine="vllm", source="Qwen/Qwen2.5-7B-Instruct"),
     ["0"]),
    ("tensor parallel over 4 GPUs", ReplicaSpec(model="vllm:meta-llama/Llama-3.1-70B-Instruct", engine="vllm",
                                                source="meta-llama/Llama-3.1-70B-Instruct"), ["0", "1", "2", "3"]),
    ("half a GPU", ReplicaSpec(model="vllm:Qwen/Qwen2.5-0.5B-Instruct", engine="vllm",
                               source="Qwen/Qwen2.5-0.5B-Instruct", gpu_share=0.5), ["0"]),
    ("a local directory and the user's flags",
     ReplicaSpec(model="vllm:/models/qwen", engine="vllm", source="/models/qwen",
                 engine_args=("--max-model-len", "8192", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                              "--gpu-memory-utilization=0.8", "--max-num-seqs=128")), ["0", "1"]),
]
REFUSED = ("a misspelt user flag (must be refused: the check is not vacuous)",
           ReplicaSpec(model="vllm:m", engine="vllm", source="m", engine_args=("--max-modle-len", "8192")), ["0"])

# Run by the vLLM environment's Python: parse each argv (after the executable) as `vllm` does.
CHECKER = r"""
import json, sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
import vllm
import vllm.entrypoints.cli.serve as serve
from vllm.engine.arg_utils import AsyncEngineArgs

results = []
for name, argv in json.load(sys.stdin):
    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    commands = {}
    for command in serve.cmd_init():
        command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
        commands[command.name] = command
    try:
        args = parser.parse_args(argv)
        commands[args.subparser].validate(args)
        args.model = getattr(args, "model_tag", None) or args.model
        engine = AsyncEngineArgs.from_cli_args(args)
        results.append([name, "ok", {"model": engine.model, "served_model_name": engine.served_model_name,
                                     "tensor_parallel_size": engine.tensor_parallel_size,
                                     "gpu_memory_utilization": engine.gpu_memory_utilization,
                                     "distributed_executor_backend": engine.distributed_executor_backend,
                                     "host": args.host, "port": args.port}])
    except SystemExit as exc:
        results.append([name, f"argparse exit {exc.code}", {}])
    except Exception as exc:
        results.append([name, f"{type(exc).__name__}: {exc}", {}])
print(json.dumps({"vllm": vllm.__version__, "results": results}))
"""


def ensure_venv(venv: Path, version: str) -> Path:
    """The vLLM environment's Python, creating the environment and installing ``vllm==version`` if needed."""
    python = venv / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                           text=True) if python.exists() else None
    if check is not None and check.returncode == 0 and check.stdout.strip() == version:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    started = time.monotonic()
    # A machine-wide pip configuration may cap torch below what vLLM pins; this environment is vLLM's own.
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"vllm=={version}"], check=True, env=env)
    print(f"installed vllm {version} in {venv} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return python


def command_lines() -> list[tuple[str, list[str]]]:
    """Each case's ``vllm serve`` argv (without the executable), as the runner builds it."""
    lines = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, spec, gpus in [*CASES, REFUSED]:
            launch = ENGINES["vllm"].launch(spec, source=spec.source, served_name=f"{spec.slug}-0a1b2c3d",
                                            port=41000, gpu_ids=gpus, work_dir=Path(scratch),
                                            cache_dir=Path(scratch) / "cache")
            lines.append((name, launch.argv[1:]))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "runner" / "vllm-venv")
    parser.add_argument("--vllm-version", default="0.33.0")
    options = parser.parse_args()
    python = ensure_venv(options.venv, options.vllm_version)
    # The runner looks for the `vllm` command beside its Python, then on PATH: the vLLM environment's.
    os.environ["PATH"] = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    lines = command_lines()
    answer = subprocess.run([str(python), "-c", CHECKER], input=json.dumps(lines), capture_output=True, text=True,
                            # No GPU here: vLLM's parser needs a platform to fill its defaults, and the flags it
                            # accepts are the same on every platform.
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_TARGET_DEVICE": "cpu"})
    if answer.returncode != 0:
        print(answer.stderr[-4000:], file=sys.stderr)
        return 1
    report = json.loads(answer.stdout.strip().splitlines()[-1])
    failed = 0
    *accepted, (refused_name, refused_argv) = lines
    for (name, argv), (_, verdict, parsed) in zip(accepted, report["results"]):
        print(f"{verdict:>4}  {name}: vllm {' '.join(argv)}")
        if verdict == "ok":
            print(f"      -> {json.dumps(parsed)}")
        else:
            failed += 1
    refusal = report["results"][-1][1]
    print(f"{refusal}  {refused_name}: vllm {' '.join(refused_argv)}")
    if refusal == "ok":
        failed += 1
    if failed:
        print(answer.stderr[-3000:], file=sys.stderr)
    print(f"vLLM {report['vllm']}: {len(accepted) - failed} of {len(accepted)} command lines accepted; the misspelt "
          f"flag {'refused' if refusal != 'ok' else 'ACCEPTED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
