"""lm-eval's HTTP routes against engines that answer otherwise than asked (issue 37), through the real command.

- **Answers checked against requests**: a completions engine that ignores ``echo`` (llama.cpp#27174) used to give
  every choice a log-likelihood of 0.0 and ``acc`` the share of gold answers in position 0, exit 0; now the first
  items are errors naming the engine and ``echo``, and the run stops with one line (exit 3).
- **Failures count**: a chat reply with ``choices: []`` used to fail with ``ValueError: zip() argument 2 is
  shorter...`` and drop out of lm-eval's ``results.json`` (exact_match 1.0 over the others); now it is ``no_choice``
  and a miss in every figure. A failed log-likelihood document, which lm-eval cannot score as a miss, is counted in
  the score's own line.
- **Repeats are samples**: each repeat's sampled requests carry a seed of their own (lm-eval sent 1234 in all).
- **One accounting**: the server's own ``usage`` is the run's, and counts against ``--max-tokens``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.core.scope import repeat_seed
from runner.models import ChatRequest, content_text
from tests.benchmarks.lmeval.compare import runner_files
from tests.benchmarks.lmeval.conftest import N_DOCS
from tests.benchmarks.lmeval.engines import Completions, models_list
from tests.support.model_server import CountingTokens, ScriptedModelServer


def _served(completions: Completions) -> ScriptedModelServer:
    server = ScriptedModelServer(models=["scripted"])
    server.completions = completions
    server.answer(models_list(), endpoint="models", times=None)
    return server


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((run / "records").glob("*/*.json"))]


@pytest.mark.parametrize("engine", ["llama.cpp", "an OpenAI-style server"])
def test_an_engine_that_ignores_echo_stops_the_run_naming_it(cli, lm_tasks: Path, embedded_dir: Path, tmp_path: Path,
                                                            engine: str) -> None:
    completions = Completions(shape=engine)
    with _served(completions) as server:
        url = server.url
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B",
                   f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted", "--model-base-url", url,
                   "--sequential", "--storage", str(tmp_path / "run"))
    named = "llama.cpp" if engine == "llama.cpp" else "an OpenAI-compatible server whose reply names no engine"
    line = done.fault_line("the model's engine ignores `echo`, which the answers need: 3 items in a row failed with "
                           f"ModelError (vllm:scripted at {url}: the engine ({named}) ignores `echo`",
                           "then run the same command with --rerun-failed")
    assert "choices[0].logprobs" in line
    records = _records(tmp_path / "run")
    assert len(records) == 3 and all(r["error"]["code"] == "ignored_option" for r in records)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["score"] is None  # no acc of 0.5 made of log-likelihoods of 0.0
    assert summary["score_left_out"] == 3


def test_an_engine_that_honours_echo_is_scored(cli, lm_tasks: Path, embedded_dir: Path, tmp_path: Path) -> None:
    """SGLang's answer (the neighbour of vLLM's, which test_http.py compares with lm-eval's own client)."""
    with _served(Completions(shape="SGLang")) as server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B",
                   f"model_args=tokenizer={embedded_dir}", "--model", "sglang:scripted", "--model-base-url",
                   server.url, "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["completed"], summary["errors"], summary["score_left_out"]) == (N_DOCS["hotpot_yesno"], 0, 0)
    results, _ = runner_files(tmp_path / "run")
    assert results["results"]["hotpot_yesno"]["acc,none"] == summary["score"]


ANSWERS = """\
task: answers_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/gen_test.json
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  do_sample: false
  max_gen_toks: 12
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
metadata:
  version: 1.0
"""
"""A generation task over the gen task's questions whose target is the bare answer (hotpot_gen's has a leading space
that its filters cut from the answer, so a right answer scores 0 there)."""


SEEDED = ANSWERS.replace("task: answers_gen", "task: seeded_gen").replace(
    "  do_sample: false", "  do_sample: true\n  temperature: 1.0\n  seed: 42")
"""The same task sampling with a seed of its own in ``generation_kwargs``, which lm-eval sends as it is."""


