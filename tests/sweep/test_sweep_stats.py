import pytest

from trainspeed.stats import median
from trainspeed.sweep.stats import bootstrap_ci, knee, line_fit, overlap


def test_median_and_bootstrap_interval_contain_the_median():
    values = [1.0, 1.1, 0.9, 1.05, 0.95, 3.0]
    low, high = bootstrap_ci(values)
    assert low <= median(values) <= high
    assert high < 3.0  # one outlier does not drag the median's interval out to it


def test_bootstrap_is_reproducible_and_narrows_with_agreeing_trials():
    assert bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0]) == bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    wide = bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    narrow = bootstrap_ci([2.9, 3.0, 3.0, 3.1, 3.0])
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


def test_single_value_interval_is_the_value():
    assert bootstrap_ci([2.5]) == (2.5, 2.5)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_overlap():
    assert overlap((1, 2), (2, 3))
    assert overlap((1, 4), (2, 3))
    assert not overlap((1, 2), (2.1, 3))


def test_line_fit_recovers_a_line_and_reports_r2():
    fit = line_fit([0, 10, 20, 40], [1.0, 1.5, 2.0, 3.0])
    assert fit.a == pytest.approx(1.0)
    assert fit.b == pytest.approx(0.05)
    assert fit.r2 == pytest.approx(1.0)
    curved = line_fit([0, 1, 2, 3, 4], [0, 1, 4, 9, 16])
    assert curved.r2 < 0.99
    with pytest.raises(ValueError):
        line_fit([1, 1], [1, 2])


def test_knee_is_the_first_point_within_ten_percent_of_the_best():
    assert knee([10, 50, 91, 100, 99]) == 2
    assert knee([100, 50]) == 0
    assert knee([]) is None
