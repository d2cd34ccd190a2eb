"""ACEBench's headline: per-category accuracy, the Normal, Special and Agent means, and the weighted Overall.

Source: the authors' ``model_eval/evaluation_helper.py`` (``generate_result_csv``, ``calculate_unweighted_accuracy``,
``multiplt_turn_accuracy``) and ``eval_main.py`` (fork zeppombal/ACEBench at bcd5f62 and 8118378):

- a normal category's accuracy is the share of right answers rounded to 3 places; a multi-turn category counts
  dialogues, right only when every turn is right (:func:`dialogue_accuracy`);
- a special category's accuracy is not rounded; an agent category's end-to-end and process accuracies are rounded;
- Normal, Special and Agent are the unweighted means of their categories (12, 3 and 2), rounded to 3 places;
- Overall = 0.578 Normal + 0.2676 Special + 0.1545 Agent (weights proportional to the square roots of the
  700, 150 and 50 items of each group), rounded to 3 places.

A (task, repeat) without a result (an error record) counts as wrong, as a missing answer does for the authors.
Group means are given only for groups whose categories all ran, Overall only when all 17 did.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from runner.benchmarks.acebench.answer_checks import is_multi_turn
from runner.benchmarks.acebench.files import AGENT_CATEGORIES, NORMAL_CATEGORIES, SPECIAL_CATEGORIES
from runner.benchmarks.acebench.metrics import ACCURACY, PROCESS_ACCURACY
from runner.core.results import Headline, ResultRow

WEIGHTS = {"Normal": 0.578, "Special": 0.2676, "Agent": 0.1545}
GROUPS = {"Normal": NORMAL_CATEGORIES, "Special": SPECIAL_CATEGORIES, "Agent": AGENT_CATEGORIES}


def _value(row: ResultRow, metric: str) -> float:
    value = row.scores.get(metric)
    return float(value) if isinstance(value, (int, float)) else 0.0


def dialogue_accuracy(rows: list[ResultRow]) -> tuple[float, int]:
    """The share of (dialogue, repeat) pairs whose turns are all right, and the number of such pairs."""
    dialogues: dict[tuple[str, int], bool] = defaultdict(lambda: True)
    for row in rows:
        key = (row.tags.get("dialogue", row.task_id), row.repeat)
        dialogues[key] = dialogues[key] and _value(row, ACCURACY) == 1.0
    return (sum(dialogues.values()) / len(dialogues) if dialogues else 0.0), len(dialogues)


def score_rows(rows: list[ResultRow]) -> Headline:
    """The :class:`Headline` of a run's rows (``tags["category"]`` names the category)."""
    by_tag: dict[str, list[ResultRow]] = defaultdict(list)
    for row in rows:
        by_tag[row.tags.get("category", "")].append(row)
    accuracies: dict[str, float] = {}
    by_category: dict[str, dict[str, dict[str, Any]]] = {}
    for category, members in by_tag.items():
        if category in SPECIAL_CATEGORIES:
            accuracy = sum(_value(r, ACCURACY) for r in members) / len(members)
            by_category[category] = {ACCURACY: {"mean": accuracy, "n": len(members)}}
        elif is_multi_turn(category):
            raw, n_dialogues = dialogue_accuracy(members)
            accuracy = round(raw, 3)
            by_category[category] = {ACCURACY: {"mean": accuracy, "n": n_dialogues, "unit": "dialogue",
                                                "n_turns": len(members)}}
        elif category in NORMAL_CATEGORIES or category in AGENT_CATEGORIES:
            accuracy = round(sum(_value(r, ACCURACY) for r in members) / len(members), 3)
            by_category[category] = {ACCURACY: {"mean": accuracy, "n": len(members)}}
            if category in AGENT_CATEGORIES:
                process = round(sum(_value(r, PROCESS_ACCURACY) for r in members) / len(members), 3)
                by_category[category][PROCESS_ACCURACY] = {"mean": process, "n": len(members)}
        else:
            continue
        accuracies[category] = accuracy
    components: dict[str, float] = {}
    for group, categories in GROUPS.items():
        if all(c in accuracies for c in categories):
            components[group] = round(sum(accuracies[c] for c in categories) / len(categories), 3)
    overall = None
    if len(components) == len(GROUPS):
        overall = round(sum(WEIGHTS[g] * components[g] for g in GROUPS), 3)
        components["Overall"] = overall
    return Headline(score=overall, components=components, by_category=by_category)