@pytest.fixture(scope="module")
def answers_task(lm_tasks: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("answers-task")
    (folder / "answers_gen.yaml").write_text(ANSWERS.format(data=lm_tasks / "data"))
    (folder / "seeded_gen.yaml").write_text(SEEDED.format(data=lm_tasks / "data"))
    return folder


def _answers(lm_tasks: Path) -> dict[str, str]:
    return {doc["question"]: doc["answer"] for doc in json.loads((lm_tasks / "data" / "gen_test.json").read_text())}


def _right_answer(answers: dict[str, str]):
    """A chat policy answering each question of the gen task with its gold answer."""

    def policy(request: ChatRequest) -> str:
        prompt = content_text(request.messages[-1]) or ""
        question = prompt.rsplit("Question: ", 1)[-1].split("\nAnswer:")[0].strip()
        return answers.get(question, "I do not know")

    return policy


CHAT = ("-B", "endpoint=chat", "-B", "apply_chat_template=true", "--model", "vllm:scripted")


def test_a_chat_reply_without_a_choice_is_no_choice_and_a_miss_everywhere(cli, lm_tasks: Path, answers_task: Path,
                                                                        tmp_path: Path) -> None:
    """The issue's input: 4 of 8 documents answered ``choices: []``; the other 4 right. exact_match is 4 of 8, in
    summary.json, lm-eval's results.json and the terminal, not 1.0 over the 4 answered."""
    server = ScriptedModelServer(_right_answer(_answers(lm_tasks)))
    server.answer({"id": "chatcmpl-1", "object": "chat.completion", "choices": []}, times=4)
    with server:
        done = cli("-b", "lm-eval", "-B", "tasks=answers_gen", "-B", f"include_path={answers_task}", *CHAT,
                   "--model-base-url", server.url, "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    records = _records(tmp_path / "run")
    failed = [r for r in records if r["status"] != "ok"]
    assert len(records) == N_DOCS["hotpot_gen"] and len(failed) == 4
    assert all(r["error"]["code"] == "no_choice" and "zip()" not in r["error"]["message"] for r in failed)
    results, samples = runner_files(tmp_path / "run")
    assert results["results"]["answers_gen"]["exact_match,none"] == 0.5
    assert results["n-samples"]["answers_gen"]["effective"] == N_DOCS["hotpot_gen"]
    assert [line["resps"] for line in samples["answers_gen"]][:4] == [[[""]]] * 4  # lm-eval's empty answer
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["score"] == 0.5 and summary["score_left_out"] == 0
    assert summary["metrics"]["exact_match,none"]["n"] == N_DOCS["hotpot_gen"]
    assert "score 0.500" in done.stdout and "left out" not in done.stdout


def test_a_failed_log_likelihood_document_is_counted_in_the_scores_line(cli, lm_tasks: Path, embedded_dir: Path,
                                                                       tmp_path: Path) -> None:
    """The neighbour: a multiple-choice document whose request the server refuses has no miss in lm-eval; the
    score's line says that it is left out, and how many of how many."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir)
    questions = [doc["question"] for doc in json.loads((lm_tasks / "data" / "yesno_test.json").read_text())]
    tokens = [set(tokenizer(f"Question: {question}\nAnswer:")["input_ids"]) for question in questions]
    completions = Completions()
    completions.refuse = min(tokens[4] - set().union(*tokens[:4], *tokens[5:]))  # a token of document 4's only
    with _served(completions) as server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B",
                   f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted",
                   "--model-base-url", server.url, "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["errors"], summary["score_left_out"]) == (1, 1)
    score_line = next(line for line in done.stdout.splitlines() if line.startswith("score "))
    assert score_line.endswith("1 of 10 items left out of the score: their model calls failed and lm-eval has no "
                               "miss for a log-likelihood (see the records' errors)"), score_line
    assert cli("report", str(tmp_path / "run"), "--html").returncode == 0
    page = (tmp_path / "run" / "report.html").read_text()
    assert "1 of 10 items left out of the score: their model calls failed and lm-eval has no miss for a " \
           "log-likelihood" in html.unescape(page)


@pytest.fixture
def sampling(lm_tasks: Path) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(_right_answer(_answers(lm_tasks))) as server:
        yield server


def _seeds_by_repeat(server: ScriptedModelServer, repeats: int) -> dict[int, set[int]]:
    """Each request's seed, by the repeat its document ran in (a sequential run sends one request per document,
    task by task and its repeats together)."""
    seeds: dict[int, set[int]] = {}
    for index, request in enumerate(server.chat_requests):
        seeds.setdefault(index % repeats, set()).add(request.seed)
    return seeds


def test_each_repeat_of_a_sampled_task_sends_a_seed_of_its_own(cli, lm_tasks: Path, sampling, tmp_path: Path) -> None:
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen", "-B", f"include_path={lm_tasks}", *CHAT, "-B",
               "gen_kwargs=temperature=1.0", "--repeats", "3", "--model-base-url", sampling.url, "--sequential",
               "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert _seeds_by_repeat(sampling, 3) == {0: {1234}, 1: {repeat_seed(1234, 1)}, 2: {repeat_seed(1234, 2)}}
    assert len({repeat_seed(1234, r) for r in range(3)}) == 3
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert not any("share the sampling seed" in note for note in summary["notes"])


def test_a_users_seed_is_kept_and_the_report_says_the_repeats_share_it(cli, lm_tasks: Path, sampling,
                                                                      tmp_path: Path) -> None:
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen", "-B", f"include_path={lm_tasks}", *CHAT, "-B",
               "gen_kwargs=temperature=1.0", "-B", "model_args=seed=7", "--repeats", "2", "--model-base-url",
               sampling.url, "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert _seeds_by_repeat(sampling, 2) == {0: {7}, 1: {7}}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert any(note.startswith("the repeats share the sampling seed 7 (-B model_args=seed=...)")
               for note in summary["notes"])
    assert "note: the repeats share the sampling seed 7" in done.stdout


def test_the_chat_route_counts_the_servers_tokens_against_the_budget(cli, lm_tasks: Path, tmp_path: Path) -> None:
    """The issue's input: 15 tokens a call and --max-tokens 100. The run used to make every call and report 0 in,
    0 out; now it stops with exit 4 after 7 calls, as the -s chat control does, and its usage is the server's."""
    counter = CountingTokens()
    server = ScriptedModelServer(_right_answer(_answers(lm_tasks)))
    server.reshape = counter
    with server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen", "-B", f"include_path={lm_tasks}", *CHAT,
                   "--repeats", "4", "--model-base-url", server.url, "--sequential", "--max-tokens", "100",
                   "--storage", str(tmp_path / "run"))
    assert done.returncode == 4, done.stderr[-3000:]
    assert counter.calls == 7
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    usage = summary["usage"]["vllm:scripted"]
    assert (usage["input_tokens"] + usage["output_tokens"], usage["calls"]) == (counter.tokens, 7)
    assert (summary["limits"]["budget"]["tokens"], summary["limits"]["budget"]["reached"]) == (counter.tokens, True)


