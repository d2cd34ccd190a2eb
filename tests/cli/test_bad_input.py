"""Bad input: exit status 2, one line on stderr naming the problem and the way out, nothing written.

In this process (``cli``), except the one test of the exit path in a real process (``cli_process``).
"""

import json

import pytest

TOY = ["--benchmark", "toy", "--solution", "calculator", "--sequential"]


def assert_one_line_error(result, *fragments):
    result.error_line(*fragments)


def test_bad_input_in_a_real_process_is_one_line_exit_2_and_writes_nothing(cli_process, tmp_path):
    storage = tmp_path / "run"
    result = cli_process("--benchmark", "nope", "--solution", "calculator", "--storage", str(storage))
    assert result.error_line("unknown benchmark 'nope'", "toy") and result.stdout == ""
    assert not storage.exists()


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--benchmark", "nope", "--solution", "calculator"], ["unknown benchmark 'nope'", "toy"]),
        (["--benchmark", "toy", "--solution", "nope"], ["unknown solution 'nope'", "calculator"]),
        (["--benchmark", "toy", "--solution", "no_such_module:solve"], ["does not import", "PYTHONPATH"]),
        (["--benchmark", "toy", "--solution", "runner.solutions.calculator:missing"], ["has no attribute 'missing'"]),
        (["--benchmark", "toy", "-B", "colour=red", "--solution", "calculator"], ["does not accept", "colour"]),
        (["--benchmark", "toy", "--solution", "calculator", "--model", "x:y"], ["takes no arguments (model)"]),
        (["--benchmark", "toy"], ["no solution", "--solution"]),
        (["--benchmark", "toy", "--solution", "chat"], ["solution 'chat' needs --model"]),
        ([], ["no benchmark"]),
        (["--benchmark", "toy", "--repeats", "zero"], ["--repeats", "invalid int"]),
        (["--benchmark", "toy", "--storage-options", "{not json"], ["--storage-options", "not valid JSON"]),
        (TOY[:4] + ["--repeats", "0"], ["error: --repeats: Input should be greater than or equal to 1"]),
        (TOY[:4] + ["--workers", "-1"], ["error: --workers: Input should be greater than or equal to 1"]),
        (TOY[:4] + ["--memory", "lots"], ["error: --memory:", "8GiB"]),
        (TOY[:4] + ["--resources", '{"CPU": 1}'], ["error: --resources: 'CPU' is one of Ray's own", "--num-cpus"]),
        (TOY[:4] + ["--resources", '{"TPU": 0}'], ["error: --resources: 'TPU': 0 is not a positive amount"]),
        (["--benchmark", "toy", "--solution", "chat", "--model", "mock", "-S", "temperature=hot"],
         ["solution 'chat': argument temperature='hot' is not a valid float", "-S temperature=VALUE"]),
        (["--benchmark", "toy", "-B", "n_tasks=abc", "--solution", "calculator"],
         ["benchmark 'toy': argument n_tasks='abc' is not a valid int", "-B n_tasks=VALUE"]),
    ],
)
def test_unknown_names_and_bad_flags(cli, tmp_path, args, fragments):
    storage = tmp_path / "run"
    result = cli(*args, "--sequential", "--storage", str(storage))
    assert_one_line_error(result, *fragments)
    assert not storage.exists()


@pytest.mark.parametrize("args, line", [
    # the input
    (["--benchmark", "toy", "--storge", "runs/x"],
     "error: unrecognized arguments: --storge runs/x; did you mean --storage? (see 'python -m runner run --help')"),
    # neighbours: a flag written with its value, a flag of another command, a mistyped command
    (["--benchmark", "toy", "--repets=3"], "error: unrecognized arguments: --repets=3; did you mean --repeats? "
                                           "(see 'python -m runner run --help')"),
    (["status", "runs/x", "--jsno"], "error: unrecognized arguments: --jsno; did you mean --json? "
                                     "(see 'python -m runner status --help')"),
    (["k8s", "delete", "job", "--namespce", "evals"], "error: unrecognized arguments: --namespce evals; did you mean "
                                                      "--namespace? (see 'python -m runner k8s delete --help')"),
    (["stauts", "runs/x"], "error: unrecognized arguments: stauts runs/x; did you mean the command 'status'? "
                           "(see 'python -m runner run --help')"),
    (["--benchmark", "toy", "--quux"], "error: unrecognized arguments: --quux (see 'python -m runner run --help')"),
])
def test_a_mistyped_flag_gets_the_closest_one_in_one_line(cli, tmp_path, args, line):
    assert cli(*args).error_line() == line


