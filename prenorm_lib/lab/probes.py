"""Measurements taken inside a model: gradient norms, residual-stream norms, dead units.

Used by notebooks 02 (dead ReLU units) and 04 (Xiong et al. 2020: how pre-norm and
post-norm shape gradients and the residual stream at initialisation; what Adam's first
update does to each; how large the attention logits grow). Every probe leaves the model
as it found it: no parameter, gradient or hook is changed afterwards.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from prenorm_lib import functional, validation
from prenorm_lib.attention import MultiHeadSelfAttention
from prenorm_lib.ffn import FeedForward, GatedFeedForward
from prenorm_lib.lab.data import Corpus, generate_sentences


def next_token_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the model's logits for ``x`` (B, T) against targets ``y`` (B, T)."""
    logits = model(x)  # (B, T, vocab_size)
    return nn.functional.cross_entropy(logits.flatten(0, -2), y.flatten())


def layer_name(parameter_name: str) -> str:
    """The layer a parameter belongs to: "layers.3.attn.q_proj.weight" → "layers.3".

    Parameters outside the block stack keep their top-level module's name
    ("token_embeddings", "ln_final", "lm_head").
    """
    parts = parameter_name.split(".")
    if parts[0] == "layers" and len(parts) > 1:
        return f"layers.{parts[1]}"
    return parts[0]


def gradient_norms_by_layer(model: nn.Module) -> dict[str, float]:
    """L2 norm of the gradients currently stored in ``.grad``, one total per layer."""
    squares: dict[str, float] = {}
    for name, parameter in model.named_parameters():
        if parameter.grad is not None:
            key = layer_name(name)
            squares[key] = squares.get(key, 0.0) + parameter.grad.detach().float().pow(2).sum().item()
    return {key: math.sqrt(value) for key, value in squares.items()}


def _gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """d loss / d parameter for one batch, without touching ``.grad`` (torch.autograd.grad)."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    loss = next_token_loss(model, x, y)
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    return {name: (torch.zeros_like(p) if g is None else g) for (name, p), g in zip(named, grads, strict=True)}


def grad_norms_at_init(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Gradient norm of every parameter for one batch ``(x, y)``; no optimizer involved.

    Called on a freshly built model it measures the gradients at initialisation, the
    quantity Xiong et al. (2020) analyse. The model's ``.grad`` fields are not modified.
    """
    return {name: g.norm().item() for name, g in _gradients(model, x, y).items()}


def expected_ffn_grad_norms(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]
                            ) -> dict[str, list[float]]:
    """Per FFN matrix and block, the Frobenius norm of the gradient *averaged over* ``batches``.

    This is the quantity of Xiong et al.'s Fig. 3 (§3.4: they "calculate their expected
    gradients" over mini-batches, per weight matrix). One batch's gradient is the expected
    gradient plus that batch's noise, and the noise adds to the norm without cancelling; the
    mean over batches removes most of it. ``batches`` yields ``(x, y)`` pairs of (B, T)
    token ids. The result maps ``"w1"``, ``"w2"`` (and ``"w3"`` for a gated FFN) to one
    norm per block, input side first.
    """
    _check_stack(model)
    sums: dict[str, torch.Tensor] = {}
    count = 0
    for x, y in batches:
        for name, g in _gradients(model, x, y).items():
            if ".ffn." in name:
                sums[name] = sums[name] + g if name in sums else g.clone()
        count += 1
    if count == 0:
        raise ValueError("batches must hold at least one (x, y) pair, got none")
    norms: dict[str, list[float]] = {}
    for i in range(len(model.layers)):
        for matrix in ("w1", "w2", "w3"):
            name = f"layers.{i}.ffn.{matrix}.weight"
            if name in sums:
                norms.setdefault(matrix, []).append((sums[name] / count).norm().item())
    return norms


def expected_grad_norms_by_layer(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]
                                 ) -> dict[str, float]:
    """Per layer (as :func:`layer_name` groups the parameters), the norm of the gradient averaged over ``batches``.

    The layer-level version of :func:`expected_ffn_grad_norms`: all of a block's parameters
    together, the quantity Mix-LN (Li et al. 2024) plot per layer, with the batches' noise
    averaged out. ``.grad`` is not touched.
    """
    sums: dict[str, torch.Tensor] = {}
    count = 0
    for x, y in batches:
        for name, g in _gradients(model, x, y).items():
            sums[name] = sums[name] + g if name in sums else g.clone()
        count += 1
    if count == 0:
        raise ValueError("batches must hold at least one (x, y) pair, got none")
    squares: dict[str, float] = {}
    for name, total in sums.items():
        key = layer_name(name)
        squares[key] = squares.get(key, 0.0) + (total / count).pow(2).sum().item()
    return {key: math.sqrt(value) for key, value in squares.items()}


