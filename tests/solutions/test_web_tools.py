"""The live tools (Wikipedia through the MediaWiki Action API, Open-Meteo) against a fake of those APIs on loopback
(``tests/support/fake_web.py``, recorded response shapes; there is no internet here): what the agent gets, the
run's response cache answering an identical call without a request, the run's rate limit spacing requests, the
timeout, retries, the errors the model reads, and both agents using them from the command line."""

from __future__ import annotations

import json

import pytest

from runner.benchmarks.hotpotqa.metrics import WIKIPEDIA_PAGE
from runner.core.cache import cache_scope
from runner.core.errors import ConfigError
from runner.solutions.web import WIKIPEDIA_PAGE_TOOL, LiveTools, OpenMeteo, ToolError, Wikipedia, parse_tools
from runner.storage.response_cache import StoredCache
from tests.support.fake_web import ARTICLES, FakeWeb


@pytest.fixture
def web():
    with FakeWeb() as fake:
        yield fake


async def test_wikipedia_search_and_page_give_the_agent_the_articles_text(web):
    wiki = Wikipedia(web.wikipedia_url)
    found = await wiki.search({"query": "American filmmaker"})
    assert found["total_hits"] == 2
    assert found["results"][0] == {"title": "Ed Wood", "snippet": "Ed Wood & more"}
    intro = await wiki.page({"title": "Ed Wood"})
    assert intro["title"] == "Ed Wood" and intro["text"] == ARTICLES["Ed Wood"].split("\n\n")[0]
    assert intro["url"] == f"{web.url}/wiki/Ed_Wood" and intro["next_offset"] is None
    full = await wiki.page({"title": "edward Wood", "full_text": True})
    assert full["title"] == "Ed Wood" and full["text"] == ARTICLES["Ed Wood"], "the title is normalised and redirects are followed"
    query = web.requests[-1].query
    assert query["prop"] == "extracts" and query["explaintext"] == "1" and query["formatversion"] == "2"
    assert "exintro" not in query and web.requests[-2].query["exintro"] == "1"
    missing = await wiki.page({"title": "Derrickson"})
    assert missing == {"error": "no Wikipedia article titled 'Derrickson'", "titles": ["Scott Derrickson"]}
    assert WIKIPEDIA_PAGE_TOOL["name"] == WIKIPEDIA_PAGE, "HotpotQA's tool_usage counts this tool's calls"


async def test_long_pages_are_read_in_parts(web, monkeypatch):
    from runner.solutions.web import wikipedia

    monkeypatch.setattr(wikipedia, "MAX_CHARS", 40)
    wiki = Wikipedia(web.wikipedia_url)
    first = await wiki.page({"title": "Ed Wood", "full_text": True})
    second = await wiki.page({"title": "Ed Wood", "full_text": True, "offset": first["next_offset"]})
    assert first["text"] + second["text"] == ARTICLES["Ed Wood"][:80] and first["total_chars"] == len(ARTICLES["Ed Wood"])


async def test_openmeteo_geocodes_then_forecasts(web):
    weather = OpenMeteo(web.url)
    result = await weather({"location_name": "Berlin", "country": "US", "temperature_unit": "fahrenheit",
                            "start_date": "2025-02-01"})
    assert result["location"]["admin1"] == "New Hampshire" and result["current"]["temperature_2m"] == 38.1
    assert result["daily"]["time"] == ["2025-02-01"] and result["current_units"]["temperature_2m"] == "°F"
    forecast = web.requests[-1]
    assert forecast.path == "/v1/forecast" and forecast.query["latitude"] == "44.46867"
    assert forecast.query["start_date"] == forecast.query["end_date"] == "2025-02-01"
    today = await weather({"location_name": "berlin"})
    assert today["location"]["country"] == "Germany" and "start_date" not in web.requests[-1].query
    with pytest.raises(ToolError, match="no place named 'Atlantis'"):
        await weather({"location_name": "Atlantis"})
    with pytest.raises(ToolError, match="end_date must fall on or after start_date"):
        await weather({"location_name": "Berlin", "start_date": "2025-02-02", "end_date": "2025-02-01"})
    with pytest.raises(ToolError, match="is not a date in the format YYYY-MM-DD"):
        await weather({"location_name": "Berlin", "start_date": "yesterday"})


async def test_api_errors_become_one_line_for_the_model(web, monkeypatch):
    from runner.solutions.web import http

    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(http, "_sleep", no_wait)
    weather = OpenMeteo(web.url)
    web.fail_with = [503, 503]
    assert (await weather.place("Berlin", None))["country"] == "Germany", "a 503 is tried again"
    assert web.count("/v1/search") == 3 and len(waits) == 2
    assert 0.75 <= waits[0] <= 1.0 and 1.5 <= waits[1] <= 2.0, f"the run's backoff, 1 s then 2 s less jitter: {waits}"
    web.fail_with = [400]
    with pytest.raises(ToolError, match=r"openmeteo \(.*/v1/search\) gave no answer: HTTP 400: made to fail"):
        await weather.place("Berlin", None)
    wiki = Wikipedia(web.wikipedia_url)
    with pytest.raises(ToolError, match="wikipedia_search needs a non-empty string 'query'"):
        await wiki.search({"query": " "})


