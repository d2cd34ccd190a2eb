"""Model calls inside a run: usage lands in each record and sums in summary.json; a model server that goes away
mid-run gives error records, not a crash. The scripted server stands in for a model server (no model can run here).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.solutions.chat import chat
from runner.benchmarks.toy import ToyBenchmark
from runner.core.solution import SolutionSpec
from runner.evaluators import GeneralEvaluator
from runner.models import _retry
from runner.storage.store import ResultStore
from tests.models.scripted import arithmetic, prompt_words
from tests.support.model_server import ScriptedModelServer


def _run(tmp_path: Path, base_url: str, n_tasks: int = 4) -> tuple[ResultStore, dict]:
    store = ResultStore(str(tmp_path / "run"))
    spec = SolutionSpec(target=chat, kwargs={"model": "vllm:scripted", "model_base_url": base_url}, name="chat")
    evaluator = GeneralEvaluator(name="toy", benchmark=ToyBenchmark(n_tasks=n_tasks), storage=store,
                                 solution_func=spec, show=False)
    asyncio.run(evaluator.run())
    return store, json.loads(store.read_file("summary.json") or b"{}")


def test_usage_is_recorded_per_task_and_summed_in_the_summary(model_server: ScriptedModelServer,
                                                               tmp_path: Path) -> None:
    model_server.set_policy(arithmetic)
    store, summary = _run(tmp_path, model_server.url)

    assert summary["score"] == 1.0 and summary["errors"] == 0
    requests = model_server.chat_requests
    assert len(requests) == 4
    expected_in = sum(prompt_words(r) for r in requests)
    assert summary["usage"] == {"vllm:scripted": {"input_tokens": expected_in, "output_tokens": 4, "calls": 4}}
    records = sorted(store.iter_records(), key=lambda r: r.task_id)
    assert [r.usage["vllm:scripted"].input_tokens for r in records] == [prompt_words(r) for r in requests]
    assert all(r.usage["vllm:scripted"].calls == 1 for r in records)
    assert records[0].trajectory[-1]["role"] == "assistant"


def test_a_refused_connection_mid_run_is_an_error_record_per_task(refused_url: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(_retry, "_sleep", no_wait)
    store, summary = _run(tmp_path, refused_url, n_tasks=2)

    assert summary["errors"] == 2 and summary["by_status"] == {"error": 2}
    for record in store.iter_records():
        assert record.error is not None and record.error.type == "ModelError"
        assert f"cannot connect to the model server at {refused_url} after 5 attempt(s)" in record.error.message
        assert record.usage == {}