def test_the_completions_route_shares_a_requests_tokens_among_its_prompts(cli, lm_tasks: Path, embedded_dir: Path,
                                                                          tmp_path: Path) -> None:
    """The neighbour: one request carries several prompts (a document's two choices); the server's count of each
    request is shared out among its instances, and the run's usage and budget spend sum to the server's own count."""
    completions = Completions()
    with _served(completions) as server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B",
                   "batch_size=4", "-B", f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted",
                   "--model-base-url", server.url, "--sequential", "--max-tokens", "10000000",
                   "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(len(body["prompt"]) == 2 for body in completions.bodies)  # a document's two choices in one request
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    usage = summary["usage"]["vllm:scripted"]
    assert usage["input_tokens"] + usage["output_tokens"] == completions.tokens
    assert summary["limits"]["budget"]["tokens"] == completions.tokens
    assert all(sum(u["input_tokens"] for u in r["usage"].values()) > 0 for r in _records(tmp_path / "run"))


def test_a_second_run_with_the_same_cache_makes_no_request(cli, lm_tasks: Path, embedded_dir: Path,
                                                          tmp_path: Path) -> None:
    """lm-eval's requests go through the run's response cache as chat calls do (they carry a seed, which the
    default policy keeps): a new run with the same cache is answered from it, and costs no token."""
    completions = Completions()
    with _served(completions) as server:
        def run(name: str) -> dict[str, Any]:
            done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B",
                       f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted", "--model-base-url",
                       server.url, "--sequential", "--cache", str(tmp_path / "cache"), "--storage", str(tmp_path / name))
            assert done.returncode == 0, done.stderr[-3000:]
            return json.loads((tmp_path / name / "summary.json").read_text())

        first = run("first")
        sent = len(completions.bodies)
        second = run("second")
    assert sent == 2 * N_DOCS["hotpot_yesno"] and len(completions.bodies) == sent  # a request per choice
    assert first["usage"]["vllm:scripted"]["cache_misses"] == 2 * N_DOCS["hotpot_yesno"]
    assert second["usage"]["vllm:scripted"] == {"input_tokens": 0, "output_tokens": 0, "calls": 0,
                                                "cached_calls": 2 * N_DOCS["hotpot_yesno"]}
    assert second["score"] == first["score"]


def test_a_requests_tokens_are_shared_out_whole_and_in_proportion() -> None:
    from runner.solutions.lmeval import apportion

    assert apportion(15, [10.0, 20.0]) == [5, 10]
    assert apportion(10, [1.0, 1.0, 1.0]) == [4, 3, 3] and sum(apportion(7, [3.0, 0.5, 0.5])) == 7
    assert apportion(4, [0.0, 0.0]) == [2, 2]


