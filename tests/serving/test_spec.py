"""Which models a run serves: ``--serve``, ``--engine-arg`` and the embedded model, from flags and config files to
:func:`replica_specs`, and the one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli import build_parser
from runner.cli.args import config_from_args
from runner.core.config import EMBEDDED_MODEL, RunConfig
from runner.core.errors import ConfigError
from runner.serving import replica_specs


def config(*flags: str) -> RunConfig:
    return config_from_args(build_parser().parse_args(["run", "-b", "toy", *flags]))


def test_the_bare_serve_serves_the_agents_model_with_its_engine_args() -> None:
    settled = config("--model", "vllm:Qwen/Qwen2.5-7B-Instruct", "--serve", "--engine-arg=--max-model-len 8192",
                     "--engine-arg=--enable-prefix-caching", "--num-gpus", "2", "--model-startup-timeout", "600",
                     "--replica-restarts", "1")
    [spec] = replica_specs(settled)
    assert (spec.model, spec.engine, spec.source) == ("vllm:Qwen/Qwen2.5-7B-Instruct", "vllm",
                                                      "Qwen/Qwen2.5-7B-Instruct")
    assert spec.engine_args == ("--max-model-len", "8192", "--enable-prefix-caching")
    assert (spec.gpu_share, spec.startup_timeout, spec.max_restarts) == (1.0, 600.0, 1)


def test_without_serve_a_vllm_model_is_the_server_at_its_url_as_before() -> None:
    assert replica_specs(config("--model", "vllm:Qwen/Qwen2.5-7B-Instruct")) == []


def test_the_embedded_model_is_served_without_a_flag_for_the_agent_and_the_judge_once() -> None:
    settled = config("--model", EMBEDDED_MODEL, "--judge-model", EMBEDDED_MODEL, "--num-gpus", "0.5")
    [spec] = replica_specs(settled)
    assert spec.embedded and spec.engine == "transformers" and spec.source == ""
    assert spec.gpu_share == 0.5


def test_a_served_judge_and_an_agent_share_the_workers_gpu() -> None:
    settled = config("--model", "vllm:Qwen/Qwen2.5-7B-Instruct", "--judge-model", "sglang:Qwen/Qwen2.5-1.5B-Instruct",
                     "--serve", "--serve", "sglang:Qwen/Qwen2.5-1.5B-Instruct", "--num-gpus", "1")
    specs = replica_specs(settled)
    assert [(spec.engine, spec.gpu_share) for spec in specs] == [("vllm", 0.5), ("sglang", 0.5)]


def test_the_serve_list_of_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("benchmark: toy\nmodel: vllm:m\njudge_model: vllm:j\n"
                    "serve:\n  - vllm:m\n  - {model: vllm:j, engine_args: [--max-model-len, '4096']}\n")
    specs = replica_specs(config_from_args(build_parser().parse_args(["run", "--config", str(path)])))
    assert [(spec.model, spec.engine_args) for spec in specs] == [("vllm:m", ()),
                                                                  ("vllm:j", ("--max-model-len", "4096"))]


@pytest.mark.parametrize(("flags", "message"), [
    (["--serve", "openai:gpt-4o", "--model", "openai:gpt-4o"],
     "'openai:gpt-4o' cannot be served by the run: only vllm:, sglang: and transformers: models can"),
    (["--model", "vllm:m", "--engine-arg=--max-model-len=8192"],
     "--engine-arg needs exactly one served model (--serve MODEL), and the run serves none"),
    (["--model", "vllm:m", "--serve", "--model-base-url", "http://gpu:8000/v1"],
     "the model vllm:m is served by the run (--serve) and also given a URL (--model-base-url)"),
    (["--model", "vllm:m", "--serve", "vllm:m", "--serve", "vllm:m"],
     "vllm:m is named twice; serve each model once (with all its engine_args)"),
    (["--model", "vllm:m", "--serve", "--model-startup-timeout", "0"], "--model-startup-timeout"),
])
def test_bad_serving_flags_are_one_line_config_errors(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config(*flags)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_serving_a_model_the_run_does_not_name_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--serve vllm:other names none of the run's models \(vllm:m\)"):
        replica_specs(config("--model", "vllm:m", "--serve", "vllm:other"))


def test_a_bare_serve_without_a_model_is_refused() -> None:
    with pytest.raises(ConfigError, match="--serve without a model serves the agent's model, and the run has none"):
        replica_specs(config("--serve"))


def test_a_fraction_of_gpus_above_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="--num-gpus 1.5 is a fraction above 1"):
        replica_specs(config("--model", "vllm:m", "--serve", "--num-gpus", "1.5"))


def test_serve_settings_are_not_part_of_the_fingerprint() -> None:
    served = config("--model", "vllm:m", "--serve", "--engine-arg=--max-model-len=8192")
    at_a_url = config("--model", "vllm:m", "--model-base-url", "http://gpu:8000/v1")
    assert served.fingerprint_fields() == at_a_url.fingerprint_fields()


def test_the_cli_refuses_engine_args_without_a_served_model_before_writing(cli, tmp_path: Path) -> None:
    result = cli("run", "-b", "toy", "-s", "chat", "--model", "vllm:m", "--engine-arg=--max-model-len=8192",
                 "--storage", str(tmp_path / "run"), "--sequential")
    result.error_line("--engine-arg needs exactly one served model (--serve MODEL), and the run serves none")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("model", "flags", "named"), [
    ("vllm:m", ["--engine-arg=--port=18600"], "--port"),
    ("vllm:m", ["--engine-arg=--port 18600"], "--port"),
    ("vllm:m", ["--engine-arg=--port", "--engine-arg=18600"], "--port"),
    ("vllm:m", ["--engine-arg=--host=0.0.0.0"], "--host"),
    ("vllm:m", ["--engine-arg=--served-model-name=qwen"], "--served-model-name"),
    ("vllm:m", ["--engine-arg=--serv qwen"], "--serv (--served-model-name)"),  # argparse takes a unique prefix
    ("vllm:m", ["--engine-arg=-tp 2"], "-tp (--tensor-parallel-size)"),
    ("vllm:m", ["--engine-arg=--tensor_parallel_size=2"], "--tensor_parallel_size (--tensor-parallel-size)"),
    ("vllm:m", ["--engine-arg=--distributed-executor-backend ray"], "--distributed-executor-backend"),
    ("vllm:m", ["--engine-arg=--api-key=secret"], "--api-key"),
    ("sglang:m", ["--engine-arg=--port 31000"], "--port"),
    ("sglang:m", ["--engine-arg=--tp 2"], "--tp (--tensor-parallel-size)"),
    ("sglang:m", ["--engine-arg=--tp-size=2"], "--tp-size (--tensor-parallel-size)"),
    ("sglang:m", ["--engine-arg=--model-path /other"], "--model-path"),
    ("transformers:m", ["--engine-arg=--device cuda:1"], "--device"),
    ("transformers:m", ["--engine-arg=--port=8000"], "--port"),
])
def test_an_engine_flag_that_takes_over_what_the_runner_manages_is_refused_in_one_line(
        model: str, flags: list[str], named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        replica_specs(config("--model", model, "--serve", *flags))
    message = str(refused.value)
    assert message.startswith(f"{model}: --engine-arg {named} takes over what the runner manages for "
                              f"{model.partition(':')[0]}: ") and "\n" not in message
    assert "secret" not in message  # a flag's value is never shown


@pytest.mark.parametrize(("model", "flag"), [
    ("vllm:m", "--max-model-len=8192"), ("vllm:m", "--gpu-memory-utilization 0.5"),
    ("vllm:m", "--model-impl transformers"),  # longer than --model, not a prefix of it
    ("sglang:m", "--context-length 4096"), ("transformers:m", "--cb-block-size 32"),
    ("transformers:m", "--dev cuda"),  # click takes no prefix: transformers serve refuses it itself
])
def test_other_engine_flags_go_to_the_engine(model: str, flag: str) -> None:
    [spec] = replica_specs(config("--model", model, "--serve", f"--engine-arg={flag}"))
    assert spec.engine_args == tuple(flag.split())


def test_the_cli_refuses_a_port_for_the_embedded_replica_before_anything_starts(cli_process, tmp_path: Path) -> None:
    """``--engine-arg=--port=18600`` used to make the replica listen there while the runner probed its own port until
    --model-startup-timeout (exit 2 after 154 s): now exit 2 at once, one line, nothing written or started."""
    result = cli_process("run", "-b", "toy", "-s", "chat", "--model", EMBEDDED_MODEL, "--serve",
                         "--engine-arg=--port=18600", "--storage", str(tmp_path / "run"), "--sequential")
    result.error_line(f"{EMBEDDED_MODEL}: --engine-arg --port takes over what the runner manages for transformers: "
                      "each replica gets a free port on 127.0.0.1, where the runner probes it")
    assert not (tmp_path / "run").exists()  # and error_line saw no other line: no replica.start


def test_the_python_api_refuses_the_same_flags() -> None:
    from runner import GeneralEvaluator
    from runner.benchmarks.toy import ToyBenchmark
    from runner.core.config import ServeSpec

    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), solution_func=lambda task: "x",
                                 serve=[ServeSpec(model="sglang:m", engine_args=["--host", "0.0.0.0"])])
    with pytest.raises(ConfigError, match=r"^sglang:m: --engine-arg --host takes over what the runner manages"):
        evaluator.request()


def test_a_checkpoint_at_the_storages_kind_of_url_is_copied_with_the_storage_options(emulators, tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """Issue 42: a served checkpoint on an S3-compatible store reachable only through the run's
    ``storage_options`` (no ``AWS_*`` in the environment): its replica spec carries them, and the node's copy reads
    the folder with them. A checkpoint on another kind of store gets none."""
    import boto3

    from runner.serving.checkpoint_files import local_folder

    for key in [key for key in __import__("os").environ if key.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    s3 = emulators.get("s3")
    bucket = s3.bucket()
    boto3.client("s3", endpoint_url=s3.url, aws_access_key_id="testing", aws_secret_access_key="testing-secret",
                 region_name="us-east-1").put_object(Bucket=bucket, Key="run42/step_1/config.json", Body=b"{}")
    config = RunConfig(benchmark="toy", model=f"vllm:s3://{bucket}/run42/step_1", serve=[{}],
                       storage=f"s3://{bucket}/runs", storage_options=s3.storage_options())
    [spec] = replica_specs(config)
    assert spec.source_options == s3.storage_options() and "secret" not in repr(spec)
    folder = Path(local_folder(spec.source, spec.source_options))
    assert (folder / "config.json").read_text() == "{}" and str(tmp_path / "cache") in str(folder)
    other = RunConfig(benchmark="toy", model="vllm:gs://b/step_1", serve=[{}], storage=f"s3://{bucket}/runs",
                      storage_options=s3.storage_options())
    assert replica_specs(other)[0].source_options == {}
