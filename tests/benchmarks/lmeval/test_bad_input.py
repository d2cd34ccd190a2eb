"""What the lm-eval benchmark refuses, each as one line and exit status 2 before anything is written: an unknown task
(with the closest names), a task that needs prompt log-probabilities from an engine that returns none, a dataset
that is not in the cache while the Hub cannot be reached, a changed task configuration on resume."""

from __future__ import annotations

import shutil

import pytest
from pathlib import Path

from tests.benchmarks.lmeval.conftest import EMBEDDED, OFFLINE
from tests.support.cli import run_process
from tests.support.model_server import ScriptedModelServer


def test_an_unknown_task_is_one_line_with_the_closest_names(lm_tasks: Path, tmp_path: Path) -> None:
    """A real process: the one subprocess test of this benchmark's exit status 2."""
    run = tmp_path / "run"
    done = run_process("-b", "lm-eval", "-B", "tasks=hotpot_gen,hotpot_yesnoo", "-B", f"include_path={lm_tasks}",
                       "--model", EMBEDDED, "--sequential", "--storage", str(run), env=OFFLINE, timeout=300)
    done.error_line("unknown lm-eval task 'hotpot_yesnoo'; did you mean hotpot_yesno, ", "-B include_path=FOLDER")
    assert not run.exists()


def test_a_multiple_choice_task_against_transformers_serve_names_the_task_the_engine_and_the_way_out(
        cli, lm_tasks: Path, tmp_path: Path) -> None:
    with ScriptedModelServer(models=["smollm2-135m-instruct"]) as server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen,hotpot_mc", "-B", f"include_path={lm_tasks}", "--model",
                   EMBEDDED, "--model-base-url", server.url, "--sequential", "--storage", str(tmp_path / "run"))
    done.error_line("lm-eval task 'hotpot_yesno' (and 1 more) is multiple_choice, which needs the log-probabilities "
                    "of the prompt's tokens, and transformers:smollm2-135m-instruct through transformers serve returns "
                    "none; evaluate it with --model vllm:smollm2-135m-instruct or --model sglang:smollm2-135m-instruct",
                    "--model transformers:smollm2-135m-instruct and no --model-base-url (lm-eval's HFLM inside each "
                    "worker)")
    assert not (tmp_path / "run").exists()


def test_a_rolling_task_against_a_chat_endpoint_is_refused(cli, lm_tasks: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(lm_tasks)  # hotpot_ppl's data is relative to the task folder
    with ScriptedModelServer(models=["scripted"]) as server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_ppl", "-B", f"include_path={lm_tasks}", "-B", "endpoint=chat",
                   "-B", "apply_chat_template=true", "--model", "vllm:scripted", "--model-base-url", server.url,
                   "--sequential", "--storage", str(tmp_path / "run"))
    done.error_line("lm-eval task 'hotpot_ppl' is loglikelihood_rolling", "a chat endpoint returns none; drop -B "
                    "endpoint=chat")
    assert not (tmp_path / "run").exists()


def test_a_dataset_missing_from_the_cache_offline_names_it_and_the_variables(cli, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "absent.yaml").write_text("task: absent_task\ndataset_path: example-org/absent-dataset\n"
                                       "test_split: test\noutput_type: generate_until\ndoc_to_text: '{{q}}'\n"
                                       "doc_to_target: '{{a}}'\n")
    done = cli("-b", "lm-eval", "-B", "tasks=absent_task", "-B", f"include_path={tasks}", "--model", EMBEDDED,
               "--sequential", "--storage", str(tmp_path / "run"))
    done.error_line("dataset example-org/absent-dataset is not in the local Hugging Face cache and the Hub cannot be "
                    "reached", "HF_HOME", "HF_TOKEN")
    assert not (tmp_path / "run").exists()


def test_serving_a_model_the_solution_loads_itself_is_refused(cli, lm_tasks: Path, tmp_path: Path) -> None:
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen", "-B", f"include_path={lm_tasks}", "--model", EMBEDDED,
               "--serve", "--sequential", "--storage", str(tmp_path / "run"))
    done.error_line(f"--serve {EMBEDDED}: the solution runs {EMBEDDED} in each worker itself; drop --serve")