def ffn_grad_norms_by_layer(model: nn.Module, x: torch.Tensor, y: torch.Tensor, weight: str = "all") -> list[float]:
    """Per block, the norm of the gradient of its feed-forward weights (Xiong et al. Fig. 3).

    ``weight="all"`` takes the norm over all of the block's FFN matrices together (w1, w2,
    and w3 for SwiGLU); ``weight="w1"`` or ``"w2"`` picks one matrix, as in the paper's
    per-matrix panels. Index i of the result is block i (input side first).
    """
    validation.choice("weight", weight, ("all", "w1", "w2", "w3"))
    gradients = _gradients(model, x, y)
    norms = []
    for i in range(len(model.layers)):
        prefix = f"layers.{i}.ffn."
        selected = [
            g for name, g in gradients.items()
            if name.startswith(prefix) and (weight == "all" or name == f"{prefix}{weight}.weight")
        ]
        if not selected:
            raise ValueError(f"block {i} has no FFN weight {weight!r}")
        norms.append(math.sqrt(sum(g.pow(2).sum().item() for g in selected)))
    return norms


def _check_stack(model: nn.Module, name: str = "model") -> None:
    if not (hasattr(model, "token_embeddings") and hasattr(model, "layers")):
        raise TypeError(
            f"{name} must have .token_embeddings and .layers like TransformerLM, got {type(model).__name__}"
        )


@contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode without gradients while active; the model's train/eval mode is restored on
    exit, even on error (the course's models have no dropout, so this is bookkeeping)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


@contextmanager
def hooks(modules: Iterable[nn.Module], hook, pre: bool = False) -> Iterator[None]:
    """While active, ``hook`` runs on every forward pass of each module (before it, if ``pre``).

    A forward hook is called as ``hook(module, args, output)``, a pre-hook as
    ``hook(module, args)``. Hooks are removed on exit, even on error.
    """
    register = "register_forward_pre_hook" if pre else "register_forward_hook"
    handles = [getattr(module, register)(hook) for module in modules]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def recording_residual_norms(model: nn.Module) -> Iterator[list[float]]:
    """While active, every forward pass appends the residual stream's mean squared norm.

    Yields a list that a forward pass fills with L + 1 numbers: after the embedding
    (depth 0) and after each of the L blocks. Hooks are removed on exit, even on error.
    """
    _check_stack(model)
    norms: list[float] = []

    def record(_module, _inputs, output):
        norms.append(output.detach().float().pow(2).sum(-1).mean().item())

    with hooks([model.token_embeddings, *model.layers], record):
        yield norms


def residual_norms(model: nn.Module, token_ids: torch.Tensor) -> list[float]:
    """Mean squared L2 norm of the residual stream at depths 0 … L for ``token_ids``.

    Mean over batch and positions of ‖x_t‖². Xiong et al.'s Lemma 2: at initialisation a
    pre-norm stream's squared norm grows about linearly with depth (each block adds to
    it), while a post-norm block renormalises its output, so the norm stays ≈ d_model.
    """
    with torch.no_grad(), recording_residual_norms(model) as norms:
        model(token_ids)
    return norms


def hidden_state_stats(model: nn.Module, token_ids: torch.Tensor) -> dict[str, list[float]]:
    """Per depth 0 … L (after the embedding, then after each block), two sizes of the hidden state.

    ``"variance"``: the variance of each token's hidden state over its d_model channels,
    averaged over the tokens of ``token_ids`` — the quantity whose growth with depth Peri-LN
    (Kim et al. 2025) follow for pre-, post- and peri-norm; ``"max_abs"``: its largest entry
    in absolute value, where "massive activations" would show. Eval mode, no gradients.
    """
    _check_stack(model)
    stats: dict[str, list[float]] = {"variance": [], "max_abs": []}

    def record(_module, _inputs, out):
        out = out.detach().float()
        stats["variance"].append(out.var(dim=-1, unbiased=False).mean().item())
        stats["max_abs"].append(out.abs().amax().item())

    with evaluating(model), hooks([model.token_embeddings, *model.layers], record):
        model(token_ids.to(_device_of(model)))
    return stats


def stream_gradient_norms(model: nn.Module, x: torch.Tensor, y: torch.Tensor, sublayers: bool = False) -> list[float]:
    """‖∂loss/∂x_l‖ for the residual stream at depths 0 … L (embedding, then each block's output).

    The norm runs over the whole batch. Read from the top down, it shows how the gradient
    grows or shrinks on its way through each block. With ``sublayers=True`` (post-norm
    blocks only, whose stream between the two sub-layers is ``ln1``'s output) the list has
    2L + 1 entries: x_0, then after each block's attention sub-layer and after the block.
    ``.grad`` is not touched.
    """
    _check_stack(model)
    modules = [model.token_embeddings]
    for i, layer in enumerate(model.layers):
        if sublayers:
            if getattr(layer, "norm", None) != "post":
                raise ValueError(f"sublayers=True needs post-norm blocks, but layers.{i} has "
                                 f"norm={getattr(layer, 'norm', None)!r}")
            modules.append(layer.ln1)
        modules.append(layer)
    outputs: list[torch.Tensor] = []
    with hooks(modules, lambda _m, _i, out: outputs.append(out)):
        loss = next_token_loss(model, x, y)
    return [g.norm().item() for g in torch.autograd.grad(loss, outputs)]


def shared_fraction_by_depth(model: nn.Module, token_ids: torch.Tensor) -> list[float]:
    """Per depth 0 … L, the share of the residual stream's energy that all positions have in common.

    For each sequence, the stream x_t (t = 1 … T) splits into its mean over positions x̄ and
    the rest; the share is T·‖x̄‖² / Σ_t ‖x_t‖² (summed over the batch): 0 when the positions
    cancel out, 1 when every position carries the same vector. Causal attention averages
    positions, so it adds most to a stream whose positions agree.
    """
    _check_stack(model)
    shares: list[float] = []

    def record(_module, _inputs, out):
        mean = out.detach().float().mean(dim=-2, keepdim=True)  # (..., 1, d_model)
        shares.append((mean.pow(2).sum() * out.shape[-2] / out.detach().float().pow(2).sum()).item())

    with torch.no_grad(), hooks([model.token_embeddings, *model.layers], record):
        model(token_ids)
    return shares


def branch_gains(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, list[float]]:
    """How much each residual branch amplifies the signal forwards and the gradient backwards.

    For the attention and FFN branch F of every block, with u its input and g the gradient
    of the loss at its output: ``"<branch>_forward"`` is ‖F(u)‖² / ‖u‖² and
    ``"<branch>_backward"`` is ‖J_Fᵀ g‖² / ‖g‖², J_F the branch's Jacobian (one entry per
    block, input side first). A ReLU branch W₂(m ⊙ W₁u) has the Jacobian W₂(m ⊙ W₁·), the
    same map with the same mask, so its two gains match. SwiGLU multiplies two linear maps
    of u; by the product rule its Jacobian has two terms, each about as large as the
    output, so it passes back about twice what it adds.
    """
    _check_stack(model)
    branches: list[tuple[str, torch.Tensor, torch.Tensor]] = []

    def record(module, args, out):
        branches.append(("attn" if isinstance(module, MultiHeadSelfAttention) else "ffn", args[0], out))

    with hooks([m for layer in model.layers for m in (layer.attn, layer.ffn)], record):
        loss = next_token_loss(model, x, y)
    grads_out = torch.autograd.grad(loss, [out for _, _, out in branches], retain_graph=True)
    gains: dict[str, list[float]] = {"attn_forward": [], "attn_backward": [], "ffn_forward": [], "ffn_backward": []}
    for (kind, u, out), g in zip(branches, grads_out, strict=True):
        (g_in,) = torch.autograd.grad(out, u, grad_outputs=g, retain_graph=True)
        gains[f"{kind}_forward"].append((out.pow(2).sum() / u.pow(2).sum()).item())
        gains[f"{kind}_backward"].append((g_in.pow(2).sum() / g.pow(2).sum()).item())
    return gains


def adam_first_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float) -> dict:
    """What one Adam update at learning rate ``lr`` does to ``model`` (undone before returning).

    Adam divides each gradient by its own running size, so its first update moves every
    weight by about ``lr`` whatever the gradient's scale. Returned:

    - ``"gradient"``: per layer (as :func:`layer_name` groups them), ‖∂loss/∂W‖;
    - ``"update_ratio"``: per layer, ‖ΔW‖ / ‖W‖;
    - ``"output_change"``: ‖Δh‖ / ‖h‖ for h the input of ``lm_head`` (the final
      representation, which every placement normalises to the same scale) on batch ``x``:
      how far one update of this size moves what the model computes.
    """
    validation.positive_float("lr", lr)
    _check_stack(model)
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    before = [p.detach().clone() for _, p in named]
    grads_before = [p.grad for _, p in named]
    captured: list[torch.Tensor] = []
    try:
        for _, p in named:
            p.grad = None
        with hooks([model.lm_head], lambda _m, args: captured.append(args[0].detach()), pre=True):
            next_token_loss(model, x, y).backward()
            gradient = gradient_norms_by_layer(model)
            torch.optim.Adam([p for _, p in named], lr=lr).step()
            with torch.no_grad():
                model(x)
        change: dict[str, float] = {}
        size: dict[str, float] = {}
        for (name, p), old in zip(named, before, strict=True):
            key = layer_name(name)
            change[key] = change.get(key, 0.0) + (p.detach() - old).pow(2).sum().item()
            size[key] = size.get(key, 0.0) + old.pow(2).sum().item()
    finally:
        with torch.no_grad():
            for (_, p), old, grad in zip(named, before, grads_before, strict=True):
                p.copy_(old)
                p.grad = grad
    h_before, h_after = captured
    return {
        "gradient": gradient,
        "update_ratio": {key: math.sqrt(change[key] / size[key]) for key in change},
        "output_change": ((h_after - h_before).norm() / h_before.norm()).item(),
    }


