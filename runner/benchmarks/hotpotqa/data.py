"""HotpotQA records in the three shapes users have, read from any fsspec path or URL.

- ``distractor``: the official dev/train files: ``_id, question, answer, supporting_facts [[title, sent_id]],
  context [[title, [sentences]]], type, level``.
- ``simplified``: ``question, answer, type`` (ReAct's ``hotpot_dev_v1_simplified.json``; answers only).
- ``beeai``: BeeAI's evaluation example: ``question, answer, relevant_sentences, supporting_titles, wiki_times``.

Records without an ``_id`` get their 0-based position in the file, zero-padded, as id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import fsspec

from runner.benchmarks.download import cache_dir, fetch
from runner.core.errors import BenchmarkError

Format = Literal["distractor", "simplified", "beeai"]
FORMATS: tuple[str, ...] = ("distractor", "simplified", "beeai")

# The official dev (distractor) file, as published by the HotpotQA authors; its SHA-1 and size as recorded by
# GluonNLP (dmlc/gluon-nlp, scripts/datasets/url_checksums/hotpotqa.txt).
DEV_DISTRACTOR_URL = "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json"
DEV_DISTRACTOR_SHA1 = "825b6cfc34a61db41e82bbb14d978d5a834925f8"
DEV_DISTRACTOR_BYTES = 46320117


@dataclass(frozen=True)
class HotpotRecord:
    """One question with its gold answer and, where the shape has them, supporting facts and context."""

    id: str
    question: str
    answer: str
    type: str | None = None
    level: str | None = None
    supporting_facts: list[tuple[str, int]] | None = None
    context: list[tuple[str, list[str]]] | None = None
    supporting_sentences: list[str] = field(default_factory=list)
    supporting_titles: list[str] = field(default_factory=list)

    @property
    def distinct_titles(self) -> list[str]:
        """Supporting titles without repeats, in first-seen order."""
        return list(dict.fromkeys(self.supporting_titles))

    @property
    def lookup_context(self) -> list[tuple[str, list[str]]]:
        """The paragraphs a context-lookup tool serves: the record's own context (official shape); for a BeeAI
        record, which has none, its supporting sentences grouped by title (``relevant_sentences`` and
        ``supporting_titles`` are parallel lists there); else none (the simplified shape)."""
        if self.context is not None:
            return self.context
        grouped: dict[str, list[str]] = {}
        for title, sentence in zip(self.supporting_titles, self.supporting_sentences):
            grouped.setdefault(title, []).append(sentence)
        return list(grouped.items())


def detect_format(first: dict[str, Any]) -> Format:
    """The shape of a file from the keys of its first record.

    Raises:
        BenchmarkError: the keys match no known shape.
    """
    keys = set(first)
    if {"_id", "question", "answer", "supporting_facts", "context"} <= keys:
        return "distractor"
    if {"question", "answer", "relevant_sentences", "supporting_titles"} <= keys:
        return "beeai"
    if {"question", "answer"} <= keys:
        return "simplified"
    raise BenchmarkError(
        f"unrecognised HotpotQA record with keys {sorted(keys)}; pass format= one of {', '.join(FORMATS)}"
    )


def _record(index: int, raw: dict[str, Any], shape: Format) -> HotpotRecord:
    default_id = f"{index:05d}"
    if shape == "distractor":
        context = [(title, list(sentences)) for title, sentences in raw["context"]]
        facts = [(title, int(sent_id)) for title, sent_id in raw["supporting_facts"]]
        lookup = dict(context)
        sentences = [
            lookup[title][sent_id] for title, sent_id in facts if title in lookup and sent_id < len(lookup[title])
        ]
        return HotpotRecord(
            id=str(raw.get("_id", default_id)), question=raw["question"], answer=raw["answer"],
            type=raw.get("type"), level=raw.get("level"), supporting_facts=facts, context=context,
            supporting_sentences=sentences, supporting_titles=[title for title, _ in facts],
        )
    if shape == "beeai":
        return HotpotRecord(
            id=str(raw.get("_id", default_id)), question=raw["question"], answer=raw["answer"],
            type=raw.get("type"), level=raw.get("level"),
            supporting_sentences=list(raw.get("relevant_sentences") or []),
            supporting_titles=list(raw.get("supporting_titles") or []),
        )
    return HotpotRecord(id=str(raw.get("_id", default_id)), question=raw["question"], answer=raw["answer"],
                        type=raw.get("type"), level=raw.get("level"))


def load_records(path: str | None, shape: Format | None = None) -> list[HotpotRecord]:
    """Read every record of the HotpotQA file at ``path`` (any fsspec URL); ``None`` downloads the official dev
    distractor file once (checked against its pinned SHA-1 and size) into ``$RUNNER_CACHE_DIR/hotpotqa``.

    Raises:
        BenchmarkError: the file is missing, unreadable, not a JSON list, of an unknown shape, or lacks a field.
    """
    if path is None:
        path = str(fetch(DEV_DISTRACTOR_URL, cache_dir("hotpotqa") / "hotpot_dev_distractor_v1.json",
                         algorithm="sha1", digest=DEV_DISTRACTOR_SHA1, size=DEV_DISTRACTOR_BYTES))
    try:
        with fsspec.open(path, "rb") as handle:
            raw = json.load(handle)
    except FileNotFoundError:
        raise BenchmarkError(f"HotpotQA file {path!r} not found; check --data-dir (a .json file)") from None
    except (OSError, ValueError) as exc:
        raise BenchmarkError(f"cannot read HotpotQA file {path!r} ({type(exc).__name__}: {exc}); pass a JSON file "
                             "in one of the official, simplified or BeeAI shapes") from None
    if not isinstance(raw, list) or not raw or not all(isinstance(r, dict) for r in raw):
        raise BenchmarkError(f"HotpotQA file {path!r} must hold a non-empty JSON list of records")
    if shape is not None and shape not in FORMATS:
        raise BenchmarkError(f"unknown HotpotQA format {shape!r}; use one of {', '.join(FORMATS)}")
    shape = shape or detect_format(raw[0])
    records = []
    for index, item in enumerate(raw):
        try:
            records.append(_record(index, item, shape))
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchmarkError(f"HotpotQA file {path!r}, record {index}: missing or malformed {exc} for the "
                                 f"{shape!r} format") from None
    return records
