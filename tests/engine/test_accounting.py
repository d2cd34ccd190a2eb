"""One accounting for every request path (issue 37): what the model server counted is what the run reports as its
usage and spends from its budget, whichever path made the calls: a chat solution, an LLM judge, an agent's tool
loop. The scripted server counts the tokens of every answer it sends (:class:`CountingTokens`); lm-eval's routes
have the same test in ``tests/benchmarks/lmeval/test_answers.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.model_server import CountingTokens, ScriptedModelServer


def _run(cli, tmp_path: Path, *flags: str) -> dict:
    done = cli(*flags, "--sequential", "--max-tokens", "1000000", "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / "run" / "summary.json").read_text())


PATHS = {
    "chat-solution": lambda url, data: ("-b", "toy", "-B", "n_tasks=6", "-s", "chat", "--model", "vllm:scripted",
                                        "--model-base-url", url),
    "judge": lambda url, data: ("-b", "hotpotqa", "--data-dir", data["beeai"], "-s", "reference", "--repeats", "2",
                                "--judge-model", "vllm:scripted", "--judge-base-url", url),
    "agent": lambda url, data: ("-b", "hotpotqa", "--data-dir", data["distractor"], "--limit", "3", "-s",
                                "hotpotqa-agent", "--model", "vllm:scripted", "--model-base-url", url,
                                "--judge-model", "none"),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_the_servers_token_count_is_the_runs_usage_and_budget_spend(cli, tmp_path: Path, path: str,
                                                                   beeai_file: str, distractor_file: str) -> None:
    counter = CountingTokens(prompt=12, completion=3)
    server = ScriptedModelServer()
    server.reshape = counter
    with server:
        summary = _run(cli, tmp_path, *PATHS[path](server.url, {"beeai": beeai_file, "distractor": distractor_file}))
    assert counter.calls > 0
    usage = summary["usage"]["vllm:scripted"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["calls"]) == (
        12 * counter.calls, 3 * counter.calls, counter.calls)
    assert summary["limits"]["budget"]["tokens"] == counter.tokens
