"""Progress: counts, errors, a rate that leaves start-up out, the watch that stops a run whose model server speaks
another protocol, and the run's model traffic."""

import time

import pytest
import structlog

from runner.core.config import RunSettings
from runner.core.errors import ProtocolStop, RefusalStop, RunStopped, ServerStop
from runner.core.limits import RateSignal
from runner.core.record import ErrorInfo
from runner.engine.progress import Progress
from runner.traffic.control import TrafficControl
from runner.engine.watch import ServerWatch

PROTOCOL = ErrorInfo(type="ModelProtocolError", code="protocol_error",
                     message="vllm:m at http://host/v1: POST /chat/completions answered text/html: an HTML page titled "
                             "'Sign in', not the OpenAI API; check that --model-base-url is the root of an "
                             "OpenAI-compatible API")
OTHER = ErrorInfo(type="ModelError", message="vllm:m at http://host/v1: 500 after 5 attempts")


def test_without_items_sent_the_rate_counts_from_the_first_finished_item():
    progress = Progress(total=5, bar=False, interval=3600)
    time.sleep(0.3)                      # start-up: no item finished yet
    progress.advance("ok")
    assert progress.snapshot()["rate"] is None and progress.snapshot()["eta_s"] is None
    time.sleep(0.05)
    progress.advance("error")
    progress.advance("timeout")
    snap = progress.snapshot()
    assert (snap["done"], snap["errors"], snap["total"]) == (3, 2, 5)
    # two items in the ~0.05 s since the first one, not three in the ~0.35 s since the start
    assert snap["rate"] > 3 / 0.35
    assert snap["eta_s"] == round(2 / snap["rate"], 1)


def test_rate_counts_from_the_first_item_sent_so_a_batch_finishing_together_is_not_a_burst():
    """16 items of a minute each in flight finish within seconds of each other: counted from the first one done,
    the rate read 0.99 items/s for 20 items in 58 s. Counted from the first one sent, it is the run's throughput
    (the start-up before it left out)."""
    progress = Progress(total=4, bar=False, interval=3600)
    time.sleep(0.2)                      # start-up: nothing sent yet
    before_sent = time.monotonic()
    for index in range(4):
        progress.sent((f"t{index}", 0))
    after_sent = time.monotonic()
    time.sleep(0.3)                      # all four run at once
    for _ in range(4):
        progress.advance("ok")
    before, snap, after = time.monotonic(), progress.snapshot(), time.monotonic()
    assert 4 / (after - before_sent) <= snap["rate"] + 0.01 and snap["rate"] - 0.01 <= 4 / (before - after_sent)
    assert snap["rate"] < 4 / 0.3         # counted from the first done, it would be 3 items in a few microseconds


def test_three_protocol_errors_without_an_ok_item_between_stop_the_run():
    watch = ServerWatch()
    for status, error in [("error", PROTOCOL), ("error", PROTOCOL), ("ok", None),   # an ok item: the server answers
                          ("error", PROTOCOL), ("error", OTHER), ("timeout", None), ("error", PROTOCOL)]:
        watch.observe(status, error)
    with pytest.raises(ProtocolStop) as stopped:
        watch.observe("error", PROTOCOL)
    assert str(stopped.value) == (
        "the model server speaks another protocol: 3 items in a row failed with ModelProtocolError (vllm:m at "
        "http://host/v1: POST /chat/completions answered text/html: an HTML page titled 'Sign in', not the OpenAI "
        "API; check that --model-base-url is the root of an OpenAI-compatible API); the run stopped, its records "
        "are kept: fix the server's URL (--model-base-url, --judge-base-url...), then run the same command with "
        "--rerun-failed")
    assert stopped.value.exit_status == 3


def _refused(code: str, cause: str) -> ErrorInfo:
    return ErrorInfo(type="ModelError", code=code,
                     message=f"vllm:m at http://host/v1: the server refuses with HTTP 429 ({cause}): ...; ...")


def test_items_refused_with_429_in_a_row_stop_the_run_by_cause():
    """A used-up quota stops the run after three items, refusals for rate after five; an ok item, which shows that
    the server takes calls, starts the count again, and refusals of one cause do not count for the other."""
    watch = ServerWatch()
    quota, rate = _refused("quota_exhausted", "insufficient_quota"), _refused("rate_limited", "rate_limit_exceeded")
    for status, error in [("error", rate)] * 4 + [("ok", None)] + [("error", rate)] * 4 + [("error", quota)] * 2:
        watch.observe(status, error)
    with pytest.raises(RefusalStop) as stopped:
        watch.observe("error", quota)
    assert str(stopped.value) == (
        "the model server refuses every call with HTTP 429: the quota is used up: 3 items in a row failed with "
        "ModelError (vllm:m at http://host/v1: the server refuses with HTTP 429 (insufficient_quota): ...; ...); the "
        "run stopped, its records are kept: restore the account's quota with the provider, then run the same "
        "command with --rerun-failed")
    with pytest.raises(RefusalStop, match="^the model server keeps refusing calls with HTTP 429: 5 items in a row "):
        watch.observe("error", rate)
    assert stopped.value.exit_status == 3


