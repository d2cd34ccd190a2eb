"""Live tools over public HTTP APIs, for agents of users with internet: Wikipedia search and article text (the
MediaWiki Action API) and Open-Meteo weather (geocoding and forecast).

They are off by default and turned on per solution (``-S tools=wikipedia,openmeteo`` for ``hotpotqa-agent`` and
``gaia-agent``). Each request has a timeout (``-S tool_timeout=SECONDS``), goes through the run's rate limits (its
own endpoint: ``--max-rpm wikipedia=30``, ``--max-rpm openmeteo=60``) and the run's response cache (``--cache``),
and its API's address can be replaced (``-S wikipedia_url=``, ``-S openmeteo_url=``: another wiki, a mirror, a
test's fake). A run that uses them is reproducible only when every answer comes from the cache: live pages and
forecasts change.

May import ``runner.core`` (its limiter and cache interfaces); never the engine or storage.
"""

from runner.solutions.tools import ToolError
from runner.solutions.web.http import JSONClient
from runner.solutions.web.live import LIVE_TOOLS, LiveTools, check_timeout, parse_tools
from runner.solutions.web.openmeteo import OPENMETEO_TOOL, OpenMeteo
from runner.solutions.web.wikipedia import WIKIPEDIA_PAGE_TOOL, WIKIPEDIA_SEARCH_TOOL, Wikipedia

__all__ = ["LIVE_TOOLS", "OPENMETEO_TOOL", "WIKIPEDIA_PAGE_TOOL", "WIKIPEDIA_SEARCH_TOOL", "JSONClient", "LiveTools",
           "OpenMeteo", "ToolError", "Wikipedia", "check_timeout", "parse_tools"]
