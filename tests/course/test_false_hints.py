"""No false hints (issue 36, item 6): a small fixed sample of ``make false-hints`` in CI, and the draws that failed.

The benchmark (``prenorm_course.exercises.false_hints``, 20,000 draws per checker) checks several
correct forms of every answer; here a few seeded draws of every checker, every form at least
once, must give no hint. And the draws the benchmark found on the checkers before this change:
1.1 compared bf16 results at float32's tolerance, so the handout's own kernel (divide by the
square root) and another association of it were told "the result ignores the eps argument" or
"did you forget eps?" (3 and 5 of 5,000 draws each); a kernel that computes in bf16 after a
float32 mean was told "the result is zeros or inf" in 405 of 5,000; 4.1 held a logsumexp
softmax of logits near 1000 to a tolerance below float32's rounding of 1000.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from prenorm_course.exercises import false_hints
from prenorm_course.exercises.false_hints import CHECKERS, measure


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.exercise)
def test_a_fixed_sample_of_correct_answers_gets_no_hint(checker):
    draws = (1 if checker.exercise.startswith("6.") else 2) * len(checker.forms)  # 06's checks: each form once
    outcome = measure(checker, draws, seed=36)
    assert outcome.draws == draws and outcome.false_hints == []


def test_every_checker_of_the_course_is_measured():
    from prenorm_lib.checks.catalogue import EXERCISES

    assert [c.exercise for c in CHECKERS] == sorted(EXERCISES, key=lambda i: tuple(map(int, i.split("."))))
    assert all(len(c.forms) >= 2 or c.exercise in ("3.3", "5.3") for c in CHECKERS)  # one right answer each


def test_a_check_that_returns_without_passing_is_an_error_not_a_pass():
    from prenorm_course.exercises.false_hints import Checker
    from prenorm_lib.checks.core import exercise

    silent = Checker("1.1", exercise("1.1")(lambda fn: None), {"anything": (None,)})
    with pytest.raises(RuntimeError, match="returned without passing"):
        measure(silent, 1, seed=0)


def test_the_benchmark_writes_its_table_into_measurements(tmp_path, monkeypatch):
    """One draw of every checker, written where ``--into`` says: a row per checker, the forms, draws, 0 hints."""
    from prenorm_course import measurements

    target = tmp_path / "measurements.md"
    monkeypatch.setattr(false_hints, "CHECKERS", [c for c in CHECKERS if c.exercise in ("1.3", "4.2", "6.1", "6.8")])
    assert false_hints.main(["--draws", "2", "--seconds", "600", "--into", str(target)]) == 0
    section = measurements.read_sections(target.read_text())["false-hints"]
    assert section.startswith("## False hints\n\n*Written by `make false-hints DRAWS=2 SECONDS=600` on ")
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [("| 1.3", "2", "2", "0"), ("| 4.2", "2", "2", "0"),
                                                       ("| 6.1", "3", "2", "0"), ("| 6.8", "3", "2", "0")]
    assert "A drawn check is one whole call of the exercise's checker" in section and "load average" in section


def test_a_checker_stopped_by_the_time_limit_says_so(tmp_path, monkeypatch):
    target = tmp_path / "measurements.md"
    monkeypatch.setattr(false_hints, "CHECKERS", [c for c in CHECKERS if c.exercise == "6.8"])
    assert false_hints.main(["--draws", "50", "--seconds", "0.01", "--into", str(target)]) == 0
    text = target.read_text()
    assert "| 6.8 | 3 | 1 (of 50: the time limit) | 0 |" in text and "Short of 50 drawn checks: 6.8." in text


def _replayed(monkeypatch, first_seed: int, consecutive: bool = False) -> None:
    """The check's first generator seeded as the benchmark's draw was (the next ones from other seeds, or, with
    ``consecutive``, from the seeds after it, as the benchmark numbers them: a whole draw replayed)."""
    seeds = itertools.count(first_seed) if consecutive else itertools.chain([first_seed], itertools.count(10**6))
    fresh = lambda: torch.Generator().manual_seed(next(seeds))
    for module in false_hints.CHECKER_MODULES:
        if hasattr(module, "fresh_generator"):
            monkeypatch.setattr(module, "fresh_generator", fresh)


@pytest.mark.parametrize(("form", "seed"), [
    (false_hints.rms_handout, 7012),  # "on a bf16 input: the result ignores the `eps` argument"
    (false_hints.rms_weight_first, 3618),  # "on a bf16 input: near-zero inputs go wrong — did you forget eps?"
    (false_hints.rms_half_path, 43),  # "on a bf16 input: the result is zeros or inf — compute in float32"
])
def test_the_draws_that_told_a_correct_bf16_kernel_it_was_wrong_now_pass(form, seed, monkeypatch, capsys):
    _replayed(monkeypatch, seed)
    from prenorm_lib.checks import rmsnorm

    rmsnorm.rms_norm.core(form)
    assert "Exercise 1.1 passed" in capsys.readouterr().out


def test_make_false_hints_as_typed_reads_zero():
    """The front door, with a few draws of two checkers: the table, the load, and 0 in all."""
    import subprocess

    from prenorm_course.exercises.paths import repo_root

    run = subprocess.run(["make", "false-hints", "DRAWS=4", "ONLY=1.3 4.2"], cwd=repo_root(), capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "false hints over 4 drawn checks per checker" in run.stdout and "; 0 false hints in all" in run.stdout
    assert [line.split()[0] for line in run.stdout.splitlines() if line[:3] in ("1.3", "4.2")] == ["1.3", "4.2"]


# --- notebook 06's correct forms are correct: each against the library on a few inputs ---------------------------

LEARNERS = ("solution", "handout", "reassociated")


def _library_and_args(exercise_id: str):
    from prenorm_lib import Embedding, Linear, MultiHeadSelfAttention, TransformerBlock, TransformerLM
    from prenorm_lib.ffn import SwiGLU
    from prenorm_lib.rope import RotaryPositionalEmbedding

    d, h, d_ff, n, theta, vocab, layers = 24, 4, 36, 40, 500.0, 70, 2
    return {"6.1": (Linear(d, d_ff), (d, d_ff)), "6.2": (Embedding(vocab, d), (vocab, d)),
            "6.3": (SwiGLU(d, d_ff), (d, d_ff)), "6.4": (RotaryPositionalEmbedding(theta, 6, n), (theta, 6, n)),
            "6.5": (MultiHeadSelfAttention(d, h, n, rope_theta=theta), (d, h, n, theta)),
            "6.6": (TransformerBlock(d, h, d_ff, n, rope_theta=theta), (d, h, d_ff, n, theta)),
            "6.7": (TransformerLM(vocab, n, d, layers, h, d_ff, theta), (vocab, n, d, layers, h, d_ff, theta)),
            }[exercise_id]


@pytest.mark.parametrize("learner", LEARNERS)
@pytest.mark.parametrize("exercise_id", ["6.1", "6.2", "6.3", "6.4", "6.5", "6.6", "6.7"])
def test_each_06_form_computes_the_library_s_module(exercise_id, learner):
    from prenorm_course.exercises import false_hints_06

    torch.manual_seed(6)
    library, args = _library_and_args(exercise_id)
    (cls,) = false_hints_06.forms(exercise_id)[learner]
    mine = cls(*args)
    assert mine.load_state_dict(library.state_dict()) is not None
    gen = torch.Generator().manual_seed(1)
    if exercise_id == "6.2":
        inputs = [(torch.randint(70, (2, 9), generator=gen),), (torch.arange(70),)]
    elif exercise_id == "6.7":
        inputs = [(torch.randint(70, (2, 9), generator=gen),), (torch.randint(70, (40,), generator=gen),)]
    elif exercise_id == "6.4":
        inputs = [(torch.randn(2, 3, 9, 6, generator=gen), torch.randperm(40, generator=gen)[:9]),
                  (torch.randn(9, 6, generator=gen), torch.arange(31, 40))]
    else:
        width = 24
        inputs = [(torch.randn(2, 9, width, generator=gen),), (torch.randn(3, 2, 40, width, generator=gen),)]
        if exercise_id in ("6.5", "6.6"):
            inputs.append((torch.randn(2, 9, width, generator=gen), torch.randperm(40, generator=gen)[:9]))
    # RoPE's tables may be float32 (the library's and the handout learner's are), so RoPE's modules agree in float64
    # to float32's rounding of the angles
    exact = 1e-10 if exercise_id in ("6.1", "6.2", "6.3") else 1e-5
    for dtype, atol in ((torch.float64, exact), (torch.float32, 1e-5)):
        mine.to(dtype), library.to(dtype)
        for case in inputs:
            case = tuple(t.to(dtype) if t.is_floating_point() else t for t in case)
            with torch.no_grad():
                got, want = mine(*case), library(*case)
            assert got.dtype == want.dtype, (dtype, case[0].shape)
            assert torch.allclose(got, want, atol=atol, rtol=atol * 10), (dtype, case[0].shape)


@pytest.mark.parametrize("learner", LEARNERS)
def test_each_06_cached_attention_form_is_the_library_s_and_its_cache_gives_the_whole_sequence(learner):
    from prenorm_course.exercises import false_hints_06
    from prenorm_lib import MultiHeadSelfAttention
    from prenorm_lib.attention import KVCache

    torch.manual_seed(9)
    library = MultiHeadSelfAttention(24, 6, 30, rope_theta=900.0, num_kv_heads=2).double().eval()
    (cls,) = false_hints_06.forms("6.9")[learner]
    mine = cls(24, 6, 30, 900.0, 2).double()
    mine.load_state_dict(library.state_dict())
    x = torch.randn(2, 17, 24, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = library(x)
        assert torch.allclose(mine(x), want, atol=1e-10)
        mine.kv_cache, pieces, start = KVCache(), [], 0
        for size in (5, 1, 1, 3, 1, 6):
            pieces.append(mine(x[:, start:start + size]))
            start += size
    assert torch.allclose(torch.cat(pieces, dim=-2), want, atol=1e-10)


@pytest.mark.parametrize("learner", LEARNERS)
def test_each_06_count_is_the_library_model_s(learner):
    from prenorm_course.exercises import false_hints_06
    from prenorm_lib.lab.accounting import Shape, measured_flops, measured_parameters

    count_parameters, forward_flops = false_hints_06.forms("6.8")[learner]
    for shape in (Shape(300, 64, 48, 2, 4, 130), Shape(4000, 200, 96, 5, 8, 7)):
        assert count_parameters(*shape) == measured_parameters(shape)
        assert forward_flops(*shape) == measured_flops(shape)


def test_the_draw_that_told_the_handout_s_bf16_attention_it_was_wrong_now_passes(monkeypatch, capsys):
    """4.3 held bfloat16 outputs to (2e-2, 2e-2) elementwise: scores rounded to bfloat16 move the weights by
    |s|·2⁻⁸, and the handout's own formula missed by 1.6× (this draw: got -0.166, expected -0.1924)."""
    from prenorm_lib.checks import attention

    _replayed(monkeypatch, 207)
    attention.attention.core(false_hints.attention_handout)
    assert "Exercise 4.3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("mistake", ["no scale", "no mask"])
