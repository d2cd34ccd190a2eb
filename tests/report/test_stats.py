import math

import pytest

from runner.report import stats


def test_pass_at_k_matches_the_closed_form():
    # n=5 tries, c=2 successes: pass@1 = 2/5, pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10.
    assert stats.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert stats.pass_at_k(5, 4, 2) == 1.0
    assert stats.pass_at_k(5, 0, 5) == 0.0
    with pytest.raises(ValueError):
        stats.pass_at_k(2, 1, 3)


def test_pass_hat_k_is_all_k_tries_succeeding():
    assert stats.pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert stats.pass_hat_k(4, 4, 3) == 1.0


def test_stderr_and_clustered_stderr():
    assert stats.stderr([1.0]) is None
    assert stats.stderr([0.0, 1.0, 1.0, 0.0]) == pytest.approx(math.sqrt(1 / 3 / 4))
    # two tasks, their means 1.0 and 0.0 -> stderr over the two means
    assert stats.clustered_stderr([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]) == pytest.approx(0.5)


def test_k_values():
    assert stats.k_values(1) == [1]
    assert stats.k_values(5) == [1, 2, 4, 5]
    assert stats.k_values(8) == [1, 2, 4, 8]


def test_percentiles_match_numpy_linear_interpolation():
    import numpy

    values = [0.3, 5.0, 1.2, 9.9, 2.2, 2.2, 7.5]
    assert stats.percentiles(values, [0, 50, 90, 99, 100]) == pytest.approx(
        list(numpy.percentile(values, [0, 50, 90, 99, 100])))
    assert stats.percentiles([4.0], [50, 99]) == [4.0, 4.0]
    assert stats.percentiles([], [50]) is None
    with pytest.raises(ValueError):
        stats.percentiles(values, [101])
