"""Model traffic on a real local Ray with two workers: one rate limit for both (the run's limiter actor), a 429
that one worker gets holds back the other, refusals that do not depend on the rate do not slow the run, the response
cache answers both workers, and the budget stops the pool.

The scripted server stands in for a model server (no model can run here); it records when each request arrived."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.storage import ResultStore
from tests.support.model_server import ScriptedModelServer

pytestmark = pytest.mark.usefixtures("ray_session")


def _chat(cli, server: ScriptedModelServer, storage: Path, items: int, *flags: str):
    return cli("--benchmark", "toy", "--solution", "chat", "--model", "vllm:scripted", "--model-base-url",
               server.url, "-S", "temperature=0", "--storage", str(storage), "--limit", str(items), "--workers", "2",
               "--concurrency", "8", "--log-format", "json", *flags)


def _arrivals(server: ScriptedModelServer) -> list[float]:
    return sorted(r.received_at for r in server.requests if r.path.endswith("/chat/completions"))


def _workers(storage: Path) -> set[str]:
    return {r.worker["actor_id"] for r in ResultStore(str(storage)).iter_records()}


def test_two_workers_share_one_rate_limit(cli, model_server, tmp_path):
    model_server.set_policy("echo")
    model_server.limit_rate(20)
    model_server.latency = 0.05
    result = _chat(cli, model_server, tmp_path / "run", 60, "--max-rpm", "1200")  # 20 requests/s, as the server
    assert result.returncode == 0, result.stderr
    assert model_server.rate_limited == 0
    arrivals = _arrivals(model_server)
    assert len(arrivals) == 60
    # A burst of 2, then 20 requests/s (unlimited, 16 requests in flight of 50 ms each would take 0.2 s).
    assert arrivals[-1] - arrivals[0] >= 2.5
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [endpoint] = summary["limits"]["endpoints"].values()
    assert (endpoint["requests"], endpoint["rate_rpm"], endpoint["rate_limited"]) == (60, 1200.0, 0)
    assert len(_workers(tmp_path / "run")) == 2


def test_two_workers_at_the_servers_own_rate_keep_it_second_by_second(cli, model_server, tmp_path):
    """Issue 20's input on a real Ray: ``--max-rpm 3000`` against a server that takes 50 requests/s (a bucket of one
    second, 429 beyond it), 300 items on 2 workers x 32 in flight. Counted at the server, second by second: no 429,
    the rate is not lowered, a typical second holds the schedule's 48 or 49 (50 a second less the 2.4 % margin on
    Ray; the limiter held 50 and let bursts through), and none much more.

    The limiter's own schedule holds at most 50 in every second (tests/engine/test_limiter.py); the server also sees
    delays the limiter cannot: each worker's first requests wait for its model client to start (up to half a second
    on this shared 2-core machine) and a process that waits for a core sends late, so a second here may hold up to
    about 65 (docs/performance.md, W6short)."""
    model_server.set_policy("echo")
    model_server.limit_rate(50)
    model_server.latency = 0.1
    result = _chat(cli, model_server, tmp_path / "run", 100, "--repeats", "3", "--max-rpm", "3000",
                   "--concurrency", "32")
    assert result.returncode == 0, result.stderr
    arrivals = _arrivals(model_server)
    assert len(arrivals) == 300 and model_server.rate_limited == 0
    whole = [sum(1 for at in arrivals if second <= at - arrivals[0] < second + 1)
             for second in range(int(arrivals[-1] - arrivals[0]))]
    assert sorted(whole)[len(whole) // 2] <= 49
    assert max(whole) <= 75
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [endpoint] = summary["limits"]["endpoints"].values()
    assert (endpoint["rate_rpm"], endpoint["decreases"], endpoint["rate_limited"]) == (3000.0, 0, 0)
    assert len(_workers(tmp_path / "run")) == 2


def test_a_429_one_worker_gets_holds_back_every_worker(cli, model_server, tmp_path):
    model_server.set_policy("echo")
    model_server.latency = 0.05
    model_server.fail(429, retry_after="3")
    result = _chat(cli, model_server, tmp_path / "run", 40)
    assert result.returncode == 0, result.stderr
    arrivals = _arrivals(model_server)
    refused_at = arrivals[0]
    # Requests already sent may still arrive; after that, nothing from either worker until the pause ends.
    assert [t - refused_at for t in arrivals if refused_at + 1.0 <= t < refused_at + 3.0] == []
    assert len(arrivals) == 41
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [endpoint] = summary["limits"]["endpoints"].values()
    assert endpoint["rate_limited"] == 1 and endpoint["paused_s"] == pytest.approx(3.0, abs=0.2)
    assert summary["errors"] == 0 and len(_workers(tmp_path / "run")) == 2


def test_a_server_that_refuses_every_third_request_does_not_hold_the_rate_down(cli, model_server, tmp_path):
    """Every third request refused with 429 and ``Retry-After: 0``, whatever the rate, answers otherwise at once:
    slowing down does not make refusals rarer, so the run is not slowed down (it was held to about 35 requests a
    minute: 40 items took 100 s)."""
    model_server.set_policy("echo")
    model_server.fail_every(3, 429, retry_after="0")
    # A call refused on each of its 5 attempts is an error record, as it should be; with 8 requests in flight a
    # retry lands on a refused turn about one time in three, so that happens to one call in a run now and then (CI
    # saw it once). The item's solution is tried again instead (--solution-retries), so an error record here means
    # a call that could not get through three times over.
    result = _chat(cli, model_server, tmp_path / "run", 40, "--concurrency", "4", "--solution-retries", "2")
    assert result.returncode == 0, result.stderr
    assert result.event("run.finished")["seconds"] < 30
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [endpoint] = summary["limits"]["endpoints"].values()
    assert summary["errors"] == 0 and endpoint["rate_limited"] >= 10
    assert endpoint["rate_rpm"] is None or endpoint["rate_rpm"] >= 600


def test_two_workers_share_the_connections_of_an_endpoint(cli, model_server, tmp_path):
    model_server.set_policy("echo")
    model_server.latency = 0.1
    result = _chat(cli, model_server, tmp_path / "run", 24, "--max-connections", "3")
    assert result.returncode == 0, result.stderr
    assert len(_arrivals(model_server)) == 24 and len(_workers(tmp_path / "run")) == 2
    assert 2 <= model_server.max_in_flight <= 3  # without the limit, 16 could be in flight


def test_what_two_workers_cached_answers_a_rerun(cli, model_server, tmp_path):
    model_server.set_policy("echo")
    # 0.2 s a call, one at a time per worker: 4 s of work for one worker, long enough for the second to start even
    # on a busy machine (items go only to workers that have started).
    model_server.latency = 0.2
    cache = str(tmp_path / "cache")
    first = _chat(cli, model_server, tmp_path / "first", 20, "--cache", cache, "--concurrency", "1")
    assert first.returncode == 0, first.stderr
    assert len(_arrivals(model_server)) == 20
    assert len(_workers(tmp_path / "first")) == 2
    assert len(list((tmp_path / "cache").glob("*/*.json"))) == 20

    second = _chat(cli, model_server, tmp_path / "second", 20, "--cache", cache)
    assert second.returncode == 0, second.stderr
    assert len(_arrivals(model_server)) == 20  # none more
    records = list(ResultStore(str(tmp_path / "second")).iter_records())
    assert all(r.usage["vllm:scripted"].cached_calls == 1 and r.usage["vllm:scripted"].calls == 0 for r in records)
    before = json.loads((tmp_path / "first" / "summary.json").read_text())
    after = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert after["metrics"] == before["metrics"] and after["score"] == before["score"]


def test_a_cache_in_the_drivers_memory_is_refused_naming_the_flag(cli, tmp_path):
    result = cli("-b", "toy", "-s", "calculator", "--storage", str(tmp_path / "run"), "--cache", "memory://cache",
                 "--workers", "1")
    result.error_line("--cache memory://cache lives in this process's memory, where Ray workers cannot reach it",
                      "or --sequential")
    assert not (tmp_path / "run").exists()


def test_the_budget_stops_the_pool_and_the_items_in_flight_are_written(cli, tmp_path):
    storage = tmp_path / "run"
    result = cli("--benchmark", "toy", "--solution", "chat", "--model", "mock", "--storage", str(storage),
                 "--workers", "2", "--concurrency", "2", "--log-format", "json", "--max-tokens", "60")
    assert result.returncode == 4, result.stderr
    [line] = [line for line in result.lines() if line.startswith("stopped: ")]
    records = list(ResultStore(str(storage)).iter_records())
    spent = sum(u.input_tokens + u.output_tokens for r in records for u in r.usage.values())
    assert f"the budget is spent: {spent} tokens of --max-tokens 60; {len(records)} of 100 items are done" in line
    assert all(r.status == "ok" for r in records)
    # Each item spends about 12 tokens: the budget is reached after 5 or 6 items; the items in flight then (up to 2
    # per worker, and those whose worker had not heard of the budget yet) finish, and no other starts.
    assert spent >= 60 and len(records) < 30
    assert json.loads((storage / "summary.json").read_text())["completed"] == len(records)


def test_a_worker_built_before_the_runs_limiter_actor_starts_finds_it(ray_session):
    """A worker gets the run's traffic hub when it is built, before the driver starts the limiter actor (which comes
    after the workers' processes): the hub names the actor, and the worker's limiter finds it on first use."""
    import asyncio
    import time

    from runner.core.config import RunSettings
    from runner.core.limits import Endpoint, limiter_scope, request_slot
    from runner.engine.ray.limiter import RemoteTraffic
    from runner.traffic.state import Budget

    settings = RunSettings(max_rpm=600)
    hub = RemoteTraffic(settings)
    built = ray_session.get(ray_session.put(hub))  # a worker's copy, taken before the actor exists
    endpoint = Endpoint("vllm", "http://gpu:8000/v1", "m")

    async def main() -> dict:
        await hub.start(Budget.of(settings), workers=1)
        try:
            with limiter_scope(built.limiter()):
                async with request_slot(endpoint, 10) as answer:
                    answer.set(200, {})
            built.flush()
            deadline = time.monotonic() + 30
            while True:
                state = await asyncio.wrap_future(built.actor.snapshot.remote().future())
                if state["endpoints"].get(endpoint.key, {}).get("requests") or time.monotonic() > deadline:
                    return state
                await asyncio.sleep(0.05)
        finally:
            await hub.close()

    assert built.name == hub.name
    assert asyncio.run(main())["endpoints"][endpoint.key]["requests"] == 1