@pytest.mark.parametrize("seed", [207, 5, 36])
def test_a_bf16_attention_wrong_beyond_rounding_still_gets_a_hint(seed, mistake, monkeypatch):
    """Right in float32 and float64, but in bfloat16 without the 1/√d_k or without the mask: told apart (a
    mistake whose effect is within bfloat16's rounding, a scale a few % off, is not; float32 holds the formula)."""
    from prenorm_lib.checks import Hint, attention

    def off_in_bf16(Q, K, V, mask=None):
        if Q.dtype != torch.bfloat16:
            return false_hints.attention_handout(Q, K, V, mask)
        if mistake == "no scale":
            return false_hints.attention_handout(Q * Q.shape[-1] ** 0.5, K, V, mask)
        return false_hints.attention_handout(Q, K, V)

    _replayed(monkeypatch, seed)
    with pytest.raises(Hint, match="on bfloat16 inputs the output does not match"):
        attention.attention.core(off_in_bf16)


@pytest.mark.parametrize(("form", "seed"), [(false_hints.swiglu_linear, 11740), (false_hints.swiglu_handout, 17829)])
def test_the_draws_that_told_a_correct_bf16_swiglu_it_was_wrong_now_pass(form, seed, monkeypatch, capsys):
    """2.2 held bfloat16 outputs to (2e-2, 2e-2) elementwise, against the library's own bfloat16 path: the
    handout's formula missed by 0.08 at an output of 2.4 (2 of 8,270 drawn checks)."""
    from prenorm_lib.checks import ffn

    for module in false_hints.CHECKER_MODULES:  # every generator as the benchmark's failing one
        if hasattr(module, "fresh_generator"):
            monkeypatch.setattr(module, "fresh_generator", lambda: torch.Generator().manual_seed(seed))
    ffn.swiglu.core(form)
    assert "Exercise 2.2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [11740, 17829, 36])
