"""The figures an experiment reports, from counts of attempts and successes.

pass@k is the unbiased estimator of Chen et al. (2021, "Evaluating Large
Language Models Trained on Code"): of n attempts with c successes, the chance
that at least one of k attempts drawn without replacement succeeds,
1 - C(n-c, k) / C(n, k). pass^k is its counterpart for "all k succeed",
C(c, k) / C(n, k) (Yao et al. 2024, tau-bench). Both are exact binomial
ratios (math.comb), not approximations.

Intervals are statsmodels': Wilson's score interval for one pass rate, and
Newcombe's hybrid score interval for the difference of two (arm a minus arm b).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

ALPHA = 0.05  # 95% intervals


def _counts(n: int, c: int, k: int) -> None:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= successes <= attempts (got {c} of {n})")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the attempts ({n}), got {k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k attempts succeeds), estimated from c successes in n."""
    _counts(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """P(all k attempts succeed), estimated from c successes in n."""
    _counts(n, c, k)
    return comb(c, k) / comb(n, k)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def as_list(self) -> list[float]:
        return [round(self.low, 6), round(self.high, 6)]


def wilson(successes: int, n: int, alpha: float = ALPHA) -> Interval | None:
    """Wilson's score interval of a pass rate; None without attempts."""
    if n == 0:
        return None
    from statsmodels.stats.proportion import proportion_confint  # heavy: imported when used

    low, high = proportion_confint(successes, n, alpha=alpha, method="wilson")
    return Interval(float(low), float(high))


@dataclass(frozen=True)
class Difference:
    """Pass rate of arm a minus arm b, with Newcombe's interval; `significant`
    when the interval leaves out 0."""

    difference: float
    interval: Interval

    @property
    def significant(self) -> bool:
        return self.interval.low > 0 or self.interval.high < 0


def difference(
    a_successes: int, a_n: int, b_successes: int, b_n: int, alpha: float = ALPHA
) -> Difference | None:
    """The difference of two arms' pass rates; None when an arm has no attempt."""
    if a_n == 0 or b_n == 0:
        return None
    from statsmodels.stats.proportion import confint_proportions_2indep

    low, high = confint_proportions_2indep(
        a_successes, a_n, b_successes, b_n, method="newcomb", compare="diff", alpha=alpha
    )
    return Difference(a_successes / a_n - b_successes / b_n, Interval(float(low), float(high)))


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation (numpy's default)."""
    if not values:
        return None
    import numpy

    return float(numpy.percentile(values, q))
