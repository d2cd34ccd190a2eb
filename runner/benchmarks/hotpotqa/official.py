"""HotpotQA's official metrics, reproduced exactly.

Source: ``hotpot_evaluate_v1.py`` in github.com/hotpotqa/hotpot (commit 4c0fa5ea6541391ab86170c2f9c57eb87776ad16),
the scorer of Yang et al., "HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question Answering", EMNLP 2018.
Every rule below is the script's, quirks included:

- answer normalisation: lowercase; delete ASCII punctuation (``string.punctuation``); replace the words
  ``a``/``an``/``the`` with a space; collapse whitespace;
- EM: normalised strings equal;
- token F1, precision, recall over normalised whitespace tokens (multiset overlap); if either the prediction or the
  gold answer normalises to ``yes``, ``no`` or ``noanswer`` and the two differ, all three are 0;
- supporting facts: sets of ``(title, sentence id)`` (duplicates collapse); precision, recall and F1 from true and
  false positives; EM is 1 when there is no false positive and no false negative;
- joint precision = answer precision × SP precision, joint recall likewise, joint F1 their harmonic mean, joint EM
  the product of the EMs; a record with no answer or no supporting facts scores 0 on the joint metrics;
- corpus scores are averages over all gold records, a missing prediction counting 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """The official answer normalisation (lower, drop punctuation, articles to spaces, collapse whitespace)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


@dataclass(frozen=True)
class PRF:
    """Precision, recall and F1 (all in [0, 1])."""

    precision: float
    recall: float
    f1: float


ZERO = PRF(0.0, 0.0, 0.0)


def answer_prf(prediction: str, gold: str) -> PRF:
    """Token precision, recall and F1 with the yes/no/noanswer rule."""
    pred, truth = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or truth in _SPECIAL) and pred != truth:
        return ZERO
    pred_tokens, truth_tokens = pred.split(), truth.split()
    same = sum((Counter(pred_tokens) & Counter(truth_tokens)).values())
    if same == 0:
        return ZERO
    precision = same / len(pred_tokens)
    recall = same / len(truth_tokens)
    return PRF(precision, recall, 2 * precision * recall / (precision + recall))


def supporting_fact_scores(prediction: Iterable[Sequence], gold: Iterable[Sequence]) -> tuple[float, PRF]:
    """SP EM and precision/recall/F1 over sets of ``(title, sentence id)`` pairs."""
    predicted = {tuple(fact) for fact in prediction}
    truth = {tuple(fact) for fact in gold}
    tp = len(predicted & truth)
    fp = len(predicted - truth)
    fn = len(truth - predicted)
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return (1.0 if fp + fn == 0 else 0.0), PRF(precision, recall, f1)


@dataclass(frozen=True)
class OfficialScores:
    """The twelve per-record numbers ``hotpot_evaluate_v1.py`` sums (named as its ``metrics`` keys)."""

    em: float
    f1: float
    prec: float
    recall: float
    sp_em: float
    sp_f1: float
    sp_prec: float
    sp_recall: float
    joint_em: float
    joint_f1: float
    joint_prec: float
    joint_recall: float


def score_record(
    answer: str | None,
    supporting_facts: Iterable[Sequence] | None,
    gold_answer: str,
    gold_facts: Iterable[Sequence] | None,
) -> OfficialScores:
    """All official scores of one record; ``None`` for a missing answer or missing supporting facts.

    With ``gold_facts`` of ``None`` (a dataset without supporting facts), the SP and joint scores are 0.
    """
    em = prf = None
    if answer is not None:
        em, prf = exact_match(answer, gold_answer), answer_prf(answer, gold_answer)
    sp_em = sp = None
    if supporting_facts is not None and gold_facts is not None:
        sp_em, sp = supporting_fact_scores(supporting_facts, gold_facts)
    joint = (0.0, 0.0, 0.0, 0.0)
    if prf is not None and sp is not None:
        joint_prec = prf.precision * sp.precision
        joint_recall = prf.recall * sp.recall
        joint_f1 = 2 * joint_prec * joint_recall / (joint_prec + joint_recall) if joint_prec + joint_recall > 0 else 0.0
        joint = (em * sp_em, joint_f1, joint_prec, joint_recall)  # type: ignore[operator]
    prf = prf or ZERO
    sp = sp or ZERO
    return OfficialScores(
        em=em or 0.0, f1=prf.f1, prec=prf.precision, recall=prf.recall,
        sp_em=sp_em or 0.0, sp_f1=sp.f1, sp_prec=sp.precision, sp_recall=sp.recall,
        joint_em=joint[0], joint_f1=joint[1], joint_prec=joint[2], joint_recall=joint[3],
    )
