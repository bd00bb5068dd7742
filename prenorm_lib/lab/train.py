"""The one training loop of the course, sized to run an experiment in seconds on one core.

Used by notebooks 02, 03 and 05 to compare feed-forward networks (on the Python docs' prose of
:mod:`prenorm_lib.lab.prose`), positional encodings and norm placements (on the grammar
corpus of :mod:`prenorm_lib.lab.data`). The loop is the standard
recipe of the CS336 handout and of GPT-style training: AdamW, linear warmup then cosine
decay, gradient clipping. Two things are course-specific:

- a run that blows up is an *outcome*, not an error: the loop stops and records
  ``diverged_at`` (an exploding post-norm grid cell is something to look at, not a
  traceback);
- it records what the notebooks plot — training and held-out losses, and whatever an
  ``on_eval`` probe measures at each evaluation — and, on request
  (``record_norms_every``), per-layer gradient norms and the residual stream's norm at
  every depth, for a learner who wants to watch them during training.

Two stabilisers of large runs are options of the loop, both off by default (notebook 05's
frontier sweep switches them on): ``z_loss`` adds PaLM's and OLMo 2's auxiliary loss
z_loss · log²Z on the output softmax (:func:`training_loss`), and ``qk_clip`` is Kimi K2's
QK-Clip, which rescales a head's W_q and W_k after an update whenever that head's largest
attention logit passed the threshold (:func:`qk_clip_`).

Same seeds, same history, bit for bit (on one thread; :func:`prenorm_lib.setup` sets it).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from prenorm_lib import validation
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.config import ModelConfig
from prenorm_lib.ffn import default_hidden_dim
from prenorm_lib.lab.data import VOCABULARY, Corpus, get_batch
from prenorm_lib.lab.probes import (
    evaluating,
    gradient_norms_by_layer,
    head_max_logits,
    hooks,
    next_token_loss,
    recording_residual_norms,
)
from prenorm_lib.model import TransformerLM

VAL_BATCH_SEED = 2020  # every run is scored on the same validation windows

# The one setting that moves training onto a GPU: PRENORM_DEVICE=cuda (NVIDIA) or mps (Apple
# silicon); unset or "cpu", everything runs on the CPU (the notebooks' stored outputs are CPU runs).
DEVICE_ENV = "PRENORM_DEVICE"
DEVICES = ("cpu", "cuda", "mps")


def default_device() -> torch.device:
    """The device models are trained on: ``$PRENORM_DEVICE`` (cpu, cuda, cuda:N or mps), cpu when unset.

    Raises ValueError for another name and RuntimeError when the device is named but this torch
    cannot use it (a CPU-only build, no GPU), saying what to do instead of silently using the CPU.
    """
    name = os.environ.get(DEVICE_ENV, "").strip().lower() or "cpu"
    kind, _, index = name.partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise ValueError(f"{DEVICE_ENV} must be one of {', '.join(DEVICES)} (or cuda:N), got {name!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{DEVICE_ENV}={name}, but this torch ({torch.__version__}) sees no CUDA GPU: "
                           f"install a CUDA build of torch, or unset {DEVICE_ENV} to train on the CPU")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"{DEVICE_ENV}={name}, but this torch ({torch.__version__}) cannot use Apple's MPS "
                           f"(it needs an Apple-silicon Mac): unset {DEVICE_ENV} to train on the CPU")
    return torch.device(name)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a run besides the model. ``grad_clip=None`` turns clipping off.

    ``z_loss`` (a coefficient, e.g. PaLM's and OLMo 2's 1e-4) adds z_loss · mean(log²Z) to the
    training loss, Z the output softmax's normaliser; ``qk_clip`` (a threshold τ, Kimi K2's
    100) rescales each attention head's W_q and W_k by √min(1, τ/S_max) after every update,
    S_max that head's largest logit on the update's batch. None turns either off.
    """

    steps: int = 200
    batch_size: int = 16
    context_length: int = 32
    lr: float = 3e-3
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float | None = 1.0
    eval_every: int = 25
    eval_batches: int = 4
    seed: int = 0
    divergence_factor: float = 3.0
    record_norms_every: int | None = None  # None: record no norms during training
    z_loss: float | None = None  # None: no z-loss
    qk_clip: float | None = None  # None: no QK-clip

    def __post_init__(self):
        for name in ("steps", "batch_size", "context_length", "eval_every", "eval_batches"):
            validation.positive_int(name, getattr(self, name))
        if self.record_norms_every is not None:
            validation.positive_int("record_norms_every", self.record_norms_every)
        validation.positive_float("lr", self.lr)
        validation.positive_float("divergence_factor", self.divergence_factor)
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an int >= 0, got {self.warmup_steps!r}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.grad_clip is not None:
            validation.positive_float("grad_clip", self.grad_clip)
        for name in ("z_loss", "qk_clip"):
            if getattr(self, name) is not None:
                validation.positive_float(name, getattr(self, name))