def _device_of(model: nn.Module) -> torch.device:
    """Where the model's parameters live (PRENORM_DEVICE may have put them on a GPU)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def max_attention_logit(model: nn.Module, token_ids: torch.Tensor) -> float:
    """The largest |q·k/√d_head| over every layer, head and causally visible pair, for ``token_ids``.

    Wortsman et al. (2023) follow this number: without QK-norm it grows with the learning
    rate until the softmax collapses onto one key.
    """
    _check_stack(model)
    largest: list[float] = []

    def record(attn, args):
        logits = attn.attention_logits(*args)  # (..., H, T, T)
        visible = functional.causal_mask(logits.shape[-1], device=logits.device)  # (T, T)
        largest.append(logits.abs().masked_fill(~visible, 0).amax().item())

    with evaluating(model), hooks([layer.attn for layer in model.layers], record, pre=True):
        model(token_ids.to(_device_of(model)))
    return max(largest)


def head_max_logits(attn: MultiHeadSelfAttention, x: torch.Tensor,
                    token_positions: torch.Tensor | None = None) -> torch.Tensor:
    """Per head, the largest score q·k/√d_head over the batch and every causally visible pair: (num_heads,).

    Signed, as Kimi K2 (arXiv 2507.20534, §2.1) define S_max^h: the largest input to that head's
    softmax in the batch. ``x`` is what ``attn`` reads, (..., T, d_model); QK-clip
    (:class:`prenorm_lib.lab.train.TrainConfig` ``qk_clip``) rescales the head's W_q and W_k
    when this passes its threshold.
    """
    with torch.no_grad():
        logits = attn.attention_logits(x, token_positions)  # (..., H, T, T)
        visible = functional.causal_mask(logits.shape[-1], device=logits.device)  # (T, T)
        logits = logits.masked_fill(~visible, -math.inf)
        return logits.movedim(-3, 0).flatten(1).amax(dim=1)  # (H,)


def output_logit_stats(model: nn.Module, token_ids: torch.Tensor) -> dict[str, float]:
    """Two sizes of the output logits for ``token_ids``: what z-loss and final soft-capping act on.

    ``"log_z"``: the mean over positions of |log Z|, Z = Σ_v exp(logit_v) the output softmax's
    normaliser, which PaLM's z-loss pulls towards 0; ``"max_logit"``: the largest |logit|, which
    Gemma 2's final soft-capping keeps below its cap. Eval mode, no gradients.
    """
    with evaluating(model):
        logits = model(token_ids.to(_device_of(model))).float()  # (B, T, vocab_size)
    return {"log_z": torch.logsumexp(logits, dim=-1).abs().mean().item(), "max_logit": logits.abs().amax().item()}


def _hidden_activations(ffn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The hidden layer of a feed-forward network, (..., d_ff): what its second matrix reads.

    ``hidden`` uses the from-scratch activations of :mod:`prenorm_lib.functional`; the
    forward pass may use torch's fused ones, equal up to float rounding (~1e-7). The exact
    zeros counted here are the same in both: a ReLU gives 0 either way.
    """
    if isinstance(ffn, GatedFeedForward | FeedForward):
        return ffn.hidden(x)
    raise TypeError(f"model_or_ffn must be a TransformerLM, SwiGLU or FeedForward, got {type(ffn).__name__}")


