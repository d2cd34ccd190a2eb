"""BFCL v4's test categories: which run here, which are refused and why, their groups, languages and kinds.

Names and groups are the package's own (``bfcl_eval/constants/category_mapping.py``, ``NON_LIVE_CATEGORY``,
``LIVE_CATEGORY``, ``MULTI_TURN_CATEGORY``, ``TEST_COLLECTION_MAPPING``; ``bfcl-eval`` 2026.3.23), as are the
predicates on a category name (``bfcl_eval/utils.py``: ``is_java``, ``is_js``, ``is_multi_turn``,
``is_relevance_or_irrelevance``).
"""

from __future__ import annotations

from typing import Any

from runner.core.errors import BenchmarkError

NON_LIVE = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
            "irrelevance")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
CATEGORIES = NON_LIVE + LIVE + MULTI_TURN
"""The 17 categories that run offline, in the leaderboard's order."""

GROUPS: dict[str, tuple[str, ...]] = {
    "all": CATEGORIES,
    "all_scoring": CATEGORIES,
    "single_turn": NON_LIVE + LIVE,
    "non_live": NON_LIVE,
    "live": LIVE,
    "multi_turn": MULTI_TURN,
    "python": ("simple_python", "irrelevance", "parallel", "multiple", "parallel_multiple", "live_simple",
               "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance"),
    "non_python": ("simple_java", "simple_javascript"),
}
"""The package's collections, restricted to what runs here (``all`` and ``all_scoring`` also name the agentic
categories in the package; here they mean the 17 offline ones)."""

_WEB = ("needs the internet: its agent searches the web through SerpAPI and fetches pages, so its answers are not "
        "reproducible offline")
_MEMORY = ("needs its own memory store, built by running the prerequisite conversations first (memory_vector also "
           "downloads a sentence-transformers model and builds a FAISS index)")
REFUSED: dict[str, str] = {
    "web_search": _WEB, "web_search_base": _WEB, "web_search_no_snippet": _WEB,
    "memory": _MEMORY, "memory_kv": _MEMORY, "memory_vector": _MEMORY, "memory_rec_sum": _MEMORY,
    "agentic": f"(web search and memory) {_WEB}; memory {_MEMORY}",
    "format_sensitivity": ("is BFCL's non-scoring study of 26 prompt formats (JSON and XML outputs among them), "
                           "outside the leaderboard score; it is not ported"),
    "multi_turn_composite": "is not part of BFCL v4's leaderboard (the package keeps it under unused_datasets/)",
}
"""Categories (and groups) the benchmark refuses, with the reason."""


def parse_categories(categories: Any) -> tuple[str, ...]:
    """Categories from a list or a comma-separated string (group names allowed), in the leaderboard's order;
    ``None`` or empty means all 17.

    Raises:
        BenchmarkError: a category that needs the internet or a store of its own (the message says which and why),
            or an unknown name (the message lists the valid ones).
    """
    if categories is None or categories == "" or categories == []:
        return CATEGORIES
    names = categories.split(",") if isinstance(categories, str) else list(categories)
    chosen: set[str] = set()
    for raw in names:
        name = str(raw).strip()
        if name in REFUSED:
            raise BenchmarkError(f"BFCL category {name!r} does not run here: it {REFUSED[name]}; choose among "
                                 f"the offline ones: {', '.join(CATEGORIES)}")
        if name in GROUPS:
            chosen.update(GROUPS[name])
        elif name in CATEGORIES:
            chosen.add(name)
        else:
            raise BenchmarkError(f"unknown BFCL category {name!r}; use any of: {', '.join(CATEGORIES)} "
                                 f"(or a group: {', '.join(GROUPS)})")
    return tuple(c for c in CATEGORIES if c in chosen)


def category_of(task_id: str) -> str:
    """The category of a BFCL id (``live_multiple_46-18-1`` -> ``live_multiple``): the package's
    ``extract_test_category_from_id``."""
    return task_id.split(":")[0].rsplit("_", 1)[0]


def is_java(category: str) -> bool:
    """Java items (the package's ``is_java``)."""
    return "java" in category and not is_javascript(category)


def is_javascript(category: str) -> bool:
    """JavaScript items (the package's ``is_js``)."""
    return "javascript" in category


def is_multi_turn(category: str) -> bool:
    """Multi-turn items (the package's ``is_multi_turn``)."""
    return "multi_turn" in category


def is_relevance(category: str) -> bool:
    """Relevance or irrelevance items, scored by whether the output decodes to a call (the package's
    ``is_relevance_or_irrelevance``)."""
    return "relevance" in category or "irrelevance" in category


def language_of(category: str) -> str:
    """``java``, ``javascript`` or ``python``: how the category's prompting-mode output is decoded and typed."""
    if is_java(category):
        return "java"
    if is_javascript(category):
        return "javascript"
    return "python"


def kind_of(category: str) -> str:
    """``multi_turn``, ``relevance`` (relevance and irrelevance) or ``ast``."""
    if is_multi_turn(category):
        return "multi_turn"
    if is_relevance(category):
        return "relevance"
    return "ast"
