"""Live statistics: running means and intervals equal the batch computation, categories, the headline's choice."""

import math
import statistics

import pytest

from runner.core.metric import Z_95
from runner.engine.live import LiveStats, Running, usable_scores


def test_running_mean_and_interval_equal_the_batch_computation():
    values = [0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    running = Running()
    for value in values:
        running.add(value)
    stderr = statistics.stdev(values) / math.sqrt(len(values))
    assert running.mean == pytest.approx(statistics.fmean(values))
    assert running.stderr == pytest.approx(stderr)
    low, high = running.interval()
    assert (low, high) == (pytest.approx(running.mean - Z_95 * stderr), pytest.approx(running.mean + Z_95 * stderr))
    single = Running()
    single.add(1.0)
    assert single.stderr is None and single.interval() is None


def test_categories_and_the_headline_metric():
    live = LiveStats(headline=("joint_f1", "f1"))
    assert live.line() == "" and live.headline_metric() is None
    live.add({"em": 1.0, "f1": 1.0}, "bridge")
    live.add({"em": 0.0, "f1": 0.5}, "comparison")
    live.add({"em": 1.0, "f1": 0.75}, "bridge")
    assert live.headline_metric() == "f1"            # no joint_f1 values: the next preference
    snapshot = live.snapshot()
    assert snapshot["by_category"] == {"bridge": {"em": {"mean": 1.0, "n": 2}, "f1": {"mean": 0.875, "n": 2}},
                                       "comparison": {"em": {"mean": 0.0, "n": 1}, "f1": {"mean": 0.5, "n": 1}}}
    assert snapshot["metrics"]["f1"]["n"] == 3 and snapshot["metrics"]["f1"]["mean"] == pytest.approx(0.75)
    low, high = snapshot["metrics"]["f1"]["ci95"]
    assert live.line() == f"f1 0.750 [{low:.3f}, {high:.3f}]"
    assert LiveStats().headline_metric() is None
    first_seen = LiveStats()
    first_seen.add({"b": 1.0, "a": 0.0})
    assert first_seen.headline_metric() == "b"


def test_only_values_a_mean_can_use_are_kept():
    scores = usable_scores([("ok", 0.5), ("flag", True), ("nan", math.nan), ("inf", math.inf), ("label", "long"),
                            ("none", None), ("int", 2)])
    assert scores == {"ok": 0.5, "flag": 1.0, "int": 2.0}


def test_the_interval_of_a_0_1_metric_stays_within_0_and_1():
    """1 right answer in 7: the normal interval, 0.143 ± 0.280, would start at -0.137; a mean of 0/1 values cannot."""
    running = Running()
    for value in [1.0] + [0.0] * 6:
        running.add(value)
    low, high = running.interval()
    assert low == 0.0 and high == pytest.approx(1 / 7 + Z_95 * running.stderr) and high < 1
    live = LiveStats()
    for value in [1.0] * 6 + [0.0]:
        live.add({"accuracy": value})
    assert live.line() == "accuracy 0.857 [0.577, 1.000]"