def test_a_tasks_own_seed_is_sent_as_lm_eval_sends_it_and_noted(cli, answers_task: Path, sampling,
                                                                 tmp_path: Path) -> None:
    done = cli("-b", "lm-eval", "-B", "tasks=seeded_gen", "-B", f"include_path={answers_task}", *CHAT, "--repeats", "2",
               "--model-base-url", sampling.url, "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert _seeds_by_repeat(sampling, 2) == {0: {42}, 1: {42}}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert any(note.startswith("task seeded_gen samples (temperature 1.0) with the seed 42 of its generation_kwargs")
               for note in summary["notes"])


def test_only_a_sampled_request_of_a_later_repeat_gets_a_seed_of_its_own() -> None:
    from runner.solutions.lmeval import reseeded

    sampled = {"messages": [], "temperature": 1.0, "seed": 1234}
    assert reseeded(sampled, 2, keep=False)["seed"] == repeat_seed(1234, 2) != 1234
    assert reseeded(sampled, 0, keep=False)["seed"] == 1234  # a run of one repeat sends what lm_eval sends
    assert reseeded(sampled, 2, keep=True)["seed"] == 1234  # the user's, or the task's gen_kwargs seed
    assert reseeded({**sampled, "temperature": 0}, 2, keep=False)["seed"] == 1234  # greedy: nothing to sample


def test_lm_eval_cells_of_two_models_at_an_endpoint_are_compared(cli, lm_tasks: Path, answers_task: Path,
                                                                 tmp_path: Path) -> None:
    """Issue 42: two models at one endpoint, an lm-eval task through ``-B endpoint=chat``: lm-eval's task metadata
    names each model, which made the benchmark versions differ and no pair was compared. Now the cells share their
    items and scoring (``scoring_version``), so the second model's exact match (4 of 8 right against 8 of 8) has its
    delta, p and Holm value in matrix.csv, the numbers ``compare`` prints."""
    import csv

    import yaml

    from runner.report import compare_runs

    answers = _answers(lm_tasks)
    right = _right_answer(answers)
    half = set(list(answers)[:4])

    def policy(request: ChatRequest) -> str:
        answer = right(request)
        prompt = content_text(request.messages[-1]) or ""
        question = prompt.rsplit("Question: ", 1)[-1].split("\nAnswer:")[0].strip()
        return answer if request.model == "good" or question in half else "I do not know"

    with ScriptedModelServer(policy, models=["good", "half"]) as server:
        config = tmp_path / "matrix.yaml"
        config.write_text(yaml.safe_dump({
            "models": ["vllm:good", "vllm:half"], "model_base_url": server.url, "baseline": "vllm:good",
            "benchmarks": [{"benchmark": "lm-eval", "args": {"tasks": "answers_gen", "include_path": str(answers_task),
                                                            "endpoint": "chat", "apply_chat_template": True}}],
            "executor": "sequential", "storage": str(tmp_path / "m"), "log_format": "json"}))
        done = cli("matrix", "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "matrix.not_compared" not in done.stderr
    base, half_cell = (tmp_path / "m" / "cells" / key / "lm-eval-answers_gen" for key in ("good", "half"))
    versions = [json.loads((cell / "run.json").read_text())["benchmark"] for cell in (base, half_cell)]
    assert versions[0]["version"] != versions[1]["version"]  # the task metadata names the model
    assert versions[0]["scoring_version"] == versions[1]["scoring_version"]
    rows = list(csv.DictReader((tmp_path / "m" / "matrix.csv").open()))
    row = next(row for row in rows if row["model"] == "half" and row["metric"] == "exact_match,none"
               and not row["category"])
    assert float(row["mean"]) == 0.5 and float(row["delta"]) == -0.5
    [overall] = [r for r in compare_runs([str(base), str(half_cell)]).rows
                 if r.category is None and r.metric == row["metric"]]
    assert float(row["p"]) == pytest.approx(overall.differences[0].p_value) and row["p_holm"] != ""
    # The headline is lm-eval's score with its interval from lm-eval's own standard error (the heatmap's interval).
    summary = json.loads((half_cell / "summary.json").read_text())
    stderr = summary["by_category"]["answers_gen"]["exact_match,none"]["stderr"]
    assert summary["score"] == 0.5 and summary["score_stderr"] == stderr > 0
    manifest = json.loads((tmp_path / "m" / "matrix.json").read_text())
    [headline] = [cell["headline"] for cell in manifest["cells"] if cell["model_key"] == "half"]
    assert headline["ci"] == pytest.approx([0.5 - 1.959964 * stderr, 0.5 + 1.959964 * stderr])
