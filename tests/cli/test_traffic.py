"""Model traffic from the command line: the limit, price and cache flags, and the budget that stops a run with exit
status 4 and one line, and counts what earlier invocations spent when the run resumes.

The ``mock`` model answers here (it reports usage like a server: words in, words out), so the tokens are exact."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runner.cli import build_parser
from runner.cli.args import config_from_args
from runner.report.status import run_status
from runner.storage import ResultStore

STOP = re.compile(r"^stopped: the budget is spent: ([\d,]+) tokens of --max-tokens ([\d,]+); (\d+) of (\d+) items are "
                  r"done; run the same command with a larger budget to resume$")


def _budget_run(cli, storage: Path, *flags: str):
    return cli("--benchmark", "toy", "--solution", "chat", "--model", "mock", "--sequential", "--storage",
               str(storage), "--log-format", "json", *flags)


def stop_line(result) -> re.Match[str]:
    """The one line of a run the budget stopped (exit status 4; every other line is a JSON log event)."""
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.lines() if not line.startswith("{")]
    assert len(lines) == 1, result.stderr
    match = STOP.match(lines[0])
    assert match, lines[0]
    return match


def _spent(storage: Path) -> list[int]:
    """Tokens of each record, in the order the items finished."""
    records = sorted(ResultStore(str(storage)).iter_records(), key=lambda r: r.finished_at)
    return [sum(u.input_tokens + u.output_tokens for u in r.usage.values()) for r in records]


def test_the_budget_stops_the_run_with_exit_4_and_one_line(cli, tmp_path):
    storage = tmp_path / "run"
    result = _budget_run(cli, storage, "--max-tokens", "50")
    spent, allowed, done, total = stop_line(result).groups()
    tokens = _spent(storage)
    # The items ran one at a time: the last one to start did so with less than 50 tokens spent, and finished.
    assert sum(tokens[:-1]) < 50 <= sum(tokens)
    assert (int(spent.replace(",", "")), allowed, int(done), total) == (sum(tokens), "50", len(tokens), "100")
    summary = json.loads((storage / "summary.json").read_text())
    assert summary["completed"] == len(tokens) and summary["missing"] == 100 - len(tokens)
    assert summary["limits"]["budget"] == {
        "max_tokens": 50, "max_cost": None, "tokens": sum(tokens), "cost_usd": 0.0, "earlier_tokens": 0,
        "earlier_cost_usd": 0.0, "reached": True, "calls_without_usage": 0, "unpriced": []}
    assert result.event("run.budget_reached")["spent"] == f"{sum(tokens)} tokens of --max-tokens 50"

    status = cli("status", str(storage))
    assert f"stopped: the run's budget is spent ({sum(tokens)} tokens of --max-tokens 50); the same command with a " \
           "larger --max-tokens / --max-cost resumes" in status.stdout
    assert run_status(str(storage)).data["stopped_by"] == "budget"


def test_resuming_counts_what_earlier_invocations_spent(cli, tmp_path):
    storage = tmp_path / "run"
    stop_line(_budget_run(cli, storage, "--max-tokens", "50"))
    first = _spent(storage)

    again = _budget_run(cli, storage, "--max-tokens", "50")
    spent, _, done, _ = stop_line(again).groups()
    assert (int(spent), int(done)) == (sum(first), len(first))
    assert again.event("run.finished")["executed"] == 0

    larger = _budget_run(cli, storage, "--max-tokens", "120")
    spent, _, done, _ = stop_line(larger).groups()
    tokens = _spent(storage)
    assert sum(tokens[:-1]) < 120 <= sum(tokens) == int(spent)
    assert larger.event("run.finished")["executed"] == len(tokens) - len(first) == int(done) - len(first)

    done_run = _budget_run(cli, storage, "--max-tokens", "100000")
    assert done_run.returncode == 0, done_run.stderr
    assert len(_spent(storage)) == 100


def test_a_run_whose_last_item_reaches_the_budget_is_complete(cli, tmp_path):
    measured = _budget_run(cli, tmp_path / "measure", "--limit", "3")
    assert measured.returncode == 0, measured.stderr
    exact = sum(_spent(tmp_path / "measure"))
    result = _budget_run(cli, tmp_path / "run", "--limit", "3", "--max-tokens", str(exact))
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["limits"]["budget"]["reached"] is True


def test_a_cost_budget_from_prices(cli, tmp_path):
    storage = tmp_path / "run"
    result = _budget_run(cli, storage, "--max-cost", "0.001", "--price", "mock=10,10")
    assert result.returncode == 4
    line = [line for line in result.lines() if line.startswith("stopped: ")][0]
    tokens = _spent(storage)
    assert f"USD {sum(tokens) * 10 / 1e6:,.4f} of --max-cost 0.001" in line
    assert sum(tokens[:-1]) * 10 / 1e6 < 0.001 <= sum(tokens) * 10 / 1e6


def test_a_cost_budget_needs_a_price_for_each_model_of_the_run(cli, tmp_path):
    result = _budget_run(cli, tmp_path / "run", "--max-cost", "1", "--price", "openai:gpt-4o=2.5,10")
    result.error_line("--max-cost needs a price for every model of the run, and mock has none", "--price mock=IN,OUT")
    assert not (tmp_path / "run").exists()


def test_a_price_that_does_not_parse_is_refused(cli, tmp_path):
    result = _budget_run(cli, tmp_path / "run", "--max-cost", "1", "--price", "mock=cheap")
    assert result.returncode == 2
    assert "expected MODEL=IN,OUT (USD per million input and output tokens" in result.stderr


def test_limit_flags_set_every_endpoint_or_one_model():
    args = build_parser().parse_args([
        "run", "-b", "toy", "--max-rpm", "600", "--max-rpm", "OpenAI:gpt-4o-mini=60", "--max-tpm", "90000",
        "--max-connections", "vllm/Qwen/Qwen2.5-7B=4", "--price", "openai:gpt-4o-mini=0.15,0.6",
        "--max-tokens", "1000000", "--cache", "s3://bucket/cache", "--cache-policy", "always"])
    config = config_from_args(args)
    assert (config.max_rpm, config.max_tpm, config.max_connections) == (600, 90000, None)
    assert config.limits_for("openai:gpt-4o-mini").model_dump() == {
        "max_rpm": 60, "max_tpm": 90000, "max_connections": None}
    assert config.limits_for("vllm:Qwen/Qwen2.5-7B").max_connections == 4
    assert config.prices["openai:gpt-4o-mini"].cost(1_000_000, 1_000_000) == 0.75
    assert (config.max_tokens, config.cache, config.cache_policy) == (1_000_000, "s3://bucket/cache", "always")


def test_a_limit_that_is_not_a_positive_number_names_its_flag(cli, tmp_path):
    result = cli("-b", "toy", "-s", "calculator", "--sequential", "--storage", str(tmp_path / "r"),
                 "--max-rpm", "openai:gpt-4o=0")
    result.error_line("--max-rpm", "greater than 0")
    result = cli("-b", "toy", "-s", "calculator", "--sequential", "--storage", str(tmp_path / "r"),
                 "--max-connections", "many")
    result.error_line("--max-connections", "valid integer")


def test_the_budget_in_a_real_process(cli_process, tmp_path):
    """The exit-4 path in a process of its own."""
    result = cli_process("--benchmark", "toy", "--solution", "chat", "--model", "mock", "--sequential",
                         "--storage", str(tmp_path / "run"), "--log-format", "json", "--max-tokens", "30")
    spent, _, done, total = stop_line(result).groups()
    assert int(done) == len(_spent(tmp_path / "run")) and total == "100" and int(spent) >= 30


RATE_LIMITED = {"error": {"message": "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
                          "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
NO_QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                      "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


def _chat_run(cli, server, storage: Path, *flags: str):
    return cli("-b", "toy", "-s", "chat", "--model", "vllm:scripted", "--model-base-url", server.url, "--sequential",
               "--storage", str(storage), "--log-format", "json", *flags)


def test_a_server_that_keeps_refusing_is_asked_again_after_its_retry_after(cli, model_server, tmp_path):
    """Every call refused with 429 and ``Retry-After: 1``: the retries go one second apart (not at a rate lowered
    to one request a minute), and the item fails after its attempts with a line that says why."""
    model_server.answer(RATE_LIMITED, status=429, headers={"Retry-After": "1"}, times=None)
    result = _chat_run(cli, model_server, tmp_path / "run", "--limit", "1")
    assert result.returncode == 0, result.stderr
    arrivals = [r.received_at for r in model_server.requests if r.path.endswith("/chat/completions")]
    assert len(arrivals) == 5
    assert all(0.9 <= later - earlier < 2.0 for earlier, later in zip(arrivals, arrivals[1:], strict=False))
    [record] = ResultStore(str(tmp_path / "run")).iter_records()
    assert record.status == "error" and record.error is not None and record.error.code == "rate_limited"
    assert record.error.message == (
        f"vllm:scripted at {model_server.url}: the server refuses with HTTP 429 (rate_limit_exceeded): Rate limit "
        "reached for requests per min (RPM): Limit 3, Used 3, Requested 1.; it refused all 5 attempts; lower the "
        "request rate (--max-rpm, --concurrency) or resume the run once its limit resets")
    [endpoint] = json.loads((tmp_path / "run" / "summary.json").read_text())["limits"]["endpoints"].values()
    assert (endpoint["rate_rpm"], endpoint["rate_limited"], endpoint["pauses"]) == (None, 5, 5)


def test_a_server_whose_quota_is_gone_stops_the_run_after_three_items(cli, model_server, tmp_path):
    model_server.answer(NO_QUOTA, status=429, headers={"Retry-After": "1"}, times=None)
    result = _chat_run(cli, model_server, tmp_path / "run", "--limit", "20")
    result.fault_line(
        "the model server refuses every call with HTTP 429: the quota is used up: 3 items in a row failed with "
        f"ModelError (vllm:scripted at {model_server.url}: the server refuses with HTTP 429 (insufficient_quota): "
        "You exceeded your current quota, please check your plan and billing details.; the account's quota is used "
        "up and no wait restores it: add credits or raise its limits); the run stopped, its records are kept: "
        "restore the account's quota with the provider, then run the same command with --rerun-failed")
    records = list(ResultStore(str(tmp_path / "run")).iter_records())
    assert len(records) == 3 and len(model_server.chat_requests) == 3  # not retried, not run past the third
    assert all(r.error is not None and r.error.code == "quota_exhausted" for r in records)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["errors"] == 3


def test_items_that_run_out_of_attempts_on_429_stop_the_run_after_five(cli, model_server, tmp_path):
    model_server.answer(RATE_LIMITED, status=429, headers={"Retry-After": "0"}, times=None)
    result = _chat_run(cli, model_server, tmp_path / "run", "--limit", "20")
    result.fault_line("the model server keeps refusing calls with HTTP 429: 5 items in a row failed with ModelError",
                      "lower the request rate (--max-rpm, --concurrency) or wait for the server's limit to reset")
    assert len(list(ResultStore(str(tmp_path / "run")).iter_records())) == 5
    assert len(model_server.chat_requests) == 25
