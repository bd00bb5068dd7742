"""The verdict helper against textbook values (REFERENCES' sign-test p-values, a hand-computed t interval)."""

from __future__ import annotations

import pytest

from prenorm_lib.lab.stats import paired, paper_separates


def test_sign_test_p_values_from_the_references():
    six = paired([0.0] * 6, [1.0, 2.0, 1.5, 1.2, 1.1, 3.0])
    assert six.n_lower == 6 and six.sign_p == pytest.approx(0.03125)
    nine = paired([0.0] * 10, [1.0] * 9 + [-1.0])
    assert (nine.n_lower, nine.n_higher) == (9, 1) and nine.sign_p == pytest.approx(0.02148, abs=1e-5)


def test_t_interval_by_hand():
    # d = 1..5: mean 3, sd 1.5811, t(0.975, 4) = 2.7764 → half-width 1.9632
    result = paired([2.0, 4.0, 6.0, 8.0, 10.0], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert result.mean == pytest.approx(3.0)
    assert (result.low, result.high) == (pytest.approx(1.0368, abs=1e-4), pytest.approx(4.9632, abs=1e-4))
    assert result.verdict == "higher" and result.n_higher == 5


def test_verdict_comes_from_the_interval():
    assert paired([1.0, 2.0, 3.0], [2.0, 3.1, 4.05]).verdict == "lower"
    mixed = paired([1.0, 2.0, 3.0, 4.0], [1.5, 1.5, 3.5, 3.5])
    assert mixed.verdict == "not separated" and mixed.low < 0 < mixed.high


def test_the_line_reads_as_english():
    line = str(paired([1.0, 2.0, 3.0], [2.0, 3.1, 4.05], a_name="RoPE", b_name="sinusoidal", what="loss"))
    assert line.startswith("RoPE − sinusoidal on loss: lower in 3 of 3 seeds, mean −1.050 [95 % CI ")
    assert line.endswith("→ lower") and "True" not in line and "False" not in line


def test_what_a_paper_table_can_separate_by_welch():
    # Shazeer Table 1 (65,536 steps, 4 runs): GEGLU 1.942 (0.004) vs SwiGLU 1.944 (0.010) cannot be ordered;
    # ReLU 1.997 (0.005) vs SwiGLU 1.944 (0.010) can.
    assert not paper_separates(1.942, 0.004, 1.944, 0.010, runs=4)
    assert paper_separates(1.997, 0.005, 1.944, 0.010, runs=4)


@pytest.mark.parametrize(("a", "b", "words"), [
    ([1.0, 2.0], [1.0], "same length"), ([1.0], [2.0], "at least 2 seeds"), ([[1.0, 2.0]], [[1.0, 2.0]], "1-D"),
])
def test_bad_input_is_named(a, b, words):
    with pytest.raises(ValueError, match=words):
        paired(a, b)
