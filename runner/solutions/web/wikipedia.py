"""Live Wikipedia: search and article text through the MediaWiki Action API (``api.php``).

- ``wikipedia_search``: ``action=query&list=search`` (https://www.mediawiki.org/wiki/API:Search): titles and
  snippets of the best matches;
- ``wikipedia_page``: ``action=query&prop=extracts`` of the TextExtracts extension
  (https://www.mediawiki.org/wiki/Extension:TextExtracts#API) as plain text (``explaintext``), the introduction
  (``exintro``) or the whole article, redirects followed.

Both ask for ``formatversion=2`` answers (``query.search`` and ``query.pages`` are lists). The page tool is named
like BeeAI's ``WikipediaTool`` inputs (``full_text`` for the whole text rather than the summary).
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

from runner.solutions.tools import ToolError
from runner.solutions.web.http import DEFAULT_TIMEOUT_S, JSONClient

WIKIPEDIA_URL = "https://en.wikipedia.org/w/api.php"
"""English Wikipedia's Action API (``-S wikipedia_url=`` points the tools at another wiki or a fake)."""
MAX_CHARS = 12_000
"""Characters of article text one ``wikipedia_page`` call returns (``offset`` pages through the rest)."""
SEARCH_LIMIT = 5

WIKIPEDIA_SEARCH_TOOL = {
    "name": "wikipedia_search",
    "description": ("Search Wikipedia (live, over the internet). Returns the titles of the best-matching articles "
                    "with a snippet each; read one with wikipedia_page."),
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to search for, e.g. 'Ed Wood film director'"}},
        "required": ["query"],
    },
}

WIKIPEDIA_PAGE_TOOL = {
    "name": "wikipedia_page",
    "description": ("Read a Wikipedia article by its title (live, over the internet): its introduction, or its whole "
                    "text with full_text=true, in pages of at most 12000 characters (pass offset to read on)."),
    "parameters": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "the article's title, e.g. 'Ed Wood'"},
            "full_text": {"type": "boolean", "description": "the whole article instead of its introduction"},
            "offset": {"type": "integer", "description": "the character to start from (default 0)"},
        },
        "required": ["title"],
    },
}

_TAG = re.compile(r"<[^>]+>")


def _mediawiki_error(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "the answer is not a JSON object"
    error = data.get("error")
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('info', '')}".strip()
    if not isinstance(data.get("query"), dict):
        return "the answer has no query result"
    return None


def _snippet(text: str) -> str:
    """A search snippet as plain text (MediaWiki marks matches with ``<span class="searchmatch">``)."""
    return html.unescape(_TAG.sub("", text))


class Wikipedia:
    """The two Wikipedia tools over one wiki's Action API.

    Args:
        url: the API's URL (``.../w/api.php``).
        timeout: seconds per request.
    """

    def __init__(self, url: str = WIKIPEDIA_URL, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.client = JSONClient("wikipedia", url, timeout)

    def article_url(self, title: str) -> str:
        """The article's web address on the same wiki (``.../wiki/<Title_with_underscores>``)."""
        root = self.client.url.rsplit("/w/api.php", 1)[0] if "/w/api.php" in self.client.url \
            else self.client.url.rsplit("/", 1)[0]
        return f"{root}/wiki/{quote(title.replace(' ', '_'))}"

    async def search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{"query", "total_hits", "results": [{"title", "snippet"}]}``.

        Raises:
            ToolError: no query string, or the API failed.
        """
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("wikipedia_search needs a non-empty string 'query'")
        data = await self.client.get({"action": "query", "list": "search", "srsearch": query.strip(),
                                      "srlimit": SEARCH_LIMIT, "srprop": "snippet", "format": "json",
                                      "formatversion": 2}, check=_mediawiki_error)
        found = data["query"].get("search") or []
        return {
            "query": query.strip(),
            "total_hits": (data["query"].get("searchinfo") or {}).get("totalhits"),
            "results": [{"title": hit.get("title"), "snippet": _snippet(hit.get("snippet") or "")} for hit in found],
        }

    async def page(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{"title", "url", "text", "offset", "total_chars", "next_offset"}`` of the article (``next_offset`` is
        ``None`` at the end), or ``{"error", "titles"}`` with search suggestions when there is no such article.

        Raises:
            ToolError: bad arguments, or the API failed.
        """
        title = arguments.get("title")
        if not isinstance(title, str) or not title.strip():
            raise ToolError("wikipedia_page needs a non-empty string 'title'")
        full_text = arguments.get("full_text", False)
        offset = arguments.get("offset", 0)
        if not isinstance(full_text, bool):
            raise ToolError("wikipedia_page: full_text must be true or false")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ToolError("wikipedia_page: offset must be a whole number of at least 0")
        params: dict[str, Any] = {"action": "query", "prop": "extracts", "titles": title.strip(),
                                  "explaintext": 1, "redirects": 1, "format": "json", "formatversion": 2}
        if not full_text:
            params["exintro"] = 1
        data = await self.client.get(params, check=_mediawiki_error)
        pages = data["query"].get("pages") or []
        page = pages[0] if pages else {"missing": True}
        if page.get("missing") or page.get("invalid") or page.get("extract") is None:
            suggestions = await self.search({"query": title})
            return {"error": f"no Wikipedia article titled {title.strip()!r}",
                    "titles": [hit["title"] for hit in suggestions["results"]]}
        text = page["extract"]
        end = offset + MAX_CHARS
        return {
            "title": page.get("title", title),
            "url": self.article_url(page.get("title", title)),
            "text": text[offset:end],
            "offset": offset,
            "total_chars": len(text),
            "next_offset": end if end < len(text) else None,
        }
