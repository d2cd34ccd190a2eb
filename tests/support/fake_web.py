"""A fake of the public APIs behind the live tools, on loopback: MediaWiki's Action API (``/w/api.php``: search
and TextExtracts page extracts) and Open-Meteo (``/v1/search`` geocoding, ``/v1/forecast``).

It stands in for Wikipedia and Open-Meteo because the test machines have no internet. Its answers have the shapes
the real APIs send (``formatversion=2`` for MediaWiki; Open-Meteo's geocoding and forecast JSON, and its 400 with
``{"error": true, "reason": ...}``), over a small made-up wiki and two places. Every request is recorded (monotonic
time, path, query) so tests can count requests and measure their spacing; ``delay_s`` slows every answer and
``fail_with`` makes the next answers fail with the given HTTP statuses.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

ARTICLES = {
    "Ed Wood": ("Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker, actor, and "
                "pulp novel author.\n\nIn the 1950s, Wood directed several low-budget science fiction films."),
    "Scott Derrickson": ("Scott Derrickson (born July 16, 1966) is an American filmmaker. He is best known for "
                         "directing horror films.\n\nDerrickson grew up in Denver, Colorado."),
}
REDIRECTS = {"Edward Wood": "Ed Wood"}
PLACES = [
    {"id": 2950159, "name": "Berlin", "latitude": 52.52437, "longitude": 13.41053, "elevation": 74.0,
     "feature_code": "PPLC", "country_code": "DE", "admin1_id": 2950157, "timezone": "Europe/Berlin",
     "population": 3426354, "country_id": 2921044, "country": "Germany", "admin1": "Land Berlin"},
    {"id": 5083330, "name": "Berlin", "latitude": 44.46867, "longitude": -71.18508, "elevation": 311.0,
     "feature_code": "PPL", "country_code": "US", "admin1_id": 5090174, "timezone": "America/New_York",
     "population": 9367, "country_id": 6252001, "country": "United States", "admin1": "New Hampshire"},
]
FORECAST_VARIABLES = {"temperature_2m", "rain", "relative_humidity_2m", "wind_speed_10m", "temperature_2m_max",
                      "temperature_2m_min", "rain_sum"}


@dataclass
class Request:
    """One request the fake received: ``at`` (``time.monotonic()``), ``path`` and ``query`` (one value per key)."""

    at: float
    path: str
    query: dict[str, str]


def _extract(title: str, intro: bool) -> str:
    text = ARTICLES[title]
    return text.split("\n\n")[0] if intro else text


def mediawiki(query: dict[str, str]) -> tuple[int, Any]:
    """The Action API's answer to ``query`` (``formatversion=2`` shapes)."""
    if query.get("action") != "query":
        return 200, {"error": {"code": "badvalue", "info": f"Unrecognized value for parameter \"action\": "
                                                            f"{query.get('action')}.", "docref": "See api.php."},
                     "servedby": "fake-mw"}
    if query.get("list") == "search":
        words = [w.casefold() for w in re.findall(r"\w+", query.get("srsearch", ""))]
        hits = [title for title, text in ARTICLES.items()
                if any(word in (title + " " + text).casefold() for word in words)]
        limit = int(query.get("srlimit", 10))
        found = [{"ns": 0, "title": title, "pageid": 1000 + i,
                  "snippet": f"<span class=\"searchmatch\">{title}</span> &amp; more"}
                 for i, title in enumerate(hits[:limit])]
        answer: dict[str, Any] = {"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(hits)},
                                                                  "search": found}}
        if len(hits) > limit:
            answer["continue"] = {"sroffset": limit, "continue": "-||"}
        return 200, answer
    if query.get("prop") == "extracts":
        asked = query.get("titles", "")
        normalized = asked[:1].upper() + asked[1:]
        result: dict[str, Any] = {}
        if normalized != asked:
            result["normalized"] = [{"fromencoded": False, "from": asked, "to": normalized}]
        title = normalized
        if query.get("redirects") and title in REDIRECTS:
            result["redirects"] = [{"from": title, "to": REDIRECTS[title]}]
            title = REDIRECTS[title]
        if title in ARTICLES:
            page = {"pageid": 1000 + list(ARTICLES).index(title), "ns": 0, "title": title,
                    "extract": _extract(title, "exintro" in query)}
        else:
            page = {"ns": 0, "title": title, "missing": True}
        return 200, {"batchcomplete": True, "query": {**result, "pages": [page]}}
    return 200, {"batchcomplete": True}