def _dead_counts(ffn: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    hidden = _hidden_activations(ffn, x).reshape(-1, ffn.d_ff)  # (positions, d_ff)
    dead = (hidden == 0).all(dim=0)  # (d_ff,)
    return int(dead.sum()), dead.numel()


def dead_relu_fraction(model_or_ffn: nn.Module, x: torch.Tensor) -> float:
    """Fraction of FFN hidden units that output exactly zero at every position of ``x``.

    For a feed-forward module ``x`` is its input (..., d_model); for a TransformerLM ``x``
    is a batch of token ids and the count runs over the FFNs of all blocks, each seeing
    the input its block gives it. Only a ReLU (in ReLU's FFN or ReGLU's gate) outputs exact
    zeros over a whole batch: SiLU, SwiGLU and GEGLU units are never dead in this sense.
    """
    validation.tensor("x", x)
    with torch.no_grad():
        if isinstance(model_or_ffn, GatedFeedForward | FeedForward):
            dead, total = _dead_counts(model_or_ffn, x)
            return dead / total
        _check_stack(model_or_ffn, "model_or_ffn (a TransformerLM, SwiGLU or FeedForward)")
        ffn_inputs: list[tuple[nn.Module, torch.Tensor]] = []
        with hooks([layer.ffn for layer in model_or_ffn.layers],
                   lambda module, args: ffn_inputs.append((module, args[0])), pre=True):
            model_or_ffn(x)
        counts = [_dead_counts(ffn, ffn_input) for ffn, ffn_input in ffn_inputs]
    return sum(d for d, _ in counts) / sum(t for _, t in counts)


@functools.lru_cache(maxsize=16)
def _agreement_items(
    n_sentences: int, seed: int, attractors_only: bool
) -> tuple[tuple[tuple[str, ...], str, str], ...]:
    """The probe's sentences as (words before the main verb, correct form, wrong form).

    Cached: a training run probes at every evaluation, and drawing the sentences (up to
    eight times as many as kept, for attractors) costs more than the model's forward pass.
    """
    items = []
    for sentence in generate_sentences(n_sentences * (8 if attractors_only else 1), seed):
        verb = next(a for a in sentence.agreements if a.position == sentence.main_verb)
        if attractors_only and not verb.attractor:
            continue
        items.append((tuple(sentence.words[: verb.position]), verb.correct, verb.wrong))
        if len(items) == n_sentences:
            break
    return tuple(items)


def agreement_accuracy(
    model: nn.Module, corpus: Corpus, n_sentences: int = 256, seed: int = 12345, attractors_only: bool = False
) -> float:
    """How often the model prefers the correctly agreeing main verb (sees vs see, is vs are).

    For fresh sentences from the corpus grammar, the model reads ``<eos>`` and the words
    before the main verb; it scores a hit when its logit for the correct form beats the
    logit for the same verb in the other number (Linzen et al. 2016's test). Chance is
    0.5. ``attractors_only`` keeps only sentences where a noun of the other number stands
    between the subject and the verb — the cases that need attention to the right word,
    not to the nearest one.
    """
    validation.positive_int("n_sentences", n_sentences)
    tokenizer = corpus.tokenizer
    rows, correct_ids, wrong_ids, last = [], [], [], []
    for prefix_words, correct, wrong in _agreement_items(n_sentences, seed, attractors_only):
        prefix = [tokenizer.eos_id, *tokenizer.encode(" ".join(prefix_words))]
        rows.append(prefix)
        last.append(len(prefix) - 1)
        correct_ids.append(tokenizer.word_to_id[correct])
        wrong_ids.append(tokenizer.word_to_id[wrong])
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), tokenizer.eos_id, dtype=torch.long)  # right padding: causal
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
    with evaluating(model):
        logits = model(ids.to(_device_of(model))).cpu()  # (N, width, vocab_size)
    at_verb = logits[torch.arange(len(rows)), torch.tensor(last)]  # (N, vocab_size)
    hits = at_verb[torch.arange(len(rows)), torch.tensor(correct_ids)] > at_verb[
        torch.arange(len(rows)), torch.tensor(wrong_ids)
    ]
    return hits.float().mean().item()
