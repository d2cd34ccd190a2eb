"""Token counts whatever the engine's release (issue 37: a fresh install got ``transformers serve`` 5.25, whose stream
carries the usage only when asked, and the run printed ``0 in, 0 out, 20 calls``).

A run against a replica of ``transformers serve`` (published as the run publishes one: streamed, with the embedded
model's tokenizer) asks for the usage, and reports the server's counts whether the server sends them in every stream
(5.17) or only when asked (5.25). A server that never reports usage has each call's prompt and answer counted with the
model's own tokenizer, marked as the runner's count in the records, ``summary.json``, the terminal and the page. A
server that reports none where the run has no tokenizer (a plain answer of a server given by URL) is ``usage unknown``
with the calls that reported none, never 0 tokens. The scripted server stands in for the engines (it counts words);
the tokenizer is the embedded model's, real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import html5lib
import pytest

from runner.core import served
from runner.core.served import ServedEndpoint
from runner.storage.store import ResultStore
from tests.models.scripted import arithmetic, prompt_words
from tests.support.model_server import ScriptedModelServer

MODEL = "transformers:scripted"


@pytest.fixture
def replica(model_server: ScriptedModelServer, embedded_dir: Path) -> Iterator[ScriptedModelServer]:
    """The scripted server published as a replica of ``transformers serve`` is: streamed, with the embedded model's
    tokenizer; answering the toy benchmark's questions."""
    model_server.set_policy(arithmetic)
    served.publish(ServedEndpoint(MODEL, model_server.url, "scripted", tokenizer=str(embedded_dir), stream=True))
    yield model_server
    served.forget(MODEL)


def run(cli: Any, folder: Path, *flags: str) -> tuple[Any, dict[str, Any], list[Any]]:
    """A 3-task toy run of the chat solution with ``flags``, sequential, with its page: the CLI's result, its
    summary.json and its records by task."""
    result = cli("-b", "toy", "-B", "n_tasks=3", "-s", "chat", "--sequential", "--storage", str(folder / "run"),
                 "--html", *flags)
    assert result.returncode == 0, result.stderr
    summary = json.loads((folder / "run" / "summary.json").read_text())
    records = sorted(ResultStore(str(folder / "run")).iter_records(), key=lambda record: record.task_id)
    return result, summary, records


def token_line(stdout: str, model: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith(f"tokens {model}: ")]
    return line


def usage_row(folder: Path, model: str) -> list[str]:
    """The cells of ``model``'s row in the page's token table."""
    document = html5lib.parse((folder / "run" / "report.html").read_text(encoding="utf-8"),
                              namespaceHTMLElements=False)
    rows = document.findall(".//section[@id='tokens']//tr")
    [cells] = [["".join(cell.itertext()) for cell in row] for row in rows if row[0].text == model]
    return cells


@pytest.mark.parametrize("release, stream_usage", [("5.17", "finish"), ("5.25", "asked")])
def test_a_replica_reports_its_own_counts_whether_it_sends_usage_always_or_only_when_asked(
        cli: Any, tmp_path: Path, replica: ScriptedModelServer, release: str, stream_usage: str) -> None:
    replica.stream_usage = stream_usage
    result, summary, records = run(cli, tmp_path, "--model", MODEL)
    bodies = [request.body for request in replica.requests if request.path.endswith("/chat/completions")]
    assert [body["stream"] for body in bodies] == [True] * 3
    assert [body["stream_options"] for body in bodies] == [{"include_usage": True}] * 3
    words = sum(prompt_words(request) for request in replica.chat_requests)
    assert summary["score"] == 1.0
    assert summary["usage"][MODEL] == {"input_tokens": words, "output_tokens": 3, "calls": 3}
    assert token_line(result.stdout, MODEL) == (
        f"tokens {MODEL}: {words:,} in, 3 out, 3 calls; per item {words / 3:,.0f} in, 1 out")
    assert [record.usage[MODEL].calls_counted_by_runner for record in records] == [0, 0, 0]
    assert usage_row(tmp_path, MODEL)[-1] == "reported by the server"


