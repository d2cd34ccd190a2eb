"""The live tools an agent turns on with ``-S tools=``: their names, their checks, and :class:`LiveTools`, which
runs a call on the one that has it."""

from __future__ import annotations

from typing import Any

from runner.core.errors import ConfigError
from runner.solutions.tools import ToolError
from runner.solutions.web.http import DEFAULT_TIMEOUT_S
from runner.solutions.web.openmeteo import OPENMETEO_TOOL, OpenMeteo
from runner.solutions.web.wikipedia import WIKIPEDIA_PAGE_TOOL, WIKIPEDIA_SEARCH_TOOL, WIKIPEDIA_URL, Wikipedia


LIVE_TOOLS = ("wikipedia", "openmeteo")
"""The names ``-S tools=`` takes: ``wikipedia`` (``wikipedia_search`` and ``wikipedia_page``), ``openmeteo``."""


def parse_tools(tools: Any) -> tuple[str, ...]:
    """The live tools named by ``tools``: a comma-separated string or a list (``None`` or empty: none).

    Raises:
        ConfigError: a name that is not in :data:`LIVE_TOOLS`.
    """
    if tools is None or tools == "" or tools == []:
        return ()
    names = tools.split(",") if isinstance(tools, str) else list(tools) if isinstance(tools, (list, tuple)) else None
    if names is None:
        raise ConfigError(f"tools must be a comma-separated list of {', '.join(LIVE_TOOLS)}, got {tools!r}")
    chosen = []
    for raw in names:
        name = str(raw).strip().lower()
        if name not in LIVE_TOOLS:
            raise ConfigError(f"unknown live tool {raw!r}; use any of: {', '.join(LIVE_TOOLS)} (e.g. -S "
                              "tools=wikipedia,openmeteo)")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def check_timeout(timeout: Any) -> None:
    """Refuse a ``tool_timeout`` that is not a positive number of seconds.

    Raises:
        ConfigError: the value and the fix.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigError(f"tool_timeout must be a positive number of seconds, got {timeout!r}")


class LiveTools:
    """The live tools a solution turned on: their definitions for the model, and how to run a call.

    Args:
        enabled: names from :data:`LIVE_TOOLS` (see :func:`parse_tools`).
        timeout: seconds per HTTP request.
        wikipedia_url: the MediaWiki Action API's URL.
        openmeteo_url: one root for Open-Meteo's geocoding and forecast APIs (``None``: the public hosts).

    Raises:
        ConfigError: an unknown tool name or a bad timeout.
    """

    def __init__(self, enabled: Any = (), timeout: float = DEFAULT_TIMEOUT_S, wikipedia_url: str = WIKIPEDIA_URL,
                 openmeteo_url: str | None = None) -> None:
        self.enabled = parse_tools(enabled)
        check_timeout(timeout)
        self.wikipedia = Wikipedia(wikipedia_url, timeout) if "wikipedia" in self.enabled else None
        self.openmeteo = OpenMeteo(openmeteo_url, timeout) if "openmeteo" in self.enabled else None

    @property
    def definitions(self) -> list[dict[str, Any]]:
        """The tools' definitions (the short form :mod:`runner.models` accepts), in a fixed order."""
        tools: list[dict[str, Any]] = []
        if self.wikipedia is not None:
            tools += [WIKIPEDIA_SEARCH_TOOL, WIKIPEDIA_PAGE_TOOL]
        if self.openmeteo is not None:
            tools.append(OPENMETEO_TOOL)
        return tools

    @property
    def names(self) -> list[str]:
        """The tool names the model may call."""
        return [tool["name"] for tool in self.definitions]

    def __bool__(self) -> bool:
        return bool(self.enabled)

    async def run(self, name: str, arguments: dict[str, Any]) -> Any:
        """The result of the call ``name(arguments)``.

        Raises:
            ToolError: a tool that is not on, bad arguments, or an API that gave no usable answer.
        """
        if self.wikipedia is not None and name == WIKIPEDIA_SEARCH_TOOL["name"]:
            return await self.wikipedia.search(arguments)
        if self.wikipedia is not None and name == WIKIPEDIA_PAGE_TOOL["name"]:
            return await self.wikipedia.page(arguments)
        if self.openmeteo is not None and name == OPENMETEO_TOOL["name"]:
            return await self.openmeteo(arguments)
        raise ToolError(f"there is no tool {name!r}")
