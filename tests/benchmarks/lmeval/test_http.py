"""lm-eval's ``local-completions`` path, for vLLM and SGLang replicas and any OpenAI-compatible endpoint, against the
scripted server answering in vLLM's shapes (no GPU engine runs here; ``scripts/device_check.sh`` runs a real vLLM on a
GPU machine): the runner's numbers equal those of the ``lm_eval`` command's stock ``local-completions`` against the
same server; token ids are sent with the model's context; a ``transformers serve`` endpoint gets text prompts, its
ignored ``stop`` applied on the client; a document whose request fails is that document's error record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.lmeval.compare import RESULT_KEYS, differences, runner_files
from tests.benchmarks.lmeval.conftest import N_DOCS, TASKS, run_lm_eval
from tests.benchmarks.lmeval.engines import CONTEXT, Completions, models_list
from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def vllm_like() -> Iterator[tuple[ScriptedModelServer, Completions]]:
    completions = Completions()
    server = ScriptedModelServer(models=["scripted"])
    server.completions = completions
    server.answer(models_list(), endpoint="models", times=None)
    with server:
        yield server, completions


def test_the_completions_path_matches_lm_evals_own_local_completions(cli, lm_tasks: Path, embedded_dir: Path,
                                                                     vllm_like, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    server, completions = vllm_like
    reference = run_lm_eval(
        lm_tasks, tmp_path / "lm-eval",
        f"model=scripted,base_url={server.url}/completions,tokenizer={embedded_dir},tokenizer_backend=huggingface,"
        f"tokenized_requests=True,max_length={CONTEXT},num_concurrent=1", model="local-completions")
    sent_by_lm_eval = len(completions.bodies)
    monkeypatch.chdir(lm_tasks)
    done = cli("-b", "lm-eval", "-B", f"tasks={TASKS}", "-B", f"include_path={lm_tasks}", "-B",
               f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted", "--model-base-url", server.url,
               "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    results, samples = runner_files(tmp_path / "run")
    # The task metadata holds each command's own model arguments; everything else is the same.
    found = [d for key in RESULT_KEYS if key != "configs" for d in differences(results.get(key), reference[0][key], 0,
                                                                             key)]
    for task, lines in reference[1].items():
        found += differences(samples[task], lines, 0, f"samples_{task}")
    assert found == [], "\n".join(found[:20])
    ours = completions.bodies[sent_by_lm_eval:]
    scoring = [body for body in ours if body.get("echo")]
    assert scoring and all(body["max_tokens"] == 1 and body["logprobs"] == 1 and body["model"] == "scripted"
                           for body in scoring)
    assert all(isinstance(body["prompt"][0][0], int) for body in ours)  # token ids
    assert len(ours) == sent_by_lm_eval  # one request per lm-eval request, as lm_eval sends them at batch size 1
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["usage"]["vllm:scripted"]["calls"] == sum(
        len(json.loads(path.read_text())["input"]["requests"]) for path in (tmp_path / "run").glob("records/*/0.json"))


def test_a_transformers_serve_endpoint_gets_text_prompts_and_its_stop_is_applied_here(cli, lm_tasks: Path,
                                                                                      tmp_path: Path) -> None:
    """``transformers serve`` refuses token ids and, with continuous batching, ignores ``stop``: the runner sends
    text and cuts each answer at lm-eval's ``until``, as HFLM cuts its own generations."""
    completions = Completions(honours_stop=False, token_prompts=False)
    server = ScriptedModelServer(models=["smollm2-135m-instruct"])
    server.completions = completions
    with server:
        done = cli("-b", "lm-eval", "-B", "tasks=hotpot_gen", "-B", f"include_path={lm_tasks}", "-B",
                   f"max_length={CONTEXT}", "--model", "transformers:smollm2-135m-instruct", "--model-base-url",
                   server.url, "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(isinstance(body["prompt"], str) and "\n" in body["stop"] for body in completions.bodies)
    answers = [json.loads(path.read_text())["output"]["resps"] for path in (tmp_path / "run").glob("records/*/0.json")]
    assert len(answers) == N_DOCS["hotpot_gen"]
    assert {resp[0][0] for resp in answers} == {" Paris is the answer"}


def test_a_document_whose_request_fails_is_its_own_error_record(cli, lm_tasks: Path, vllm_like, tmp_path: Path
                                                                ) -> None:
    """With batch size 4 one request carries 4 documents' prompts; the one the server refuses is that document's
    error, and the others are scored (the batch is tried again document by document)."""
    server, completions = vllm_like
    from transformers import AutoTokenizer

    from runner.serving import embedded

    tokenizer = AutoTokenizer.from_pretrained(embedded.model_dir())
    questions = [doc["question"] for doc in json.loads((lm_tasks / "data" / "yesno_test.json").read_text())]
    tokens = [set(tokenizer(f"Question: {question}\nAnswer:")["input_ids"]) for question in questions]
    marker = min(tokens[2] - set().union(*tokens[:2], *tokens[3:]))  # a token of the third document's prompt only
    completions.refuse = marker
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B", "batch_size=4",
               "-B", f"model_args=tokenizer={embedded.model_dir()}", "--model", "vllm:scripted", "--model-base-url", server.url, "--workers", "1", "--concurrency", "8",
               "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    records = {path.parent.name: json.loads(path.read_text()) for path in (tmp_path / "run").glob("records/*/0.json")}
    failed = {key for key, record in records.items() if record["status"] != "ok"}
    assert len(records) == N_DOCS["hotpot_yesno"] and failed and len(failed) < len(records)
    assert all(marker in [token for request in records[key]["input"]["requests"]
                          for token in tokenizer(request["arguments"][0] + request["arguments"][1])["input_ids"]]
               for key in failed)
    assert any(len(body["prompt"]) > 1 for body in completions.bodies)  # documents were batched
    assert "HTTP 400" in records[sorted(failed)[0]]["error"]["message"]


def test_items_on_loops_of_their_own_are_answered(cli, lm_tasks: Path, embedded_dir: Path, vllm_like,
                                                  tmp_path: Path) -> None:
    """With a time limit the sequential executor runs the items on an event loop of its own (a fresh one after it
    abandons a blocked item's): the batcher and its HTTP requests run on the items' loop, not the one the solution
    was built on."""
    server, completions = vllm_like
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={lm_tasks}", "-B",
               f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted", "--model-base-url", server.url,
               "--sequential", "--timeout", "120", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["completed"], summary["errors"]) == (N_DOCS["hotpot_yesno"], 0)
    assert len(completions.bodies) == 2 * N_DOCS["hotpot_yesno"]


def test_a_group_cut_by_the_limit_is_left_out_and_said_so(cli, lm_tasks: Path, embedded_dir: Path, vllm_like,
                                                         tmp_path: Path) -> None:
    """``--limit 3`` stops inside the group's first task: lm-eval's results have no group without all its tasks,
    and the summary's note says why; results.json names lm-eval's model class and the model, as lm_eval's does."""
    server, _ = vllm_like
    done = cli("-b", "lm-eval", "-B", "tasks=hotpot_mc", "-B", f"include_path={lm_tasks}", "-B",
               f"model_args=tokenizer={embedded_dir}", "--model", "vllm:scripted", "--model-base-url", server.url,
               "--limit", "3", "--sequential", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Task was destroyed but it is pending" not in done.stderr  # the batcher ends with its last document
    results = json.loads((tmp_path / "run" / "lm_eval" / "results.json").read_text())
    assert "groups" not in results and list(results["results"]) == ["hotpot_yesno"]
    assert results["n-samples"]["hotpot_yesno"] == {"original": N_DOCS["hotpot_yesno"], "effective": 3}
    assert (results["model_source"], results["config"]["model"], results["model_name"]) == (
        "local-completions", "local-completions", "scripted")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert any("group(s) hotpot_mc left out, as lm-eval leaves out a group with a task that has no result" in note
               for note in summary["notes"])