def test_a_changed_task_configuration_is_a_changed_fingerprint(cli, lm_tasks: Path, tmp_path: Path) -> None:
    """The same command over an edited task YAML: its prompts changed, so the stored run is not resumed with it."""
    tasks = tmp_path / "tasks"
    shutil.copytree(lm_tasks, tasks)
    command = ("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={tasks}", "-B", "limit=2",
               "--model", EMBEDDED, "--sequential", "--storage", str(tmp_path / "run"))
    assert cli(*command).returncode == 0
    records = sorted(path.read_bytes() for path in (tmp_path / "run").glob("records/*/0.json"))
    yaml = tasks / "hotpot_yesno.yaml"
    yaml.write_text(yaml.read_text().replace('doc_to_text: "Question:', 'doc_to_text: "Q:'))
    done = cli(*command)
    done.error_line("holds a run of another configuration (benchmark_version:", "use another --storage, or --force")
    assert sorted(path.read_bytes() for path in (tmp_path / "run").glob("records/*/0.json")) == records


def test_the_benchmark_is_listed(cli) -> None:
    done = cli("list")
    assert done.returncode == 0 and "lm-eval" in done.stdout, done.stdout


def test_a_group_of_your_own_with_a_built_in_task_loads_it_from_lm_evals_index(cli, lm_tasks: Path,
                                                                              tmp_path: Path) -> None:
    """A folder's own tasks load without lm-eval's built-in index (7 s saved); a group of the folder that names a
    built-in task (ARC-Easy) needs that index: it is found there, and its dataset is the one missing offline."""
    tasks = tmp_path / "tasks"
    shutil.copytree(lm_tasks, tasks)
    (tasks / "mix.yaml").write_text("group: my_mix\ntask:\n  - hotpot_yesno\n  - arc_easy\n")
    done = cli("-b", "lm-eval", "-B", "tasks=my_mix", "-B", f"include_path={tasks}", "--model", EMBEDDED,
               "--sequential", "--storage", str(tmp_path / "run"))
    done.error_line("dataset allenai/ai2_arc is not in the local Hugging Face cache")


@pytest.mark.parametrize("argument, problem", [
    ("endpoint=chat", "-B endpoint=chat sends each prompt as chat messages"),
    ("num_fewshot=-1", "-B num_fewshot=-1: give a whole number of examples, 0 or more"),
    ("gen_kwargs=notkv", "-B gen_kwargs='notkv': write key=value,key=value"),
    ("metadata=notjson", "-B metadata='notjson': write key=value,key=value"),
    ("batch_size=0", "-B batch_size=0: give a whole number of at least 1"),
    ("seed=abc", "-B seed='abc': give an integer or random,numpy,torch,fewshot"),
])
def test_a_bad_argument_is_one_line_before_anything_is_written(cli, lm_tasks: Path, tmp_path: Path, argument: str,
                                                               problem: str) -> None:
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen", "-B", f"include_path={lm_tasks}", "-B", argument,
               "--model", EMBEDDED, "--sequential", "--storage", str(tmp_path / "run"))
    done.error_line(problem)
    assert not (tmp_path / "run").exists()



def test_a_gated_dataset_names_it_and_hf_token() -> None:
    """The chain ``datasets`` raises for a gated dataset without a token (its DatasetNotFoundError's message, over the
    Hub's 401), read as one line naming the dataset and HF_TOKEN; an unrelated failure is not taken for one."""
    from datasets.exceptions import DatasetNotFoundError

    from runner.benchmarks.lmeval.loading import _dataset_problem

    try:
        try:
            raise OSError("401 Client Error: Unauthorized for url: https://huggingface.co/api/datasets/cais/gated")
        except OSError as hub:
            raise DatasetNotFoundError("Dataset 'cais/gated' is a gated dataset on the Hub. You must be authenticated "
                                       "to access it.") from hub
    except DatasetNotFoundError as exc:
        line = _dataset_problem(exc)
    assert line == ("dataset cais/gated is gated on the Hugging Face Hub: set HF_TOKEN to a token that was granted "
                    "access (and accept the dataset's terms on its page)")
    assert _dataset_problem(ValueError("doc_to_text is not a string")) is None