async def test_a_request_past_its_timeout_fails_with_a_message(web):
    web.delay_s = 1.0
    wiki = Wikipedia(web.wikipedia_url, timeout=0.2)
    with pytest.raises(ToolError, match=r"gave no answer: no answer within 0.2 s"):
        await wiki.search({"query": "Ed Wood"})


async def test_the_runs_cache_answers_an_identical_call_without_a_request(web, tmp_path):
    cache = StoredCache(str(tmp_path / "cache"))
    wiki = Wikipedia(web.wikipedia_url)
    with cache_scope(cache):
        first = await wiki.page({"title": "Scott Derrickson"})
        assert web.count() == 1
        again = await wiki.page({"title": "Scott Derrickson"})
        other = await wiki.page({"title": "Ed Wood"})
    assert again == first and web.count() == 2, "only the new title was asked for"
    with cache_scope(StoredCache(str(tmp_path / "cache"), policy="off")):
        await wiki.page({"title": "Scott Derrickson"})
    assert web.count() == 3 and other["title"] == "Ed Wood"
    web.mediawiki_error = {"code": "maxlag", "info": "Waiting for a database server: 5 seconds lagged."}
    with cache_scope(cache), pytest.raises(ToolError, match="wikipedia refused the request: maxlag: Waiting"):
        await wiki.search({"query": "Ed Wood"})
    web.mediawiki_error = None
    with cache_scope(cache):
        assert (await wiki.search({"query": "Ed Wood"}))["results"][0]["title"] == "Ed Wood"
    assert web.count() == 5, "a refusal is not cached"


def test_tools_are_named_and_off_by_default():
    assert parse_tools(None) == () and not LiveTools()
    assert LiveTools("openmeteo, wikipedia").names == ["wikipedia_search", "wikipedia_page", "openmeteo"]
    with pytest.raises(ConfigError, match="unknown live tool 'google'"):
        parse_tools("wikipedia,google")
    with pytest.raises(ConfigError, match="tool_timeout must be a positive number of seconds"):
        LiveTools("wikipedia", timeout=0)


def test_the_hotpotqa_agent_reads_live_wikipedia_cached_and_rate_limited(cli, distractor_file, web, tmp_path):
    cache = tmp_path / "cache"
    args = ("-b", "hotpotqa", "--data-dir", distractor_file, "-s", "hotpotqa-agent", "--model", "mock",
            "--sequential", "--limit", "2", "-S", "tools=wikipedia", "-S", f"wikipedia_url={web.wikipedia_url}",
            "--cache", str(cache), "--max-rpm", "wikipedia=120")
    first = cli(*args, "--storage", str(tmp_path / "first"), env={"EVAL_CHAT_MODEL_NAME": ""})
    assert first.returncode == 0, first.stderr
    asked = web.count()
    assert asked == 4, "a search per task, and each of the two articles once: the second task read them from the cache"
    times = [request.at for request in web.requests]
    # 120 per minute: one request every 0.5 s; the first may reach the fake late (the client's start-up), so the
    # span is measured from it over the others
    assert times[-1] - times[0] >= 0.5 * (asked - 2), [round(b - a, 3) for a, b in zip(times, times[1:])]
    endpoint = json.loads((tmp_path / "first" / "summary.json").read_text())["limits"]["endpoints"][
        f"wikipedia@{web.wikipedia_url}"]
    assert endpoint["max_rpm"] == 120 and endpoint["requests"] == 4
    record = json.loads(next((tmp_path / "first").glob("records/*/0.json")).read_text())
    calls = [step for step in record["trajectory"] if step["type"] == "tool_call"]
    assert [c["name"] for c in calls][:1] == ["wikipedia_search"]
    pages = [c for c in calls if c["name"] == "wikipedia_page"]
    assert pages and pages[0]["result"]["text"] == ARTICLES[pages[0]["result"]["title"]].split("\n\n")[0]
    assert record["output"]["supporting_titles"] == [p["result"]["title"] for p in pages]
    tool_usage = next(m for m in record["metrics"] if m["name"] == "tool_usage")
    assert tool_usage["metadata"]["actual"]["context_lookup"] == len(pages)
    second = cli(*args, "--storage", str(tmp_path / "second"), env={"EVAL_CHAT_MODEL_NAME": ""})
    assert second.returncode == 0, second.stderr
    assert web.count() == asked, "the rerun's tool calls all came from the cache"
    again = json.loads(next((tmp_path / "second").glob("records/*/0.json")).read_text())
    assert again["output"] == record["output"]


def test_an_unknown_live_tool_is_refused_before_anything_is_written(cli, distractor_file, tmp_path):
    result = cli("-b", "hotpotqa", "--data-dir", distractor_file, "-s", "hotpotqa-agent", "--model", "mock",
                 "--sequential", "-S", "tools=wikipedia,bing", "--storage", str(tmp_path / "run"))
    result.error_line("unknown live tool 'bing'")
    assert not (tmp_path / "run").exists()
