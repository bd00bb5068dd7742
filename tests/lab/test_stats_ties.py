"""The sign test drops ties (issue 36, item 7: a contract ``PairedComparison.sign_p`` states and no test held).

Six seeds lower and four tied is six of six, p = 2/2⁶; counting the ties as seeds (six of ten)
would give p = 0.75, and counting them against (six lower, four higher) p = 0.75 too.
"""

from __future__ import annotations

import pytest

from prenorm_lib.lab.stats import paired


def test_tied_seeds_count_neither_way_in_the_sign_test():
    a = [1.0] * 6 + [2.0] * 4
    b = [2.0] * 6 + [2.0] * 4
    result = paired(a, b)
    assert (result.n_lower, result.n_higher, result.n) == (6, 0, 10)
    assert result.sign_p == pytest.approx(2 / 2**6)


def test_all_seeds_tied_is_no_evidence_either_way():
    result = paired([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert (result.n_lower, result.n_higher, result.sign_p) == (0, 0, 1.0)
