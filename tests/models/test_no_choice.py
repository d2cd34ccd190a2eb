"""A well-formed reply that holds no choice (litellm#40276's kind): the provider answered ``200`` but gave no reply,
typically a content filter. It is that request's error, code ``no_choice`` with the provider's reason, never a
protocol error: the run goes on (``runner.engine.watch`` stops runs only on codes that every further call meets).

The scripted server stands in for the gateway (no model runs here); requests go through the real ``openai`` client.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runner.models import ChatModel, ModelError, RetryPolicy
from runner.storage.store import ResultStore
from tests.models.scripted import arithmetic
from tests.support.model_server import ScriptedModelServer

AZURE_FILTER = [{"prompt_index": 0, "content_filter_results": {
    "hate": {"filtered": True, "severity": "high"}, "sexual": {"filtered": False, "severity": "safe"}}}]

# (the body, with status 200; the reason the error names)
NO_CHOICE = {
    "empty-choices": ({"id": "chatcmpl-1", "object": "chat.completion", "choices": []}, "and no reason"),
    "azure-prompt-filter": ({"id": "", "object": "", "choices": [], "prompt_filter_results": AZURE_FILTER},
                            "(prompt_filter_results: hate filtered (high))"),
    "gemini-prompt-feedback": ({"id": "chatcmpl-2", "choices": [], "prompt_feedback": {"block_reason": "SAFETY"}},
                               "(prompt_feedback: blocked (SAFETY))"),
    "gateway-error-object": ({"choices": [], "error": {"message": "Blocked by the safety policy", "code": 400}},
                             "(error 400: Blocked by the safety policy)"),
    # a neighbour no test named: a choice with a finish_reason and no message at all
    "choice-without-message": ({"id": "chatcmpl-3", "choices": [{"index": 0, "finish_reason": "content_filter"}]},
                               "(finish_reason 'content_filter' and no message)"),
}


def _chat(server: ScriptedModelServer) -> Any:
    model = ChatModel.from_name("vllm:scripted", base_url=server.url,
                                retry=RetryPolicy(max_attempts=3, initial_delay=0, jitter=0))

    async def call() -> Any:
        async with model:
            return await model.chat("What is 2 + 2?")

    return asyncio.run(call())


@pytest.mark.parametrize(("body", "reason"), NO_CHOICE.values(), ids=NO_CHOICE.keys())
def test_a_reply_without_a_choice_is_a_no_choice_error_with_the_reason_not_retried(model_server, body, reason):
    model_server.answer(body)
    with pytest.raises(ModelError) as err:
        _chat(model_server)
    assert err.value.error_code == "no_choice" and not err.value.protocol_error and not err.value.retryable
    assert str(err.value).startswith(f"vllm:scripted at {model_server.url}: the server answered HTTP 200 with no "
                                     f"choice {reason}; the provider gave no reply to this request")
    assert len(model_server.chat_requests) == 1


def test_an_error_object_with_a_retryable_code_is_retried(model_server):
    model_server.answer({"choices": [], "error": {"message": "upstream timed out", "code": 502}}, times=2)
    model_server.set_policy(["4"])
    assert _chat(model_server).text == "4"
    assert len(model_server.chat_requests) == 3


def test_a_run_goes_on_past_items_without_a_choice(cli, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """The issue's input: a gateway's safety block on 3 items in a row (and 4 here) used to stop the run with exit 3
    and advice to fix the URL; now those items are error records with code no_choice and the others score."""
    model_server.set_policy(arithmetic)
    blocked = {"id": "", "object": "", "choices": [], "prompt_filter_results": AZURE_FILTER}
    model_server.answer(blocked, times=4)
    storage = tmp_path / "run"
    result = cli("-b", "toy", "-B", "n_tasks=10", "--sequential", "--storage", str(storage), "-s", "chat",
                 "--model", "vllm:scripted", "--model-base-url", model_server.url)
    assert result.returncode == 0, result.stderr
    records = sorted(ResultStore(str(storage)).iter_records(), key=lambda r: r.task_index)
    assert len(records) == 10
    errors = [r for r in records if r.status != "ok"]
    assert len(errors) == 4 and all(r.error.code == "no_choice" for r in errors)
    assert "prompt_filter_results: hate filtered (high)" in errors[0].error.message
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["completed"], summary["errors"]) == (10, 4)
    assert len(model_server.chat_requests) == 10                     # not retried