def test_items_whose_engine_ignores_a_request_option_stop_the_run_naming_the_option():
    """A forced tool call the engine ignored (the chat path's neighbour of lm-eval's ``echo``): three items in a row
    stop the run; the line says which option, then quotes the error (engine, field, way out)."""
    ignored = ErrorInfo(type="ModelError", code="ignored_option",
                        message="vllm:m at http://host/v1: the engine (Ollama) ignores `tool_choice`: POST "
                                "/chat/completions: the request asked for a tool call with `tool_choice`, and "
                                "choices[0].message.tool_calls holds no call; the reply cannot be scored: ...")
    watch = ServerWatch()
    for status, error in [("error", ignored)] * 2 + [("ok", None)] + [("error", ignored)] * 2:
        watch.observe(status, error)
    with pytest.raises(ServerStop) as stopped:
        watch.observe("error", ignored)
    assert str(stopped.value).startswith(
        "the model's engine ignores `tool_choice`, which the answers need: 3 items in a row failed with ModelError "
        "(vllm:m at http://host/v1: the engine (Ollama) ignores `tool_choice`: ")
    assert stopped.value.exit_status == 3


def test_progress_counts_the_item_then_stops_the_run():
    progress = Progress(total=10, bar=False)
    progress.advance("error", error=PROTOCOL)
    progress.advance("error", error=PROTOCOL)
    with pytest.raises(RunStopped):
        progress.advance("error", error=PROTOCOL)
    assert (progress.done, progress.errors) == (3, 3)


def test_progress_events_carry_the_model_traffic_and_skipped_items_are_not_done():
    traffic = TrafficControl(RunSettings(max_rpm=600, max_tokens=100))
    state = traffic.limiter().state  # type: ignore[attr-defined]
    state.reserve("vllm:m@http://gpu/v1", "vllm:m", 1, 0, time.monotonic())
    state.observe("vllm:m@http://gpu/v1", "vllm:m", RateSignal.from_answer(429, {"retry-after": "30"}), 0, 7,
                  time.monotonic())
    traffic.limiter().spend("vllm:m", 5, 2)
    progress = Progress(total=3, bar=False, interval=0, details=traffic.progress_fields)
    with structlog.testing.capture_logs() as logs:
        progress.advance("ok")
        progress.advance("skipped")
    assert (progress.done, progress.skipped) == (1, 1)
    [event] = [entry for entry in logs if entry["event"] == "run.progress"]
    assert event["done"] == 1
    assert event["limits"]["vllm:m@http://gpu/v1"]["rate_limited"] == 1
    assert event["limits"]["vllm:m@http://gpu/v1"]["rate_rpm"] == 600.0  # a lone refusal pauses, the rate stays
    assert 29 < event["limits"]["vllm:m@http://gpu/v1"]["paused_for_s"] <= 30
    assert event["spent"] == {"tokens": 7, "cost_usd": 0.0, "reached": False, "line": "7 tokens of --max-tokens 100"}


def test_progress_events_and_the_bar_carry_the_headline_metrics_running_mean_and_interval():
    from runner.engine.item.execute import ItemResult

    progress = Progress(total=4, bar=False, interval=0, headline=("accuracy",))
    with structlog.testing.capture_logs() as logs:
        for task, value in (("a", 1.0), ("b", 0.0), ("c", 1.0)):
            progress.acknowledge(ItemResult(task, 0, "ok", True, 1, 0.01, scores={"accuracy": value, "other": 0.5},
                                            category="x"))
    running = [entry["running"] for entry in logs if entry["event"] == "run.progress"]
    assert running[0] == "accuracy 1.000" and running[-1] == progress.live.line()
    assert running[-1].startswith("accuracy 0.667 [")
    snapshot = progress.file()
    assert (snapshot["done"], snapshot["by_status"], snapshot["headline"]) == (3, {"ok": 3}, "accuracy")
    assert snapshot["by_category"]["x"]["accuracy"] == {"mean": 2 / 3, "n": 3}
    assert snapshot["metrics"]["other"]["stderr"] == 0.0
