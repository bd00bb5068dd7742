"""The training loop: schedule, learning, divergence as an outcome, determinism, summaries."""

import dataclasses
import itertools
import math

import pytest
import torch

from prenorm_lib.lab.data import get_batch, make_corpus
from prenorm_lib.lab.probes import next_token_loss
from prenorm_lib.lab.train import (
    STALL_MARGIN,
    History,
    TrainConfig,
    build_model,
    loss_by_position,
    lr_at,
    model_config,
    outcome_of,
    qk_clip_,
    train,
    training_loss,
)

QUICK = TrainConfig(steps=12, eval_every=6, record_norms_every=4, eval_batches=2)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train_sentences=3000, n_val_sentences=300)


def test_lr_schedule_warmup_peak_and_end():
    config = TrainConfig(steps=100, lr=1e-2, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(0, config) == 0.0
    assert lr_at(5, config) == pytest.approx(5e-3)
    assert lr_at(10, config) == pytest.approx(1e-2)
    assert lr_at(55, config) == pytest.approx(0.55e-2)  # halfway down the cosine: (max + min) / 2
    assert lr_at(100, config) == pytest.approx(1e-3)
    assert lr_at(150, config) == pytest.approx(1e-3)
    decay = [lr_at(s, config) for s in range(10, 101)]
    assert all(a >= b for a, b in itertools.pairwise(decay))
    assert lr_at(0, dataclasses.replace(config, warmup_steps=0)) == pytest.approx(1e-2)


def test_training_reduces_validation_loss(corpus):
    model = build_model(corpus, seed=0)
    history = train(model, corpus, TrainConfig(steps=50, eval_every=25), progress=False)
    assert history.diverged_at is None
    assert history.val_steps == [0, 25, 50]
    assert history.val_loss[0] == pytest.approx(math.log(corpus.vocab_size), rel=0.35)
    assert history.final_val_loss < history.val_loss[0] - 1.0


def test_history_records_every_quantity(corpus):
    history = train(build_model(corpus, seed=0), corpus, QUICK, progress=False)
    assert len(history.train_loss) == len(history.learning_rates) == len(history.total_grad_norm) == 12
    assert history.val_steps == [0, 6, 12]
    assert history.norm_steps == [1, 4, 8, 12]
    assert set(history.grad_norms) == {"token_embeddings", "layers.0", "layers.1", "ln_final", "lm_head"}
    assert all(len(v) == 4 and all(g > 0 for g in v) for v in history.grad_norms.values())
    assert len(history.residual_norms) == 4 and all(len(r) == 3 for r in history.residual_norms)
    assert history.learning_rates[0] == pytest.approx(lr_at(1, QUICK))
    assert history.seconds > 0


def test_norms_are_recorded_only_on_request(corpus):
    history = train(build_model(corpus, seed=0), corpus, dataclasses.replace(QUICK, record_norms_every=None),
                    progress=False)
    assert history.norm_steps == [] and history.grad_norms == {} and history.residual_norms == []
    assert len(history.train_loss) == 12
    with pytest.raises(ValueError, match="record_norms_every"):
        TrainConfig(record_norms_every=0)


def test_huge_learning_rate_is_recorded_as_divergence(corpus):
    model = build_model(corpus, seed=0, norm="none")
    config = TrainConfig(steps=40, lr=10.0, warmup_steps=0, grad_clip=None, eval_every=10)
    history = train(model, corpus, config, progress=False)
    assert history.diverged_at is not None and 1 < history.diverged_at <= 40
    assert len(history.train_loss) == history.diverged_at - 1
    assert math.isnan(history.final_val_loss)


def test_same_seed_gives_identical_history(corpus):
    def run(seed):
        history = train(build_model(corpus, seed=seed), corpus, dataclasses.replace(QUICK, seed=seed), progress=False)
        return {k: v for k, v in dataclasses.asdict(history).items() if k != "seconds"}

    assert run(0) == run(0)
    assert run(0)["train_loss"] != run(1)["train_loss"]


def test_progress_bar_can_run(corpus, capsys):
    history = train(build_model(corpus, seed=0), corpus, dataclasses.replace(QUICK, steps=3), progress=True)
    assert len(history.train_loss) == 3
    assert "training" in capsys.readouterr().err




def test_model_config_uses_each_ffn_default_hidden_size(corpus):
    assert model_config()["d_ff"] == 192 and model_config(ffn="relu")["d_ff"] == 256
    assert model_config(ffn="relu", d_ff=100)["d_ff"] == 100
    counts = {ffn: build_model(corpus, seed=0, ffn=ffn).num_parameters() for ffn in ("swiglu", "silu", "relu")}
    assert counts["relu"] == counts["silu"]
    # two blocks, each with 3·64·192 SwiGLU weights against 2·64·256: the CS336 recipe, not an exact match
    assert counts["swiglu"] - counts["relu"] == 2 * (3 * 64 * 192 - 2 * 64 * 256)
    with pytest.raises(ValueError, match="n_layers"):
        model_config(n_layers=4)


def test_build_model_is_seeded_and_leaves_global_rng_alone(corpus):
    state = torch.get_rng_state()
    a, b = build_model(corpus, seed=3), build_model(corpus, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert build_model(corpus, seed=0, num_layers=4).layers.__len__() == 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"steps": 0}, "steps"), ({"lr": -1.0}, "lr"), ({"warmup_steps": -1}, "warmup_steps"),
     ({"min_lr_ratio": 2.0}, "min_lr_ratio"), ({"grad_clip": 0.0}, "grad_clip"), ({"z_loss": 0.0}, "z_loss"),
     ({"z_loss": -1e-4}, "z_loss"), ({"qk_clip": 0.0}, "qk_clip")],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**overrides)