def test_config_file_that_does_not_validate_names_the_field(cli, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("benchmark: toy\nsolution: calculator\nworker:\n  max_concurency: 4\n")
    result = cli("--config", str(config), "--storage", str(tmp_path / "run"))
    assert_one_line_error(result, "worker.max_concurency", "Extra inputs are not permitted")
    config.write_text("benchmark: toy\nrepeats: [1\n")
    assert_one_line_error(cli("--config", str(config)), "not valid YAML", "line")
    config.write_bytes("benchmark: toy\nname: caf\u00e9\n".encode("latin-1"))
    assert_one_line_error(cli("--config", str(config)), f"config file {str(config)!r} is not UTF-8 text",
                          "byte 0xe9", "save it as UTF-8")
    assert not (tmp_path / "run").exists()


def test_unwritable_local_storage(cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = cli(*TOY, "--storage", str(blocker / "run"))
    assert_one_line_error(result, "a-file/run", "NotADirectoryError", "check the storage URI")


def test_unreachable_s3_bucket_does_not_leak_credentials(cli, s3_server):
    result = cli(*TOY, "--storage", "s3://missing-bucket-xyz/run", env=s3_server)
    assert_one_line_error(result, "missing-bucket-xyz")
    assert s3_server["AWS_SECRET_ACCESS_KEY"] not in result.stderr


def test_fingerprint_mismatch_is_refused_and_force_starts_over(cli, tmp_path):
    storage = tmp_path / "run"
    assert cli(*TOY, "--storage", str(storage), "--limit", "5").returncode == 0
    before = {p: p.read_bytes() for p in storage.rglob("*") if p.is_file()}

    refused = cli("--benchmark", "toy", "--solution", "reference", "--sequential", "--storage", str(storage))
    assert_one_line_error(refused, "another configuration", "solution: 'calculator' -> 'reference'", "--force")
    assert {p: p.read_bytes() for p in storage.rglob("*") if p.is_file()} == before

    forced = cli("--benchmark", "toy", "--solution", "reference", "--sequential", "--storage", str(storage),
                 "--limit", "3", "--force")
    assert forced.returncode == 0, forced.stderr
    manifest = json.loads((storage / "run.json").read_text())
    assert manifest["fingerprint_fields"]["solution"] == "reference"
    assert len(list((storage / "records").iterdir())) == 3


def files(root):
    """Every file under ``root`` with its bytes."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "mode, message",
    [
        (["--sequential"], "could not be built (RuntimeError: no GPU on this machine)"),
        ([], "could not be built on a Ray worker (RuntimeError: no GPU on this machine)"),
    ],
    ids=["sequential", "ray"],
)
def test_a_solution_that_cannot_be_built_is_refused_before_force_deletes_anything(cli, tmp_path, mode, message,
                                                                                  ray_session):
    storage, fresh = tmp_path / "run", tmp_path / "fresh"
    assert cli(*TOY, "--storage", str(storage), "--limit", "3").returncode == 0
    before = files(storage)
    broken = ["--benchmark", "toy", "--solution", "tests.support.solutions:BrokenAgent", "--limit", "3", *mode]
    result = cli(*broken, "--force", "--storage", str(storage), env={"RAY_ADDRESS": ""})
    assert_last_line_error(result, mode, "the solution 'tests.support.solutions:BrokenAgent' " + message)
    assert files(storage) == before
    assert_last_line_error(cli(*broken, "--storage", str(fresh), env={"RAY_ADDRESS": ""}), mode, message)
    assert not fresh.exists()


def assert_last_line_error(result, mode, *fragments):
    """Sequential: exactly one line. Ray: Ray forwards the worker's own traceback of the failed constructor to the
    driver's stderr (useful when debugging a worker), so our line is the last one."""
    if mode:
        assert_one_line_error(result, *fragments)
        return
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(fragment in last for fragment in fragments), result.stderr


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--resources", '{"TPU": 1}'], "TPU=1"),
        (["--memory", "1000TiB"], "(CPU=1, memory=1000TiB)"),
    ],
)
def test_a_worker_no_ray_node_fits_is_refused_before_anything_is_written(cli, tmp_path, flags, fragment, ray_session):
    """On the tests' Ray: with --force the earlier records stay; in a new directory nothing is created."""
    storage, fresh = tmp_path / "run", tmp_path / "fresh"
    assert cli(*TOY, "--storage", str(storage), "--limit", "3").returncode == 0
    before = files(storage)
    ray_run = ["--benchmark", "toy", "--solution", "calculator", "--limit", "3", *flags]
    forced = cli(*ray_run, "--force", "--storage", str(storage), env={"RAY_ADDRESS": ""})
    assert_one_line_error(forced, "no node of the Ray cluster has the resources of one worker", fragment)
    assert files(storage) == before
    assert_one_line_error(cli(*ray_run, "--storage", str(fresh), env={"RAY_ADDRESS": ""}), "no node of the Ray")
    assert not fresh.exists()


def test_memory_storage_is_refused_on_ray(cli, ray_session):
    result = cli("--benchmark", "toy", "--solution", "calculator", "--storage", "memory://lost", env={"RAY_ADDRESS": ""})
    assert_one_line_error(result, "'memory://lost'", "Ray workers cannot write", "--sequential, a path, or")


def test_a_benchmark_without_tasks_is_refused_and_leaves_nothing(cli, tmp_path):
    """Found only by iterating it (it has no size): after the lease was taken, which is released, and the new run
    directory removed."""
    storage = tmp_path / "runs" / "empty"
    result = cli("-b", "tests.support.solutions:SquaresBenchmark", "-B", "n=0", "-s", "calculator", "--sequential",
                 "--storage", str(storage))
    assert_one_line_error(result, "the benchmark 'squares' yielded no tasks, so there is nothing to run; nothing was "
                          "written; check its data and arguments (--data-dir, -B)")
    assert result.stdout == "" and not (tmp_path / "runs").exists()