def _without_usage(body: dict[str, Any]) -> dict[str, Any]:
    body.pop("usage", None)
    return body


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_a_replica_that_never_reports_usage_has_its_tokens_counted_with_the_models_tokenizer(
        cli: Any, tmp_path: Path, replica: ScriptedModelServer, embedded_dir: Path, stream: bool) -> None:
    """Streamed, as the run calls ``transformers serve``; plain, the neighbour: a replica whose answer is JSON."""
    from transformers import AutoTokenizer

    replica.stream_usage = "never"
    replica.reshape = _without_usage
    if not stream:
        served.publish(ServedEndpoint(MODEL, replica.url, "scripted", tokenizer=str(embedded_dir)))
    result, summary, records = run(cli, tmp_path, "--model", MODEL)
    assert all(("stream" in request.body) == stream for request in replica.requests
               if request.path.endswith("/chat/completions"))
    tokenizer = AutoTokenizer.from_pretrained(embedded_dir)
    prompts, answers = [], []
    for request, record in zip(replica.chat_requests, records, strict=True):
        template = tokenizer.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=True)
        prompts.append(len(template["input_ids"]))
        # The answer's tokens and the end-of-turn token the model stopped with, as the server counts generated ids.
        answers.append(len(tokenizer.encode(record.output, add_special_tokens=False)) + 1)
    assert [(record.usage[MODEL].input_tokens, record.usage[MODEL].output_tokens) for record in records] == list(
        zip(prompts, answers))
    assert summary["usage"][MODEL] == {"input_tokens": sum(prompts), "output_tokens": sum(answers), "calls": 3,
                                       "calls_counted_by_runner": 3}
    assert token_line(result.stdout, MODEL) == (
        f"tokens {MODEL}: {sum(prompts):,} in, {sum(answers):,} out, 3 calls (3 counted by the runner with the model's "
        f"tokenizer, the server reported none); per item {sum(prompts) / 3:,.0f} in, {sum(answers) / 3:,.0f} out")
    cells = usage_row(tmp_path, MODEL)
    assert cells[2:4] == [f"{sum(prompts):,}", f"{sum(answers):,}"]
    assert cells[-1] == "3 counted by the runner with the model's tokenizer, the server reported none"


def test_calls_whose_usage_is_unknown_are_never_shown_as_0_tokens(cli: Any, tmp_path: Path,
                                                                  model_server: ScriptedModelServer) -> None:
    """Another engine's shape: plain answers without usage from a server given by URL, whose tokenizer the run does
    not have. Every call without usage: no sums at all; some: the sums of the others, and how many are left out."""
    model_server.set_policy(arithmetic)
    model_server.reshape = _without_usage
    result, summary, _ = run(cli, tmp_path / "none", "--model", "vllm:scripted", "--model-base-url", model_server.url)
    assert summary["usage"]["vllm:scripted"] == {"input_tokens": 0, "output_tokens": 0, "calls": 3,
                                                 "calls_without_usage": 3}
    assert token_line(result.stdout, "vllm:scripted") == (
        "tokens vllm:scripted: usage unknown, 3 calls (none reported usage)")
    cells = usage_row(tmp_path / "none", "vllm:scripted")
    assert cells[1:7] == ["3", "–", "–", "–", "–", "1.00"] and cells[-1] == "none reported usage"

    answered: list[int] = []

    def every_other(body: dict[str, Any]) -> dict[str, Any]:
        answered.append(1)
        return body if len(answered) % 2 else _without_usage(body)

    model_server.reshape = every_other
    result, summary, _ = run(cli, tmp_path / "some", "--model", "vllm:scripted", "--model-base-url", model_server.url)
    used = summary["usage"]["vllm:scripted"]
    assert (used["calls"], used["calls_without_usage"], used["output_tokens"]) == (3, 1, 2)
    assert token_line(result.stdout, "vllm:scripted") == (
        f"tokens vllm:scripted: {used['input_tokens']:,} in, 2 out, 3 calls (1 of 3 reported no usage, not in the "
        f"sums); per item {used['input_tokens'] / 3:,.0f} in, 1 out")