def lr_at(step: int, config: TrainConfig) -> float:
    """Learning rate for update number ``step`` (1 … steps); ``lr_at(0)`` is the warmup's start.

    Linear warmup from 0 to ``lr`` over ``warmup_steps``, then a half cosine down to
    ``min_lr_ratio · lr`` at ``steps``, flat after that (the CS336 schedule).
    """
    if step < config.warmup_steps:
        return config.lr * step / config.warmup_steps
    min_lr = config.min_lr_ratio * config.lr
    if step >= config.steps:
        return min_lr
    progress = (step - config.warmup_steps) / (config.steps - config.warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (config.lr - min_lr)


@dataclass
class History:
    """What one run recorded. Steps count updates: step s is "after s updates".

    ``train_loss[s - 1]`` is the loss of the batch used for update s (before it; the
    cross-entropy alone, without a z-loss term); ``learning_rates``, ``total_grad_norm``
    (before clipping) and, with QK-clip, ``qk_clipped`` (how many heads it rescaled) are per
    update too.
    ``grad_norms`` maps each layer ("token_embeddings", "layers.0", …, "lm_head") to its
    gradient norm before clipping at the updates in ``norm_steps``; ``residual_norms``
    holds, for the same updates, the mean squared norm of the residual stream at depths
    0 … L (embedding, then after each block) of that update's forward pass. ``metrics``
    holds what an ``on_eval`` probe measured, one value per entry of ``val_steps``.
    """

    train_loss: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    learning_rates: list[float] = field(default_factory=list)
    total_grad_norm: list[float] = field(default_factory=list)
    norm_steps: list[int] = field(default_factory=list)
    grad_norms: dict[str, list[float]] = field(default_factory=dict)
    residual_norms: list[list[float]] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    qk_clipped: list[int] = field(default_factory=list)
    diverged_at: int | None = None
    seconds: float = 0.0

    @property
    def final_val_loss(self) -> float:
        """Validation loss after the last update; nan if the run diverged."""
        if self.diverged_at is not None or not self.val_loss:
            return math.nan
        return self.val_loss[-1]



ADAM_EPS = 1e-8  # torch's AdamW default, the ε of every parameter outside a depth parametrisation's blocks


def _parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices only: shrinking a norm's gain or nothing else is not regularisation.

    Under a depth parametrisation (``ModelConfig.residual_scaling``: depth-μP, CompleteP) the
    blocks' parameters get their own groups, with Adam's learning rate times
    ``config.hidden_lr_scale`` (``lr_scale``, applied by :func:`train` at every update) and ε
    times ``config.hidden_eps_scale`` — the optimizer half of Dey et al.'s rules, as their
    reference code applies them; embeddings, final norm and head keep the base values.
    """
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    config = getattr(model, "config", None)
    if not isinstance(config, ModelConfig) or config.residual_scaling == "none":
        return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    in_blocks = {id(p) for p in model.layers.parameters()}
    groups = []
    for params, decayed in ((decay, weight_decay), (no_decay, 0.0)):
        groups.append({"params": [p for p in params if id(p) not in in_blocks], "weight_decay": decayed})
        groups.append({"params": [p for p in params if id(p) in in_blocks], "weight_decay": decayed,
                       "lr_scale": config.hidden_lr_scale, "eps": ADAM_EPS * config.hidden_eps_scale})
    return [group for group in groups if group["params"]]


def _validation_batches(corpus: Corpus, config: TrainConfig) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(VAL_BATCH_SEED)
    return [
        get_batch(corpus.val_ids, config.batch_size, config.context_length, generator)
        for _ in range(config.eval_batches)
    ]


def model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters live; batches are moved there (CPU for a parameterless model)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def evaluate(model: nn.Module, batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean next-token loss over ``batches`` in eval mode, without gradients."""
    device = model_device(model)
    with evaluating(model):
        return sum(next_token_loss(model, x.to(device), y.to(device)).item() for x, y in batches) / len(batches)


def loss_by_position(model: nn.Module, ids: torch.Tensor, context_length: int, windows: int = 256,
                     seed: int = VAL_BATCH_SEED) -> torch.Tensor:
    """Mean next-token loss at each position 0 … context_length − 1: shape (context_length,).

    Scores ``windows`` windows of ``ids`` (drawn with ``seed``, so every model reads the
    same text) in eval mode. Position t predicts token t + 1 having read t + 1 tokens, so
    the curve falls while the context fills; where the model has never been trained
    (beyond its training length) it shows whether positions still work.
    """
    validation.positive_int("windows", windows)
    x, y = get_batch(ids, windows, context_length, torch.Generator().manual_seed(seed))
    device = model_device(model)
    with evaluating(model):
        logits = model(x.to(device))  # (windows, T, vocab_size)
        losses = nn.functional.cross_entropy(logits.transpose(1, 2), y.to(device), reduction="none")  # (windows, T)
    return losses.mean(dim=0).cpu()  # (T,)


def training_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                  z_loss: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(the loss to minimise, its cross-entropy part) for a batch ``x``, ``y`` of (B, T) token ids.

    Without ``z_loss`` both are the next-token cross-entropy. With it, the first adds
    z_loss · mean over positions of (log Z)², Z = Σ_v exp(logit_v) the output softmax's
    normaliser: PaLM's auxiliary loss (Chowdhery et al. 2022, §5: "z_loss = 10⁻⁴ · log² Z"),
    which OLMo 2 uses too (§3.3.3); it pulls log Z towards 0 and so keeps the output logits
    from drifting to large values, which the cross-entropy alone does not care about.
    """
    if z_loss is None:
        loss = next_token_loss(model, x, y)
        return loss, loss
    logits = model(x)  # (B, T, vocab_size)
    cross_entropy = nn.functional.cross_entropy(logits.flatten(0, -2), y.flatten())
    log_z = torch.logsumexp(logits.float(), dim=-1)  # (B, T)
    return cross_entropy + z_loss * log_z.pow(2).mean(), cross_entropy


def _attention_modules(model: nn.Module) -> list[nn.Module]:
    return [module for module in model.modules() if isinstance(module, MultiHeadSelfAttention)]


def qk_clip_(attn: MultiHeadSelfAttention, s_max: torch.Tensor, tau: float) -> int:
    """Kimi K2's per-head QK-Clip, in place: head h's rows of W_q and W_k times √min(1, τ/S_max^h).

    Kimi K2 (arXiv 2507.20534, §2.1) rescale W_q^h by γ_h^α and W_k^h by γ_h^(1−α), with
    γ_h = min(1, τ/S_max^h) and α = 0.5, after the optimizer's update, S_max^h the head's
    largest logit in that step's forward pass (``s_max``, (num_heads,), from
    :func:`prenorm_lib.lab.probes.head_max_logits`): a logit q·k is bilinear in the two
    matrices, so the same inputs would now give at most τ. The forward and backward pass of
    the step itself are unchanged. Returns how many heads were rescaled. A QK-norm would undo
    the rescaling, so it is refused.
    """
    if attn.qk_norm is not None:
        raise ValueError(f"qk_clip rescales W_q and W_k, which qk_norm={attn.qk_norm!r} normalises away: "
                         "use one or the other")
    gamma = (tau / s_max).clamp(max=1.0)  # (H,)
    if not (gamma < 1).any():
        return 0
    scale = gamma.sqrt().repeat_interleave(attn.d_head).unsqueeze(-1)  # (H·d_head, 1): the rows of each head
    with torch.no_grad():
        attn.q_proj.weight.mul_(scale.to(attn.q_proj.weight.dtype))
        attn.k_proj.weight.mul_(scale.to(attn.k_proj.weight.dtype))
    return int((gamma < 1).sum())


def _has_diverged(loss: float, initial_loss: float | None, factor: float) -> bool:
    if not math.isfinite(loss):
        return True
    return initial_loss is not None and loss > factor * initial_loss


def train(
    model: nn.Module,
    corpus: Corpus,
    config: TrainConfig | None = None,
    progress: bool = True,
    on_eval: Callable[[nn.Module], dict[str, float]] | None = None,
) -> History:
    """Train ``model`` on ``corpus`` in place and return what happened.

    The run stops early, recording ``diverged_at``, when a loss is inf/NaN or exceeds
    ``divergence_factor`` × the first step's loss; it never raises for that. Batches are
    drawn from a generator seeded with ``config.seed`` (on the CPU, so the batch order is
    the same on every device) and moved to the model's device; validation windows are the
    same for every run. ``on_eval(model)``, if given, runs at every evaluation (step 0
    included) and returns named numbers, recorded in ``history.metrics`` — e.g. the
    agreement accuracy over training.
    """
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not isinstance(corpus, Corpus):
        raise TypeError(f"corpus must be a Corpus (see prenorm_lib.lab.data.make_corpus), got {type(corpus).__name__}")
    if on_eval is not None and not callable(on_eval):
        raise TypeError(f"on_eval must be a function model -> dict of numbers, got {type(on_eval).__name__}")
    history = History()
    device = model_device(model)
    generator = torch.Generator().manual_seed(config.seed)
    val_batches = _validation_batches(corpus, config)
    optimizer = torch.optim.AdamW(
        _parameter_groups(model, config.weight_decay), lr=lr_at(0, config), betas=config.betas, eps=ADAM_EPS,
        foreach=True,  # one fused update over all tensors: on CPU a quarter cheaper than the loop
    )
    max_norm = math.inf if config.grad_clip is None else config.grad_clip
    attention = _attention_modules(model) if config.qk_clip is not None else []
    for attn in attention:
        if attn.qk_norm is not None:
            raise ValueError(f"qk_clip={config.qk_clip} rescales W_q and W_k, which the model's "
                             f"qk_norm={attn.qk_norm!r} normalises away: use one or the other")
    attention_inputs: list[tuple[MultiHeadSelfAttention, torch.Tensor]] = []
    initial_loss = None
    model.train()
    start = time.perf_counter()
    history.val_steps.append(0)
    history.val_loss.append(evaluate(model, val_batches))
    _record_metrics(history, model, on_eval)
    bar = tqdm(total=config.steps, disable=not progress, desc="training", leave=False)
    for step in range(1, config.steps + 1):
        lr = lr_at(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # a depth parametrisation scales its blocks' rate
        x, y = get_batch(corpus.train_ids, config.batch_size, config.context_length, generator)
        x, y = x.to(device), y.to(device)
        every = config.record_norms_every
        record_norms = every is not None and (step % every == 0 or step == 1)
        attention_inputs.clear()
        with hooks(attention, lambda attn, args: attention_inputs.append((attn, args[0].detach())), pre=True):
            if record_norms:
                with recording_residual_norms(model) as depth_norms:
                    loss, cross_entropy = training_loss(model, x, y, config.z_loss)
            else:
                loss, cross_entropy = training_loss(model, x, y, config.z_loss)
        loss_value = cross_entropy.item()
        if _has_diverged(loss_value, initial_loss, config.divergence_factor):
            history.diverged_at = step
            break
        initial_loss = loss_value if initial_loss is None else initial_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if record_norms:
            history.norm_steps.append(step)
            for name, norm in gradient_norms_by_layer(model).items():
                history.grad_norms.setdefault(name, []).append(norm)
            history.residual_norms.append(depth_norms)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
        s_max = [(attn, head_max_logits(attn, inputs)) for attn, inputs in attention_inputs]  # this step's forward
        optimizer.step()
        if config.qk_clip is not None:
            history.qk_clipped.append(sum(qk_clip_(attn, heads, config.qk_clip) for attn, heads in s_max))
        history.train_loss.append(loss_value)
        history.learning_rates.append(lr)
        history.total_grad_norm.append(grad_norm)
        if step % config.eval_every == 0 or step == config.steps:
            val_loss = evaluate(model, val_batches)
            if not math.isfinite(val_loss):
                history.diverged_at = step
                break
            history.val_steps.append(step)
            history.val_loss.append(val_loss)
            _record_metrics(history, model, on_eval)
            bar.set_postfix(train=f"{loss_value:.3f}", val=f"{val_loss:.3f}", refresh=False)
        bar.update()
    bar.close()
    history.seconds = time.perf_counter() - start
    return history


def _record_metrics(history: History, model: nn.Module, on_eval) -> None:
    if on_eval is None:
        return
    for name, value in on_eval(model).items():
        history.metrics.setdefault(name, []).append(float(value))


def course_config(**overrides) -> ModelConfig:
    """The course's tiny model as a :class:`~prenorm_lib.config.ModelConfig`, with ``overrides`` applied.

    Defaults: the grammar's vocabulary, d_model 64, 2 layers, 4 heads, context 32, RoPE
    (θ = 10000), pre-norm, SwiGLU. Unless given, ``d_ff`` is the FFN kind's default
    (:func:`prenorm_lib.ffn.default_hidden_dim`: 192 for SwiGLU, 256 for ReLU/SiLU). Any
    field of ModelConfig may be overridden; another name is refused, naming the fields.
    """
    ModelConfig.check_names(overrides, "the course's model")
    config = dict(
        vocab_size=len(VOCABULARY), context_length=32, d_model=64, num_layers=2, num_heads=4,
        rope_theta=10000.0, norm="pre", ffn="swiglu",
    )
    config.update(overrides)
    if "d_ff" not in overrides:
        config["d_ff"] = default_hidden_dim(config["ffn"], config["d_model"])
    return ModelConfig(**config)


def model_config(**overrides) -> dict:
    """:func:`course_config` as the keyword arguments of ``TransformerLM`` (every field of the config)."""
    return course_config(**overrides).as_kwargs()


def build_model(corpus: Corpus, seed: int = 0, device: torch.device | str | None = None,
                **overrides) -> TransformerLM:
    """A TransformerLM for ``corpus``, initialised from ``seed`` without touching global RNG state.

    ``overrides`` are fields of :class:`~prenorm_lib.config.ModelConfig` (see :func:`course_config`).
    The weights are drawn on the CPU (the same model on every device), then moved to
    ``device`` (default :func:`default_device`: ``$PRENORM_DEVICE``, else the CPU).
    """
    config = course_config(**{"vocab_size": corpus.vocab_size, **overrides})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        # The keyword door (= from_config): a graded kernel that withholds TransformerLM keeps its signature
        model = TransformerLM(**config.as_kwargs())
    return model.to(default_device() if device is None else torch.device(device))



OUTCOMES = ("trains", "stalls", "diverges")
STALL_MARGIN = 0.1  # nats: a final loss within this of the unigram loss learnt only word frequencies


def outcome_of(run: History, unigram_loss: float) -> str:
    """"diverges" (the run stopped: inf/NaN or a loss blow-up), "stalls" (final loss within
    ``STALL_MARGIN`` of the unigram loss: nothing learnt beyond word frequencies) or "trains"."""
    if run.diverged_at is not None:
        return "diverges"
    return "stalls" if run.final_val_loss > unigram_loss - STALL_MARGIN else "trains"
