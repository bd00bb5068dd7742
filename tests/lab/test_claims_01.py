"""What notebook 01 says about Zhang & Sennrich's speed-up, held to the paper's own words (issue 39 item 3).

Each test reads the notebook's Markdown as a learner sees it and fails on the wording a reader found
wrong, so the claim cannot come back unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

NOTEBOOK = next((Path(__file__).resolve().parents[2] / "notebooks").glob("01_*.ipynb"))


def prose() -> str:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return "\n".join(" ".join("".join(c["source"]).split()) for c in notebook["cells"] if c["cell_type"] == "markdown")


def test_the_64_percent_is_given_to_prmsnorm_with_the_papers_sentence():
    """Item 3: the abstract credits 7-64 % to RMSNorm; §6.3 / Table 8 give the 64 % to pRMSNorm (RMSNorm ≈ 41 %)."""
    text = prose()
    assert "credited to RMSNorm itself" not in text
    assert "highlighting better efficiency of pRMSNorm" in text
    assert "the 64 % is pRMSNorm's" in text


def test_rmsnorms_41_percent_is_table_8s_not_the_whole_papers():
    """Only Table 8 was read against the range: RMSNorm's 41 % is its saving there, not the end of its range
    in every experiment of the paper (the abstract's 7 %-64 % spans several models)."""
    text = prose()
    assert "own part of the range ends near 41" not in text
    assert "in Table 8, where the 64 % comes from, RMSNorm's own saving is about 41 %" in text


def test_the_notebooks_section_is_not_confused_with_the_papers():
    """"(§6 above): in §6.3" read as the paper's §6; pRMSNorm is met in this notebook's §6."""
    text = prose()
    assert "(§6 above): in §6.3" not in text
    assert "this notebook's §6" in text


def test_nanochats_dyt_entry_is_quoted_not_summarised():
    """§11 (issue 40, a reader's finding): the log's entry says "did not outperform", gives no number of runs;
    "tried and failed" is only a commit message, and "single run" is nowhere in the entry."""
    text = prose()
    assert "tried and failed" not in text and "single run" not in text
    assert "DyT for d12 pretraining (negative)" in text
    assert "did not outperform the baseline d12 model on master, even with steps on the x-axis" in text
    assert "without saying how many runs" in text


def test_vermas_scope_and_swiglu_finding_are_stated():
    """§11: Verma's abstract limits every result to T/P < 1.84 and localises Llama-DyT collapse to SwiGLU,
    which the course's model uses."""
    text = prose()
    assert "all experiments are compute-limited ($T/P<1.84$), below Chinchilla-optimal training" in text
    assert "We also localize Llama-DyT collapse to SwiGLU gating" in text
    assert "the course's model uses SwiGLU" in text


def test_derfs_domains_are_listed_not_cut_to_a_wide_range():
    """§11: Derf's abstract (v1) lists vision, speech and DNA; "a wide range of domains" alone would
    suggest language models, which its list does not name."""
    text = prose()
    assert "including vision (image recognition and generation), speech representation, and DNA sequence" in text
    assert "language models are not in that list" in text


def test_the_tuning_grid_described_is_the_records():
    """§11's design text names dyt_tuning's grids: DyT's α₀ ∈ {0.5, 1, 2, 4}, Derf's {0.0625, …, 0.5}, their
    learning rates, RMSNorm's four."""
    from prenorm_lib.lab.experiments import dyt_tuning

    grids = dyt_tuning.CONFIG["grids"]
    assert grids["dyt"]["alpha0s"] == [0.5, 1.0, 2.0, 4.0] and grids["derf"]["alpha0s"] == [0.0625, 0.125, 0.25, 0.5]
    assert grids["dyt"]["lrs"] == [1e-3, 3e-3, 1e-2] and grids["rmsnorm"]["lrs"] == [1e-3, 3e-3, 1e-2, 3e-2]
    assert grids["derf"]["lrs"] == [3e-3, 1e-2, 3e-2]
    text = prose()
    assert r"$\alpha_0 \in \{0.5, 1, 2, 4\}$" in text and r"$\alpha_0 \in \{0.0625, 0.125, 0.25, 0.5\}$" in text
    assert r"\{0.5, 1.0\}" not in text


def test_dyts_alpha0_quote_has_one_section_everywhere():
    """The sentence "careful tuning of α0 yields noticeable performance gains" opens DyT's §7 (its §7.2 is
    the LLaMA tuning): the notebook, dyt_tuning and dyt_data_size cite it as §7."""
    import inspect

    from prenorm_lib.lab.experiments import dyt_data_size, dyt_tuning

    text = prose()
    assert "careful tuning of" in text and "(§7)" in text.split("careful tuning of")[1][:80]
    assert '(§7:\n"careful tuning of α0' in inspect.getsource(dyt_tuning)
    assert "DyT §7, Derf §6" in inspect.getsource(dyt_data_size)


# A second fresh reading of §11 against the papers and the records it prints (issue 39 item 3, issue 40 item 1).

def test_a_not_separated_change_is_not_called_no_change():
    """§11: DyT's gap at 256 KiB minus at all, −0.004 [−0.033, +0.025], is not separated: not "does not change"."""
    text = prose()
    assert "it does not change (not separated)" not in text
    assert "no change is separated (DyT −0.004 [−0.033, +0.025]" in text


def test_small_text_is_not_said_to_make_every_model_memorise():
    """§11: the record's training losses on 16 KiB are 1.49 (RMSNorm), 1.99 (DyT), 2.07 (Derf) against held-out
    2.18, 2.25, 2.30: RMSNorm fits far more closely; "every model memorises" is not what the record shows."""
    text = prose()
    assert "every model memorises" not in text
    assert "training loss over the last 100 updates about 1.49, DyT's 1.99, Derf's 2.07" in text


def test_one_tuning_seed_does_not_measure_seed_noise():
    """§11: one held-out seed cannot say what "one seed can tell apart"."""
    text = prose()
    assert "less than one seed can tell apart" not in text
    assert "0.007 on this one seed" in text


def test_largest_gap_names_its_non_separation():
    """§11: DyT's gap on all of the text (0.352) is not separated from 256 KiB's (0.348)."""
    text = prose()
    assert "where DyT's gap here is largest." not in text
    assert "largest (with 256 KiB's, from which it is not separated)" in text


def test_vermas_tokens_per_parameter_is_not_read_as_bytes_read_alone():
    """§11: Verma's abstract counts T/P on its token axis (1M–118M) without saying how often they are read."""
    text = prose()
    assert "below Verma's $T/P$ of 1.84, in the regime that study calls compute-limited" not in text
    assert "without saying there how often those tokens are read" in text


def test_nanochats_twelve_tokens_per_parameter_is_the_scripts_default():
    """§11: nanochat's 12 is `--target-param-data-ratio`'s default over scaling parameters (matrices + lm_head);
    the log does not say how long the DyT runs were."""
    text = prose()
    assert "Its d12 model trains on 12 tokens per parameter" not in text
    assert "the log does not say how long its DyT runs were" in text


def test_the_gap_is_not_said_to_shrink_with_any_less_data():
    """Summary and claims table: the gap is smaller on 16 KiB than on all; 256 KiB against all is not separated."""
    text = prose()
    assert "shrinks with less data" not in text
    assert text.count("256 KiB against all") >= 2


def test_s_curve_r2_is_read_from_the_figure():
    """§11: the R² values are printed only in the figure; a line's 0.98 is not "as well" as a tanh's 0.99."""
    text = prose()
    assert "it as well as the tanh does" not in text
    assert "$R^2$ read from the figure" in text
