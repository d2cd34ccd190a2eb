"""The engines' command lines and environments, as data.

vLLM and SGLang cannot run on the test machines (no GPU), so their launches are checked here as data, with a stand-in
``vllm`` executable and ``sglang`` package (test doubles for the absent GPU engines: they only make the engines look
installed); ``scripts/check_vllm_args.py`` parses the same ``vllm serve`` command lines with vLLM's own parser.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.core.errors import ReplicaStartError
from runner.serving import ENGINES, ReplicaSpec, default_concurrency, model_environment


@pytest.fixture
def engines_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``vllm`` executable on ``PATH`` and an importable ``sglang`` package: stand-ins that make the GPU engines
    look installed, for command lines built as data (nothing runs them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "vllm").chmod(0o755)
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.syspath_prepend(str(tmp_path))
    return bin_dir


def launch(spec: ReplicaSpec, gpu_ids: list[str], tmp_path: Path, port: int = 41000):
    return ENGINES[spec.engine].launch(spec, source=spec.source, served_name="qwen-0a1b2c3d", port=port,
                                       gpu_ids=gpu_ids, work_dir=tmp_path, cache_dir=tmp_path / "cache")


def test_vllm_on_two_gpus_is_tensor_parallel_with_the_mp_backend_on_loopback(engines_installed: Path,
                                                                              tmp_path: Path) -> None:
    spec = ReplicaSpec(model="vllm:Qwen/Qwen2.5-7B-Instruct", engine="vllm", source="Qwen/Qwen2.5-7B-Instruct",
                       engine_args=("--max-model-len", "8192"))
    run = launch(spec, ["2", "3"], tmp_path)
    assert run.argv == [str(engines_installed / "vllm"), "serve", "Qwen/Qwen2.5-7B-Instruct",
                        "--served-model-name", "qwen-0a1b2c3d", "--host", "127.0.0.1", "--port", "41000",
                        "--distributed-executor-backend", "mp", "--tensor-parallel-size", "2",
                        "--max-model-len", "8192"]
    assert run.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert run.env["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
    assert run.env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "inductor")
    assert run.env["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "triton")
    assert run.served_name == "qwen-0a1b2c3d"


def test_a_fraction_of_a_gpu_is_vllms_memory_utilization_and_the_users_flag_comes_last(engines_installed: Path,
                                                                                      tmp_path: Path) -> None:
    spec = ReplicaSpec(model="vllm:m", engine="vllm", source="m", gpu_share=0.5,
                       engine_args=("--gpu-memory-utilization=0.3",))
    argv = launch(spec, ["0"], tmp_path).argv
    assert "--tensor-parallel-size" not in argv
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.450"
    assert argv[-1] == "--gpu-memory-utilization=0.3"  # argparse keeps the last value: the user's


def test_sglang_command_line(engines_installed: Path, tmp_path: Path) -> None:
    spec = ReplicaSpec(model="sglang:meta-llama/Llama-3.1-8B-Instruct", engine="sglang",
                       source="meta-llama/Llama-3.1-8B-Instruct", gpu_share=0.25)
    run = launch(spec, ["0", "1", "2", "3"], tmp_path)
    assert run.argv == [sys.executable, "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
                        "--served-model-name", "qwen-0a1b2c3d", "--host", "127.0.0.1", "--port", "41000",
                        "--tp", "4", "--mem-fraction-static", "0.212"]
    assert run.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_gpu_engine_without_gpus_is_refused_in_one_line(engines_installed: Path, tmp_path: Path,
                                                          engine: str) -> None:
    spec = ReplicaSpec(model=f"{engine}:Qwen/Qwen2.5-7B-Instruct", engine=engine, source="Qwen/Qwen2.5-7B-Instruct")
    with pytest.raises(ReplicaStartError) as refused:
        launch(spec, [], tmp_path)
    assert refused.value.cause == "no_gpu" and refused.value.exit_status == 2
    assert str(refused.value) == (
        f"{engine}:Qwen/Qwen2.5-7B-Instruct runs on GPUs, and this worker has none (CUDA_VISIBLE_DEVICES is empty); "
        "give the workers GPUs (--num-gpus 1, or more for tensor parallelism), or serve it on the CPU with "
        "transformers:Qwen/Qwen2.5-7B-Instruct")


def test_an_engine_that_is_not_installed_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = ReplicaSpec(model="vllm:m", engine="vllm", source="m")
    with pytest.raises(ReplicaStartError, match=r"the vllm command is not installed .*pip install 'vllm'") as refused:
        launch(spec, ["0"], tmp_path)
    assert refused.value.cause == "not_installed"


def test_transformers_serve_forces_a_link_named_after_the_replica_and_runs_on_the_cpu_without_gpus(
        tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    spec = ReplicaSpec(model="transformers:smollm2-135m-instruct", engine="transformers", source=str(model))
    run = ENGINES["transformers"].launch(spec, source=str(model), served_name="smollm2-135m-instruct-0a1b2c3d",
                                         port=41001, gpu_ids=[], work_dir=tmp_path, cache_dir=tmp_path / "cache")
    forced = tmp_path / "smollm2-135m-instruct-0a1b2c3d"
    # The KV cache takes a tenth of the machine's memory, not continuous batching's 0.9 of it (10 GB on this one).
    assert run.argv[1:] == ["serve", str(forced), "--continuous-batching", "--host", "127.0.0.1", "--port", "41001",
                            "--device", "cpu", "--cb-max-memory-percent", "0.1"]
    assert forced.resolve() == model.resolve()
    assert run.served_name == str(forced)
    assert run.env["CUDA_VISIBLE_DEVICES"] == ""  # no GPU is visible to it


@pytest.mark.parametrize(("gpus", "device"), [(["5"], "cuda:0"), (["5", "6"], "auto")])
def test_transformers_serve_on_gpus(tmp_path: Path, gpus: list[str], device: str) -> None:
    spec = ReplicaSpec(model="transformers:Qwen/Qwen2.5-0.5B-Instruct", engine="transformers",
                       source="Qwen/Qwen2.5-0.5B-Instruct")
    run = launch(spec, gpus, tmp_path)
    assert run.argv[2] == "Qwen/Qwen2.5-0.5B-Instruct" and run.served_name == "Qwen/Qwen2.5-0.5B-Instruct"
    assert run.argv[run.argv.index("--device") + 1] == device
    assert run.argv[run.argv.index("--cb-max-memory-percent") + 1] == "0.9"   # a whole GPU: the engine's default
    assert run.env["CUDA_VISIBLE_DEVICES"] == ",".join(gpus)


def test_default_concurrency_fills_the_engines_batch() -> None:
    vllm = ReplicaSpec(model="vllm:m", engine="vllm", source="m")
    assert default_concurrency(vllm) == 256
    assert default_concurrency(ReplicaSpec(model="vllm:m", engine="vllm", source="m",
                                           engine_args=("--max-num-seqs=48",))) == 48
    assert default_concurrency(ReplicaSpec(model="sglang:m", engine="sglang", source="m",
                                           engine_args=("--max-running-requests", "96"))) == 96
    transformers = ReplicaSpec(model="transformers:m", engine="transformers", source="m")
    assert default_concurrency(transformers, on_gpu=False) == 16
    assert default_concurrency(transformers, on_gpu=True) == 64


def test_the_model_environment_is_what_decides_where_weights_come_from() -> None:
    env = {"HF_TOKEN": "hf_secret", "HF_HOME": "/models", "PATH": "/bin", "HF_HUB_OFFLINE": "", "AWS_SECRET": "x"}
    assert model_environment(env) == {"HF_TOKEN": "hf_secret", "HF_HOME": "/models"}


def test_a_replica_keeps_its_nodes_cache_paths_and_takes_the_drivers_token() -> None:
    from runner.serving.replica import replica_environment

    driver = {"HF_TOKEN": "hf_secret", "HF_HOME": "/driver/cache", "HF_HUB_OFFLINE": "1"}
    node = {"HF_HOME": "/models/huggingface", "PATH": "/usr/bin"}
    env = replica_environment(driver, {"CUDA_VISIBLE_DEVICES": "0"}, node)
    loopback = "127.0.0.1,localhost,::1"
    assert env == {"HF_HOME": "/models/huggingface", "PATH": "/usr/bin", "HF_TOKEN": "hf_secret",
                   "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "0", "NO_PROXY": loopback, "no_proxy": loopback}
    assert replica_environment(driver, {}, {"PATH": "/usr/bin"})["HF_HOME"] == "/driver/cache"  # the node has none


def test_a_replica_reaches_itself_past_a_proxy_of_the_environment_and_the_hub_through_it() -> None:
    """sgl-project/sglang#9155: SGLang's warm-up request to its own port went to the cluster's proxy. The replica's
    NO_PROXY names loopback after the node's own entries, in both spellings (urllib prefers the lower case); the
    proxy variables stay, for downloads from the Hub."""
    from runner.serving.replica import replica_environment

    node = {"HTTPS_PROXY": "http://proxy.corp:3128", "http_proxy": "http://proxy.corp:3128",
            "no_proxy": ".corp,localhost", "NO_PROXY": "10.0.0.0/8"}
    env = replica_environment({}, {}, node)
    assert env["NO_PROXY"] == env["no_proxy"] == "10.0.0.0/8,.corp,localhost,127.0.0.1,::1"
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://proxy.corp:3128"
    import urllib.request

    assert urllib.request.proxy_bypass_environment("127.0.0.1", {"no": env["no_proxy"]})
    assert not urllib.request.proxy_bypass_environment("huggingface.co", {"no": env["no_proxy"]})


def test_a_replica_is_published_with_how_its_calls_are_cancelled_and_its_output_limit(tmp_path: Path) -> None:
    """vLLM and SGLang abort a plain request whose client went away; ``transformers serve`` only a streamed one
    (docs/models.md), so its replica's calls stream. Each engine's default output limit comes with it."""
    from runner.core.served import SERVED_MAX_TOKENS
    from runner.serving import Replica

    assert [(name, engine.facts.cancels_on_disconnect) for name, engine in ENGINES.items()] == [
        ("vllm", True), ("sglang", True), ("transformers", False)]
    published = {}
    for engine in ENGINES:
        replica = Replica(ReplicaSpec(model=f"{engine}:m", engine=engine, source="m"), [], tmp_path)
        replica.port = 40000
        published[engine] = replica.endpoint
    assert {engine: (found.stream, found.max_tokens) for engine, found in published.items()} == {
        "vllm": (False, 4096), "sglang": (False, 4096), "transformers": (True, 1024)}
    assert SERVED_MAX_TOKENS == {"vllm": 4096, "sglang": 4096, "transformers": 1024}
