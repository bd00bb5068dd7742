"""Verdicts a statistician would sign: paired seeds, a 95 % interval, a p-value, plain words.

Every empirical comparison in the course trains two variants on the *same* seeds and the
same batches, so what varies between them is the variant alone. The unit of evidence is
then the per-seed difference d_i = a_i − b_i, and the standard summary is

* its mean with the t interval mean ± t_{0.975, n−1} · sd / √n,
* how many seeds go each way,
* an exact two-sided sign test (does a beat b more often than a coin would?) and a paired
  t-test (is the mean difference zero?).

The verdict word comes from the interval alone: entirely below zero → "lower", entirely
above → "higher", otherwise "not separated" (the data allow either order). Whether a
paper's own table orders two of its rows is Welch's t-test on their means, spreads and run
counts (:func:`paper_separates`). Our numbers are never tested against a paper's: the
units differ (nats per byte against log-perplexity of other tokens), so only directions
are compared. The distributions come from ``scipy.stats``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["PairedComparison", "paired", "paper_separates"]


def _number(x: float) -> str:
    """A difference at three significant decimals, with a real minus sign."""
    return f"{x:+.3f}".replace("-", "−")


@dataclass(frozen=True)
class PairedComparison:
    """The paired difference ``a − b`` over n seeds, summarised; ``str()`` is the verdict line."""

    a_name: str
    b_name: str
    what: str
    differences: tuple[float, ...]
    mean: float
    low: float  # 95 % confidence interval of the mean difference
    high: float
    n_lower: int  # seeds where a < b
    n_higher: int  # seeds where a > b
    sign_p: float  # exact two-sided sign test (ties dropped)
    t_p: float  # paired t-test, two-sided

    @property
    def n(self) -> int:
        return len(self.differences)

    @property
    def verdict(self) -> str:
        """"lower", "higher" or "not separated": where the 95 % interval lies relative to 0."""
        if self.high < 0:
            return "lower"
        if self.low > 0:
            return "higher"
        return "not separated"

    def __str__(self) -> str:
        what = f" on {self.what}" if self.what else ""
        return (f"{self.a_name} − {self.b_name}{what}: lower in {self.n_lower} of {self.n} seeds, "
                f"mean {_number(self.mean)} [95 % CI {_number(self.low)}, {_number(self.high)}], "
                f"sign test p = {self.sign_p:.2g} → {self.verdict}")


def paired(a: Sequence[float], b: Sequence[float], *, a_name: str = "a", b_name: str = "b",
           what: str = "", confidence: float = 0.95) -> PairedComparison:
    """Compare ``a`` and ``b`` seed by seed (``a[i]`` and ``b[i]`` share seed i)."""
    a_values, b_values = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_values.shape != b_values.shape or a_values.ndim != 1:
        raise ValueError(f"a and b must be two 1-D sequences of the same length (one value per seed), "
                         f"got shapes {a_values.shape} and {b_values.shape}")
    if len(a_values) < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds, got {len(a_values)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    d = a_values - b_values
    n, mean, sd = len(d), float(d.mean()), float(d.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    n_lower, n_higher = int((d < 0).sum()), int((d > 0).sum())
    sign_p = float(stats.binomtest(n_lower, n_lower + n_higher, 0.5).pvalue) if n_lower + n_higher else 1.0
    t_p = float(stats.ttest_1samp(d, 0.0).pvalue) if sd > 0 else (1.0 if mean == 0 else 0.0)
    return PairedComparison(a_name, b_name, what, tuple(float(x) for x in d), mean, mean - half, mean + half,
                            n_lower, n_higher, sign_p, t_p)


def paper_separates(mean_a: float, std_a: float, mean_b: float, std_b: float, runs: int, alpha: float = 0.05) -> bool:
    """Can a paper's own table order two of its rows? Welch's test on its means, stds and run count.

    When it cannot (e.g. Shazeer's GEGLU 1.942 ± 0.004 vs SwiGLU 1.944 ± 0.010 over 4 runs),
    the table carries no order between them for a small run to reproduce.
    """
    result = stats.ttest_ind_from_stats(mean_a, std_a, runs, mean_b, std_b, runs, equal_var=False)
    return bool(result.pvalue < alpha)
