"""What notebook 03's sections 9-11 say about their sources and records, held to them (issue 40's reader).

Each test reads the notebook's Markdown as a learner sees it and fails on wording a reader found
wrong against the source or the record, so the claim cannot come back unnoticed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def markdown(name: str) -> list[str]:
    notebook = json.loads(next(NOTEBOOKS.glob(f"{name}_*.ipynb")).read_text(encoding="utf-8"))
    return [" ".join("".join(c["source"]).split()) for c in notebook["cells"] if c["cell_type"] == "markdown"]


def prose(name: str = "03") -> str:
    return "\n".join(markdown(name))


@pytest.mark.parametrize("as_fact", [
    "— a 2× extension on short dependencies barely strains extrapolation.",  # §9's verdict, "Why: …"
    "result, and a 2× extension on short dependencies barely strains extrapolation",  # the takeaway
    "**differs**: a 2× extension on short dependencies barely strains extrapolation",  # §11's table
    "Our run differs from theirs: a 2× extension",  # §11's closing
    "At this scale, keeping the fast clocks intact",
])
def test_03_the_reason_for_differing_from_chen_is_not_stated_as_measured(as_fact):
    """Issue 39 item 8: neither the factor nor the dependency length was varied by rope_positions."""
    assert as_fact not in prose()


def test_03_ntk_is_lower_in_every_seed_not_free_of_degradation_in_every_seed():
    """The paired row is NTK − RoPE as trained at 32–63 (10 of 10); level with 0–31 only on average."""
    text = prose()
    assert "removes RoPE's degradation in every seed" not in text
    assert "as low there as inside the trained range (2.209 against 2.220)" in text


def test_03_interpolations_mechanism_is_yarns_hypothesis_not_our_finding():
    text = prose()
    assert "halving every step blurs the fast clocks the model uses for the nearest words, and" not in text
    assert "confused on the positional order of close-by tokens" in text


def test_03_nanochats_log_gives_no_run_count():
    """dev/LOG.md's rows name an idea and a result; they say nothing of how many runs."""
    text = prose()
    assert "one run each" not in text
    assert "no number of runs" in text


def test_03_llama4s_interval_of_four_is_hugging_faces_default():
    """Meta's reference code takes nope_layer_interval as an argument (None by default); 4 is Llama4TextConfig's."""
    assert "Llama4TextConfig" in prose()


def test_03_floor_scale_32_already_scales_the_last_trained_position():
    """log(⌊(31 + 1)/32⌋ + 1)·0.1 + 1 = 1 + 0.1 ln 2 at position 31, inside the training length."""
    text = prose()
    assert "leaves every trained position alone" not in text
    assert "position 31 is already scaled" in text


def test_03_the_other_learning_rates_are_named():
    """§10: rope_frontier's other_lrs are 3e-3 and 3e-2 around 1e-2 (not exactly a third)."""
    assert "Each was also trained at a third and at three times the learning rate" not in prose()
    assert "learning rates 3e-3 and 3e-2" in prose()


PLACEHOLDER = re.compile(r"^(?:PROSE\d*|TODO|TBD|FIXME|XXX)\b", re.IGNORECASE)


@pytest.mark.parametrize("name", ["01", "02", "03", "04", "05", "06"])
def test_no_markdown_cell_is_a_placeholder(name):
    """03 §10's verdict cell read "PROSE2" on main: a learner must never see a placeholder."""
    assert [cell for cell in markdown(name) if PLACEHOLDER.match(cell)] == []


# A second fresh reading (issue 39 item 3) of §9-§11 against the 5-seed records' printed lines.

def test_03_a_larger_extension_widens_the_lead_on_the_grammar_only():
    """rope_extension: interpolation − plain RoPE on repeats 16 back is +0.635, +0.776, +0.733 at s = 2, 4, 8."""
    text = prose()
    assert "turn the order round; it widens plain RoPE's lead" not in text
    assert "larger extension on short dependencies favours plain RoPE more" not in text
    assert "Chen et al.'s order, but a larger extension widens" not in text
    assert "past the trained distances at 2×; a larger extension favoured" not in text
    assert "largest at $s = 4$, not at 8" in text


def test_03_the_temperatures_0_0001_is_read_at_64_only():
    """rope_frontier: after 50 updates one seed moves by 0.0021; the printed maximum is for 'read at 64'."""
    text = prose()
    assert "by at most 0.0001 in any seed (section 10)" not in text
    assert "by at most 0.0001 in any seed read at 64, and is not separated from none after 50 updates" in text


def test_03_three_quarters_rotated_leaves_pairs_6_and_7_unrotated():
    """d_k 16 has 8 pairs: three quarters rotated keeps pairs 0-5, so only 6-7 are left, not 4-7."""
    text = prose()
    assert "unrotated at three quarters or half, pairs 4–7" not in text
    assert "pairs 6–7 at three quarters, 4–7 at half" in text


def test_03_frontier_beyond_training_says_what_the_interval_says():
    """§10: 'not separated' and one 'higher' are not 'do not help'; half rotated read at 64 is higher."""
    text = prose()
    assert "the 2024 changes do not help here either" not in text
    assert "half rotated is higher read at 64" in text


def test_03_why_the_grammar_hides_the_danger_is_a_likely_reason():
    """§9's first verdict gave an unvaried cause as fact."""
    text = prose()
    assert "The grammar hides much of the danger:" not in text
    assert "The grammar likely hides much of the danger" in text


def test_03_ntk_helps_on_the_grammar_at_2x_not_everywhere():
    """rope_extension: after 50 updates NTK-aware Θ is higher than plain RoPE on repeats 16 back at s = 4, 8."""
    text = prose()
    assert "NTK-aware Θ, not position interpolation, is the rescaling that helps here" not in text
    assert "on the grammar at twice the training length NTK-aware Θ" in text


def test_03_barbero_has_a_measured_test_beyond_the_abstract():
    """§10: the abstract names no measure, but the paper trains Gemma 2B models and compares perplexity (Table 2)."""
    text = prose()
    assert "the abstract names no measure or size to set beside ours" not in text
    assert "trains Gemma 2B models from scratch" in text


def test_03_no_lasting_advantage_is_a_non_separation_with_an_untested_reason():
    """§8: after 1000 updates RoPE − absolute is −0.001 [−0.003, +0.001]: not separated, and the why was not varied."""
    text = prose()
    assert "no lasting advantage: sentences are short" not in text
    assert "no advantage that is still separated after 1000 updates. A likely reason, not tested here" in text
