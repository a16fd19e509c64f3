"""The experiment statistics against worked examples and independent reference
implementations (Chen et al.'s numpy estimator, scipy's Wilson interval,
Newcombe's method 10 built from those)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from pier.experiments import stats


def chen_pass_at_k(n: int, c: int, k: int) -> float:
    """The numerically stable estimator as published with HumanEval (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@pytest.mark.parametrize(("k", "expected"), [(1, 0.3), (5, 1 - 21 / 252), (10, 1.0)])
def test_pass_at_k_worked_examples_n10_c3(k: int, expected: float) -> None:
    # k=5: C(7,5)/C(10,5) = 21/252 of 5-draws miss all three successes.
    assert stats.pass_at_k(10, 3, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 20, 50])
def test_pass_at_k_matches_the_reference_for_every_c_and_k(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert stats.pass_at_k(n, c, k) == pytest.approx(chen_pass_at_k(n, c, k), abs=1e-9)


def test_pass_hat_k_is_the_chance_all_k_succeed() -> None:
    assert stats.pass_hat_k(10, 3, 1) == pytest.approx(0.3)
    assert stats.pass_hat_k(10, 3, 2) == pytest.approx(3 / 45)  # C(3,2)/C(10,2)
    assert stats.pass_hat_k(10, 3, 4) == 0.0
    assert stats.pass_hat_k(10, 10, 10) == 1.0
    # pass^k never exceeds pass@k, and both agree at k = 1
    for c in range(11):
        for k in range(1, 11):
            assert stats.pass_hat_k(10, c, k) <= stats.pass_at_k(10, c, k) + 1e-12


@pytest.mark.parametrize(("n", "c", "k"), [(10, 11, 1), (10, 3, 0), (10, 3, 11), (-1, 0, 1)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        stats.pass_at_k(n, c, k)


@pytest.mark.parametrize(("c", "n"), [(0, 10), (3, 10), (10, 10), (1, 1), (37, 120), (500, 1000)])
def test_wilson_matches_scipy(c: int, n: int) -> None:
    found = stats.wilson(c, n)
    assert found is not None
    reference = binomtest(c, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert found.low == pytest.approx(reference.low, abs=1e-9)
    assert found.high == pytest.approx(reference.high, abs=1e-9)
    assert found.low <= c / n <= found.high


def test_wilson_worked_example() -> None:
    found = stats.wilson(3, 10)  # the usual table value: 0.1078 to 0.6032
    assert found is not None
    assert (round(found.low, 4), round(found.high, 4)) == (0.1078, 0.6032)
    assert stats.wilson(0, 0) is None


def newcombe_reference(c1: int, n1: int, c2: int, n2: int) -> tuple[float, float]:
    """Newcombe (1998) method 10, from scipy's Wilson limits of each arm."""
    p1, p2 = c1 / n1, c2 / n2
    a = binomtest(c1, n1).proportion_ci(method="wilson")
    b = binomtest(c2, n2).proportion_ci(method="wilson")
    d = p1 - p2
    return (d - math.hypot(p1 - a.low, b.high - p2), d + math.hypot(a.high - p1, p2 - b.low))


@pytest.mark.parametrize(
    ("c1", "n1", "c2", "n2"), [(7, 10, 3, 10), (56, 70, 48, 80), (0, 10, 0, 10), (9, 9, 1, 20)]
)
def test_difference_matches_newcombe(c1: int, n1: int, c2: int, n2: int) -> None:
    found = stats.difference(c1, n1, c2, n2)
    assert found is not None
    low, high = newcombe_reference(c1, n1, c2, n2)
    assert found.difference == pytest.approx(c1 / n1 - c2 / n2)
    assert found.interval.low == pytest.approx(low, abs=1e-9)
    assert found.interval.high == pytest.approx(high, abs=1e-9)


def test_newcombe_published_example() -> None:
    # Newcombe (1998), Table II example (56/70 vs 48/80): 0.0524 to 0.3339
    found = stats.difference(56, 70, 48, 80)
    assert found is not None
    assert (round(found.interval.low, 4), round(found.interval.high, 4)) == (0.0524, 0.3339)
    assert found.significant
    same = stats.difference(5, 10, 5, 10)
    assert same is not None and not same.significant
    assert stats.difference(1, 0, 1, 2) is None