def test_a_bf16_swiglu_wrong_beyond_rounding_still_gets_a_hint(seed, monkeypatch):
    """Right in float32, but in bfloat16 the SiLU gates w3's output: told apart (≥ 16 % off; rounding ≤ 1 %)."""
    from prenorm_lib.checks import Hint, ffn

    def off_in_bf16(x, w1, w2, w3):
        return false_hints.swiglu_handout(x, *((w3, w2, w1) if x.dtype == torch.bfloat16 else (w1, w2, w3)))

    _replayed(monkeypatch, seed)
    with pytest.raises(Hint, match="for bfloat16 x"):
        ffn.swiglu.core(off_in_bf16)


@pytest.mark.parametrize(("form", "seed"), [
    (false_hints.rotate_interleave, 21630), (false_hints.rotate_float32, 23755), (false_hints.rotate_float32, 58439),
])
def test_the_draws_that_told_a_correct_float16_rotation_it_turned_the_wrong_positions_now_pass(
        form, seed, monkeypatch, capsys):
    """3.2 compared float16 rotations to the library's float16 one at atol 2e-3 without a relative term before
    diagnosing a mistake, and "every token turned by some position's angles" held for the token's own: "each
    token was rotated by the angles of another position" (3 of 20,000 draws). The old test, failing on purpose
    on these draws; the checker now measures from the exact rotation with a bound that follows the pair's size."""
    from prenorm_lib import functional
    from prenorm_lib.checks import rope

    _replayed(monkeypatch, seed)
    name, x, cos, sin = rope._rotation_cases()[-1]
    assert name.startswith("float16")
    got64, library64 = form(x, cos, sin).double(), functional.apply_rope(x, cos, sin).double()
    assert ((got64 - library64).abs() > 2e-3).any()  # what the old pre-check called not close
    _replayed(monkeypatch, seed)
    rope.rotate_pairs.core(form)
    assert "Exercise 3.2 passed" in capsys.readouterr().out