def openmeteo(path: str, query: dict[str, str]) -> tuple[int, Any]:
    """Open-Meteo's answer (geocoding or forecast)."""
    if path == "/v1/search":
        name = query.get("name", "").casefold()
        results = [place for place in PLACES if place["name"].casefold() == name][: int(query.get("count", 10))]
        return 200, ({"results": results, "generationtime_ms": 0.7} if results else {"generationtime_ms": 0.5})
    for key in ("current", "daily"):
        for variable in query.get(key, "").split(","):
            if variable and variable not in FORECAST_VARIABLES:
                return 400, {"error": True, "reason": f"Cannot initialize WeatherVariable from invalid String value "
                                                      f"{variable} for key {key}"}
    fahrenheit = query.get("temperature_unit") == "fahrenheit"
    unit = "°F" if fahrenheit else "°C"
    start = query.get("start_date", "2025-01-15")
    return 200, {
        "latitude": round(float(query["latitude"]), 2), "longitude": round(float(query["longitude"]), 2),
        "generationtime_ms": 0.05, "utc_offset_seconds": 0, "timezone": "UTC", "timezone_abbreviation": "UTC",
        "elevation": 38.0,
        "current_units": {"time": "iso8601", "interval": "seconds", "temperature_2m": unit, "rain": "mm",
                          "relative_humidity_2m": "%", "wind_speed_10m": "km/h"},
        "current": {"time": f"{start}T12:00", "interval": 900, "temperature_2m": 38.1 if fahrenheit else 3.4,
                    "rain": 0.0, "relative_humidity_2m": 81, "wind_speed_10m": 11.2},
        "daily_units": {"time": "iso8601", "temperature_2m_max": unit, "temperature_2m_min": unit, "rain_sum": "mm"},
        "daily": {"time": [start], "temperature_2m_max": [5.1], "temperature_2m_min": [-0.4], "rain_sum": [0.2]},
    }


class FakeWeb:
    """The fake APIs on ``127.0.0.1`` (a free port); a context manager.

    Attributes:
        url: the root (``http://127.0.0.1:PORT``); ``wikipedia_url`` is ``<url>/w/api.php``.
        requests: every request received, in order.
        delay_s: seconds every answer waits (to make a client time out).
        fail_with: HTTP statuses the next answers take, one per answer (e.g. ``[503]``).
        mediawiki_error: when set, MediaWiki answers 200 with this ``error`` object, as it does for ``maxlag`` or a
            bad parameter.
    """

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.delay_s = 0.0
        self.fail_with: list[int] = []
        self.mediawiki_error: dict[str, str] | None = None
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                parsed = urlparse(self.path)
                query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
                with fake._lock:
                    fake.requests.append(Request(time.monotonic(), parsed.path, query))
                    failure = fake.fail_with.pop(0) if fake.fail_with else None
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if failure is not None:
                    status, body = failure, {"error": True, "reason": "made to fail by the test"}
                elif parsed.path == "/w/api.php" and fake.mediawiki_error is not None:
                    status, body = 200, {"error": fake.mediawiki_error, "servedby": "fake-mw"}
                elif parsed.path == "/w/api.php":
                    status, body = mediawiki(query)
                elif parsed.path in ("/v1/search", "/v1/forecast"):
                    status, body = openmeteo(parsed.path, query)
                else:
                    status, body = 404, {"error": True, "reason": "Not Found"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.wikipedia_url = f"{self.url}/w/api.php"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeWeb:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def count(self, path: str | None = None) -> int:
        """Requests received (to ``path`` only, when given)."""
        return sum(1 for request in self.requests if path is None or request.path == path)
