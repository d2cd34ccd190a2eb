"""Confidence intervals and tests for the means of runs and the paired differences between them (scipy.stats).

Every interval is clustered by task: the items of one task (its repeats) are resampled together, because they are
not independent (E. Miller, "Adding Error Bars to Evals", arXiv:2411.00640, 2024, section 2). An interval comes from
:func:`scipy.stats.bootstrap` over the tasks, paired across a task's sum and item count, of the ratio
``sum of sums / sum of counts``: the mean over items, which is the mean of the per-task means when every task has the
same number of items. The percentile method (B. Efron and R. Tibshirani, "An Introduction to the Bootstrap", 1993,
chapter 13) is used: it needs no jackknife (BCa's costs n² for n tasks) and never leaves the range of the data.

Tests of a difference between two runs on the same items:

- 0/1 metrics: the exact McNemar test, a two-sided binomial test (:func:`scipy.stats.binomtest`, p = 1/2) of the
  items right in one run only against all discordant items (Q. McNemar, Psychometrika 12, 1947; the exact form in
  A. Agresti, "Categorical Data Analysis", 3rd ed., section 11.1). It counts items, as McNemar's test does.
- other metrics: the Wilcoxon signed-rank test (:func:`scipy.stats.wilcoxon`, zero differences dropped) of the
  per-task mean differences, one value per task, so repeats do not count as independent evidence.

scipy and numpy are imported when a function runs, so importing :mod:`runner.report` stays light.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

CONFIDENCE = 0.95
N_RESAMPLES = 2000
_BATCH_CELLS = 4_000_000  # resampled values per bootstrap batch (numbers), so memory stays near 100 MB at most


def cluster_mean_ci(
    sums: Sequence[float], counts: Sequence[int], seed: int, n_resamples: int = N_RESAMPLES,
) -> tuple[float, float] | None:
    """The 95 % percentile-bootstrap interval of ``sum(sums) / sum(counts)``, resampling tasks.

    Args:
        sums: per task, the sum of its items' values (or of their differences between two runs).
        counts: per task, its number of items (same order as ``sums``).
        seed: seeds :func:`numpy.random.default_rng`, so the same inputs give the same interval.
        n_resamples: bootstrap resamples.

    Returns:
        ``(low, high)``; ``(m, m)`` when every task has the same mean ``m``; ``None`` under 2 tasks.
    """
    if len(sums) < 2:
        return None
    means = [s / c for s, c in zip(sums, counts)]
    if max(means) - min(means) <= 1e-12 * max(1.0, abs(means[0])):
        return means[0], means[0]
    import numpy as np
    from scipy import stats

    def ratio(total: Any, items: Any, axis: int = -1) -> Any:
        return total.sum(axis=axis) / items.sum(axis=axis)

    result = stats.bootstrap(
        (np.asarray(sums, dtype=float), np.asarray(counts, dtype=float)), ratio, paired=True, vectorized=True,
        n_resamples=n_resamples, batch=max(1, _BATCH_CELLS // len(sums)), confidence_level=CONFIDENCE,
        method="percentile", rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mcnemar_exact(baseline: Sequence[float], other: Sequence[float]) -> tuple[float, int, int]:
    """Exact McNemar p-value of two runs' 0/1 values on the same items.

    Returns:
        ``(p_value, only_baseline, only_other)``: the p-value (1.0 without discordant items) and the counts of items
        right in the baseline only and in the other run only.
    """
    only_baseline = sum(1 for a, b in zip(baseline, other) if a == 1 and b == 0)
    only_other = sum(1 for a, b in zip(baseline, other) if a == 0 and b == 1)
    if only_baseline + only_other == 0:
        return 1.0, 0, 0
    from scipy import stats

    p_value = stats.binomtest(only_other, only_baseline + only_other, 0.5).pvalue
    return float(p_value), only_baseline, only_other


def wilcoxon_p(task_differences: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of per-task mean differences; 1.0 when all are 0, ``None`` for none."""
    if not task_differences:
        return None
    if all(abs(d) <= 1e-12 for d in task_differences):
        return 1.0
    from scipy import stats

    # rounded, so that differences equal in exact arithmetic share a rank (scipy's advice for paired data)
    rounded = [round(d, 12) for d in task_differences]
    p_value = float(stats.wilcoxon(rounded, zero_method="wilcox").pvalue)
    return p_value if not math.isnan(p_value) else None