def test_the_draw_that_told_the_handout_s_float32_rope_table_it_was_wrong_now_passes(monkeypatch, capsys):
    """6.4 held a RoPE module to 1e-5 of the rotation by float64 angles; the handout's table is float32 from end to
    end, off by about float32's rounding of the angle (p radians at position p), and at positions 70 … 93 one output
    missed by 1.1e-5 (1 of 20,000 draws). The old tolerance, failing on purpose on this draw; the bound now follows
    the positions and the pair's length."""
    from prenorm_course.exercises import false_hints_06
    from prenorm_lib.checks import Hint, model

    (handout,) = false_hints_06.forms("6.4")["handout"]
    with monkeypatch.context() as old:
        old.setattr(model, "_table_tolerance", lambda x, positions: model.ATOL)
        _replayed(old, 14486)
        with pytest.raises(Hint, match="positions 70 … 93, to the end of the table"):
            model.rope.core(handout)
    _replayed(monkeypatch, 14486)
    model.rope.core(handout)
    assert "Exercise 6.4 passed" in capsys.readouterr().out


def test_the_benchmark_stopped_by_a_signal_leaves_no_worker_running():
    """`kill` (or a runner's timeout) stops the workers of `--jobs 2` with the benchmark: before, they ran on
    without a parent, a checker's draws each, taking both cores from whatever came next."""
    import contextlib
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from prenorm_course.exercises.paths import repo_root

    run = subprocess.Popen([sys.executable, "-m", "prenorm_course.exercises.false_hints", "--only", "6.7", "6.8",
                            "--draws", "100000", "--jobs", "2"], cwd=repo_root(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        workers: list[psutil.Process] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = [p for p in psutil.Process(run.pid).children() if "spawn_main" in " ".join(p.cmdline())]
            time.sleep(0.5)
        assert len(workers) == 2, "the benchmark did not start its two workers"
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
        _, alive = psutil.wait_procs(workers, timeout=30)
        assert alive == [], f"workers still running after the benchmark stopped: {[p.pid for p in alive]}"
    finally:
        run.kill()
        for worker in workers:  # a failing run leaves none behind either
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.kill()


@pytest.mark.parametrize(("seed", "old_hint"), [
    (10556, r"the output differs from the library's .*token_ids \(2, 63\)"),  # draw 5278
    (4130, r"after one gradient step the output is wrong"),  # draw 2065, its step's generator 4131
    (19165, r"after one gradient step the output is wrong"),  # draw 9583, its step's generator 19166
])
def test_the_draws_that_told_the_handout_s_model_it_was_wrong_now_pass(seed, old_hint, monkeypatch, capsys):
    """6.7 held a whole model to 1e-5 of the library's float32 logits (10 times that after the gradient step); on the
    first drawn 3-layer model (92 positions) the library's own logits miss the same model in float64 by 1.3e-5 (a small
    stream before the final norm amplifies float32 rounding), the handout's by 1.8e-6, and the handout was told it was
    wrong (4 of 20,000 draws; the three the benchmark listed are kept here, two after the step). Without the room
    measured on the draw (``model._rounding``) each fails on purpose; with it, it passes."""
    from prenorm_course.exercises import false_hints_06
    from prenorm_lib.checks import Hint, model

    (handout,) = false_hints_06.forms("6.7")["handout"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the benchmark ran it: a miss at rounding level depends on the reduction order
    try:
        with monkeypatch.context() as old:
            old.setattr(model, "ROUNDING_ROOM", 0)
            _replayed(old, seed, consecutive=True)
            with pytest.raises(Hint, match=old_hint):
                model.language_model.core(handout)
        _replayed(monkeypatch, seed, consecutive=True)
        model.language_model.core(handout)
    finally:
        torch.set_num_threads(threads)
    assert "Exercise 6.7 passed" in capsys.readouterr().out