def test_train_rejects_wrong_argument_types(corpus):
    with pytest.raises(TypeError, match="config"):
        train(build_model(corpus), corpus, {"steps": 3}, progress=False)
    with pytest.raises(TypeError, match="corpus"):
        train(build_model(corpus), corpus.train_ids, progress=False)


def test_on_eval_records_a_metric_at_every_evaluation(corpus):
    calls = []

    def probe(model):
        calls.append(model.training)
        return {"calls": len(calls)}

    history = train(build_model(corpus, seed=0), corpus, QUICK, progress=False, on_eval=probe)
    assert history.val_steps == [0, 6, 12]
    assert history.metrics == {"calls": [1.0, 2.0, 3.0]}
    with pytest.raises(TypeError, match="on_eval must be a function"):
        train(build_model(corpus, seed=0), corpus, QUICK, progress=False, on_eval=42)


def test_loss_by_position_averages_to_the_loss_of_the_same_windows(corpus):
    model = build_model(corpus, seed=0)
    curve = loss_by_position(model, corpus.val_ids, 20, windows=8, seed=3)
    x, y = get_batch(corpus.val_ids, 8, 20, torch.Generator().manual_seed(3))
    assert curve.shape == (20,) and model.training  # the mode is restored
    with torch.no_grad():
        torch.testing.assert_close(curve.mean(), next_token_loss(model, x, y))
    assert curve.std() > 0  # positions differ
    with pytest.raises(ValueError, match="windows"):
        loss_by_position(model, corpus.val_ids, 20, windows=0)


def test_batches_follow_the_model_device(corpus, monkeypatch):
    """Every batch is moved to the device of the model's parameters (CUDA for a model on a GPU)."""
    moved_to = []
    original_to = torch.Tensor.to

    def spy(self, *args, **kwargs):
        if not self.is_floating_point():  # token ids: the batches
            moved_to.append(args[0] if args else kwargs.get("device"))
        return original_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    model = build_model(corpus, seed=0)
    train(model, corpus, dataclasses.replace(QUICK, steps=3, eval_every=3, eval_batches=1), progress=False)
    device = next(model.parameters()).device
    # 3 training batches × (x, y) + 2 evaluations × 1 batch × (x, y)
    assert moved_to.count(device) >= 10, moved_to


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_runs_on_cuda(corpus):
    model = build_model(corpus, seed=0).cuda()
    history = train(model, corpus, QUICK, progress=False)
    assert history.diverged_at is None and history.final_val_loss < history.val_loss[0]


def test_outcome_of_a_run_trains_stalls_or_diverges():
    """What the warmup grid and Exercise 5.3 call a run: stalls = no better than word frequencies."""
    unigram = 3.8
    history = History(val_steps=[0, 50], val_loss=[4.2, 2.7])
    assert outcome_of(history, unigram) == "trains"
    history.val_loss[-1] = unigram - STALL_MARGIN / 2
    assert outcome_of(history, unigram) == "stalls"
    history.diverged_at = 12
    assert outcome_of(history, unigram) == "diverges"


