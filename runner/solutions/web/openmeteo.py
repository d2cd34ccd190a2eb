"""Live weather from Open-Meteo: a place name through its geocoding API, then the forecast API.

- geocoding: ``GET https://geocoding-api.open-meteo.com/v1/search?name=...&count=10&language=en&format=json``
  (https://open-meteo.com/en/docs/geocoding-api): ``{"results": [{"name", "latitude", "longitude", "country",
  "country_code", "timezone", ...}]}``, no ``results`` when nothing matches;
- forecast: ``GET https://api.open-meteo.com/v1/forecast?latitude=...&longitude=...&current=...&daily=...``
  (https://open-meteo.com/en/docs): ``current`` and ``daily`` values with their ``*_units``; a bad request is a 400
  with ``{"error": true, "reason": ...}``.

The input is that of BeeAI's ``OpenMeteoTool`` (beeai-framework ``python/beeai_framework/tools/weather/
openmeteo.py``: ``location_name``, ``country``, ``start_date``, ``end_date``, ``temperature_unit``) and so are the
variables asked for. Unlike BeeAI, missing dates are left to the API (today's forecast) rather than filled in with
today's date, so a cached answer replays on a later day (the key does not change with the date).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from runner.solutions.tools import ToolError
from runner.solutions.web.http import DEFAULT_TIMEOUT_S, JSONClient

GEOCODING_URL = "https://geocoding-api.open-meteo.com/v1/search"
FORECAST_URL = "https://api.open-meteo.com/v1/forecast"
CURRENT = "temperature_2m,rain,relative_humidity_2m,wind_speed_10m"
DAILY = "temperature_2m_max,temperature_2m_min,rain_sum"

OPENMETEO_TOOL = {
    "name": "openmeteo",
    "description": "Retrieve current, past, or future weather forecasts for a location (live, over the internet).",
    "parameters": {
        "type": "object",
        "properties": {
            "location_name": {"type": "string", "description": "The name of the location, e.g. 'Prague'"},
            "country": {"type": "string", "description": "Country name or ISO code, to pick among places of that "
                                                         "name"},
            "start_date": {"type": "string", "description": "Start date, YYYY-MM-DD (UTC)"},
            "end_date": {"type": "string", "description": "End date, YYYY-MM-DD (UTC)"},
            "temperature_unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                                 "description": "The unit of temperatures (default celsius)"},
        },
        "required": ["location_name"],
    },
}


def _date(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None or value == "":
        return None
    try:
        return _dt.date.fromisoformat(str(value)[:10]).isoformat()
    except ValueError:
        raise ToolError(f"openmeteo: {name} {value!r} is not a date in the format YYYY-MM-DD") from None


class OpenMeteo:
    """The ``openmeteo`` tool.

    Args:
        url: one root for both APIs (``<url>/v1/search`` and ``<url>/v1/forecast``), e.g. a fake's; ``None``: the
            public geocoding and forecast hosts.
        timeout: seconds per request.
    """

    def __init__(self, url: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        root = url.rstrip("/") if url else None
        self.geocoding = JSONClient("openmeteo", f"{root}/v1/search" if root else GEOCODING_URL, timeout)
        self.forecast = JSONClient("openmeteo", f"{root}/v1/forecast" if root else FORECAST_URL, timeout)

    async def place(self, name: str, country: str | None) -> dict[str, Any]:
        """The first geocoding match of ``name`` (in ``country`` when given: its name or ISO code).

        Raises:
            ToolError: no match, or the API failed.
        """
        data = await self.geocoding.get({"name": name, "count": 10, "language": "en", "format": "json"})
        results = [r for r in (data.get("results") or []) if isinstance(r, dict)] if isinstance(data, dict) else []
        if country:
            wanted = country.strip().casefold()
            results = [r for r in results if wanted in (str(r.get("country", "")).casefold(),
                                                        str(r.get("country_code", "")).casefold())]
        if not results:
            where = f" in {country}" if country else ""
            raise ToolError(f"openmeteo: no place named {name!r}{where}; try another spelling or a nearby city")
        return results[0]

    async def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{"location": {...}, "current", "current_units", "daily", "daily_units"}`` for the place.

        Raises:
            ToolError: bad arguments, no such place, or an API failure.
        """
        name = arguments.get("location_name")
        if not isinstance(name, str) or not name.strip():
            raise ToolError("openmeteo needs a non-empty string 'location_name'")
        unit = arguments.get("temperature_unit") or "celsius"
        if unit not in ("celsius", "fahrenheit"):
            raise ToolError("openmeteo: temperature_unit must be celsius or fahrenheit")
        start, end = _date(arguments, "start_date"), _date(arguments, "end_date")
        if start and end and end < start:
            raise ToolError("openmeteo: end_date must fall on or after start_date")
        country = arguments.get("country")
        place = await self.place(name.strip(), country if isinstance(country, str) and country.strip() else None)
        params: dict[str, Any] = {"latitude": place.get("latitude"), "longitude": place.get("longitude"),
                                  "current": CURRENT, "daily": DAILY, "timezone": "UTC", "temperature_unit": unit}
        if start or end:
            params["start_date"] = start or end
            params["end_date"] = end or start
        data = await self.forecast.get(params)
        if not isinstance(data, dict):
            raise ToolError("openmeteo: the forecast is not a JSON object")
        location = {key: place.get(key) for key in ("name", "admin1", "country", "latitude", "longitude", "timezone")}
        return {"location": location, **{key: data[key] for key in ("current", "current_units", "daily",
                                                                     "daily_units") if key in data}}