def test_z_loss_adds_the_mean_squared_log_partition(corpus):
    """PaLM's z-loss written out: cross-entropy + c · mean over positions of (log Σ_v exp(logit_v))²."""
    model = build_model(corpus, seed=0)
    x, y = get_batch(corpus.train_ids, 4, 16, torch.Generator().manual_seed(1))
    total, cross_entropy = training_loss(model, x, y, z_loss=1e-2)
    with torch.no_grad():
        logits = model(x).double()  # (4, 16, V)
        log_z = logits.exp().sum(-1).log()  # (4, 16), without logsumexp
        expected_ce = (log_z - logits.gather(-1, y.unsqueeze(-1)).squeeze(-1)).mean()
    torch.testing.assert_close(cross_entropy.double(), expected_ce, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(total.double(), expected_ce + 1e-2 * log_z.pow(2).mean(), rtol=1e-5, atol=1e-6)
    plain, same = training_loss(model, x, y)
    assert plain is same and torch.equal(plain, next_token_loss(model, x, y))


def mean_log_z(model, corpus):
    x, _ = get_batch(corpus.val_ids, 8, 16, torch.Generator().manual_seed(5))
    with torch.no_grad():
        return torch.logsumexp(model(x), dim=-1).abs().mean().item()


def test_z_loss_pulls_log_z_towards_zero_and_history_keeps_the_cross_entropy(corpus):
    config = dataclasses.replace(QUICK, steps=30, lr=1e-2, record_norms_every=None)
    plain, penalised = build_model(corpus, seed=0), build_model(corpus, seed=0)
    history = train(plain, corpus, config, progress=False)
    penalised_history = train(penalised, corpus, dataclasses.replace(config, z_loss=0.1), progress=False)
    assert mean_log_z(penalised, corpus) < 0.5 * mean_log_z(plain, corpus)
    assert history.train_loss[0] == penalised_history.train_loss[0]  # step 1: the same cross-entropy, no z term
    assert history.qk_clipped == penalised_history.qk_clipped == []


def first_step_inputs(model, corpus, config):
    """What each attention module reads in update 1 of train(model, corpus, config): {attn: (B, T, d)}."""
    x, _ = get_batch(corpus.train_ids, config.batch_size, config.context_length,
                     torch.Generator().manual_seed(config.seed))
    inputs = {}
    handles = [layer.attn.register_forward_pre_hook(lambda m, args: inputs.setdefault(m, args[0].detach()))
               for layer in model.layers]
    with torch.no_grad():
        model(x)
    for handle in handles:
        handle.remove()
    return inputs


def head_logit_maxima(attn, x):
    """Per head, max over batch and visible pairs of (x W_q^h)·(x W_k^h)/√d_head with RoPE, written out."""
    d, maxima = attn.d_head, []
    visible = torch.ones(x.shape[-2], x.shape[-2]).tril().bool()
    for h in range(attn.num_heads):
        rows = slice(h * d, (h + 1) * d)
        q = attn.rope(x @ attn.q_proj.weight[rows].T)  # (B, T, d_head)
        k = attn.rope(x @ attn.k_proj.weight[rows].T)
        scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(d)  # (B, T, T)
        maxima.append(scores.masked_fill(~visible, -math.inf).max())
    return torch.stack(maxima)


def test_qk_clip_rescales_each_heads_query_and_key_rows_by_the_root_of_its_ratio(corpus):
    """Kimi K2's per-head QK-Clip after one update: W^h ← √min(1, τ/S_max^h)·W^h for W_q and W_k, nothing else."""
    config = TrainConfig(steps=1, lr=1e-2, warmup_steps=0, eval_every=1, eval_batches=1)
    model = build_model(corpus, seed=0)
    s_max = {i: head_logit_maxima(attn, x) for i, (attn, x) in
             enumerate(first_step_inputs(model, corpus, config).items())}
    tau = torch.cat(list(s_max.values())).median().item()  # about half of the 2 × 4 heads above τ
    free, clipped = build_model(corpus, seed=0), build_model(corpus, seed=0)
    train(free, corpus, config, progress=False)
    history = train(clipped, corpus, dataclasses.replace(config, qk_clip=tau), progress=False)
    expected_clipped = 0
    for i, (a, b) in enumerate(zip(free.layers, clipped.layers, strict=True)):
        gamma = (tau / s_max[i]).clamp(max=1.0)
        expected_clipped += int((gamma < 1).sum())
        scale = gamma.sqrt().repeat_interleave(a.attn.d_head).unsqueeze(-1)  # (d_model, 1)
        torch.testing.assert_close(b.attn.q_proj.weight, a.attn.q_proj.weight * scale, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(b.attn.k_proj.weight, a.attn.k_proj.weight * scale, rtol=1e-5, atol=1e-7)
        assert torch.equal(b.attn.v_proj.weight, a.attn.v_proj.weight)
    assert 0 < expected_clipped < 2 * 4 and history.qk_clipped == [expected_clipped]


def test_qk_clip_with_a_threshold_never_reached_changes_nothing(corpus):
    config = dataclasses.replace(QUICK, record_norms_every=None)
    free = train(build_model(corpus, seed=0), corpus, config, progress=False)
    clipped = train(build_model(corpus, seed=0), corpus, dataclasses.replace(config, qk_clip=1e9), progress=False)
    assert clipped.val_loss == free.val_loss and clipped.qk_clipped == [0] * config.steps


def test_qk_clip_refuses_a_qk_norm_that_would_undo_it(corpus):
    with pytest.raises(ValueError, match=r"qk_clip=100.*qk_norm='per_head'"):
        train(build_model(corpus, seed=0, qk_norm=True), corpus, dataclasses.replace(QUICK, qk_clip=100.0),
              progress=False)
    attn = build_model(corpus, seed=0, qk_norm="flat").layers[0].attn
    with pytest.raises(ValueError, match="qk_norm='flat'"):
        qk_clip_(attn, torch.full((attn.num_heads,), 500.0), 100.0)
