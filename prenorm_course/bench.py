"""``python -m prenorm_course.bench``: the library against torch's own ops, side by side.

Absolute times drift on shared machines, so every number reported is a ratio against a
reference measured in the same run, with the two interleaved repeat by repeat. Each
comparison first checks that both sides compute the same thing.

- TransformerBlock forward+backward vs the same block written with torch's fused ops
  (``F.rms_norm``, ``F.linear``, ``F.silu``, ``F.scaled_dot_product_attention``, complex
  multiplication for RoPE). Target: ratio ≤ 1.05.
- RoPE (elementwise, cached cos/sin) vs the explicit d×d rotation matrices, d_k = 128.
  Target: at least 2× faster.
- rms_norm vs ``torch.nn.functional.rms_norm``.
- The block under ``torch.compile`` vs Hugging Face's ``LlamaDecoderLayer`` under
  ``torch.compile``, same weights, forward+backward (the block compiles with no graph
  break: ``tests/model/test_compile.py``), and the compiled block against its eager self.
- RMSNorm vs LayerNorm, forward+backward, both built from the same elementary ops
  (``functional.rms_norm``, ``functional.layer_norm``): Zhang & Sennrich's comparison of
  the formulas. Beside it torch's own kernels, ``F.rms_norm`` and ``F.layer_norm``, which
  compare implementations. Reported as per-repeat ratios: median and interquartile range
  (the measurement itself lives in :mod:`prenorm_lib.lab.timing`, which notebook 01 uses).
- Every slider of the course: a move as a learner's kernel draws it (only what changed,
  :mod:`prenorm_lib.lab.blitting`) vs a full redraw of the same figure. Target: ≤ 100 ms
  a frame in the kernel (the page adds its own time on top: the browser tests measure it).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from prenorm_course import measurements
from prenorm_lib import functional
from prenorm_lib.block import TransformerBlock
from prenorm_lib.ffn import swiglu_hidden_dim
from prenorm_lib.lab.sliders import render_png
from prenorm_lib.lab.timing import PAPER_TIME_SAVED, bench_norms, bench_rope, interleaved_median, norm_ratios


class TorchReferenceBlock(torch.nn.Module):
    """The pre-norm SwiGLU/RoPE block written only with torch's own fused operations."""

    def __init__(self, block: TransformerBlock):
        super().__init__()
        self.block = block  # borrows the weights, so both compute the same function
        attn = block.attn
        d_head = attn.d_head
        inv_freq = 10000.0 ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        angles = torch.outer(torch.arange(attn.rope.max_seq_len, dtype=torch.float64), inv_freq)
        self.register_buffer("rotors", torch.polar(torch.ones_like(angles), angles).to(torch.complex64))

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())  # (B, H, T, d/2)
        return torch.view_as_real(pairs * self.rotors[: x.shape[-2]]).flatten(-2).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, attn, ffn = self.block, self.block.attn, self.block.ffn
        h = F.rms_norm(x, (x.shape[-1],), b.ln1.weight, b.ln1.eps)

        def heads(w):
            return F.linear(h, w).unflatten(-1, (attn.num_heads, attn.d_head)).transpose(1, 2)

        q, k, v = heads(attn.q_proj.weight), heads(attn.k_proj.weight), heads(attn.v_proj.weight)
        out = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
        x = x + F.linear(out.transpose(1, 2).flatten(-2), attn.output_proj.weight)
        h = F.rms_norm(x, (x.shape[-1],), b.ln2.weight, b.ln2.eps)
        gated = F.silu(F.linear(h, ffn.w1.weight)) * F.linear(h, ffn.w3.weight)
        return x + F.linear(gated, ffn.w2.weight)


def bench_block(batch: int, seq_len: int, d_model: int, num_heads: int, repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    block = TransformerBlock(d_model, num_heads, swiglu_hidden_dim(d_model), seq_len)
    reference = TorchReferenceBlock(block)
    x = torch.randn(batch, seq_len, d_model, requires_grad=True)
    torch.testing.assert_close(block(x), reference(x), atol=1e-4, rtol=1e-4)

    def step(module):
        def run():
            module(x).sum().backward()
            block.zero_grad(set_to_none=True)
            x.grad = None

        return run

    return interleaved_median({"library": step(block), "torch": step(reference)}, repeats)


class HuggingFaceLlamaLayer(torch.nn.Module):
    """Hugging Face's ``LlamaDecoderLayer`` holding a copy of a library block's weights.

    The same function as the block, written by someone else: Llama rotates the two halves
    of each head (``rotate_half``) where the library rotates adjacent pairs, so each
    head's query and key rows are reordered, evens then odds, as Hugging Face's own
    conversion of Meta's checkpoints does. Needs ``transformers`` (in requirements.txt).
    """

    def __init__(self, block: TransformerBlock):
        super().__init__()
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        attn, ffn = block.attn, block.ffn
        config = LlamaConfig(hidden_size=attn.d_model, intermediate_size=ffn.d_ff, num_attention_heads=attn.num_heads,
                             num_key_value_heads=attn.num_heads, rms_norm_eps=block.ln1.eps,
                             max_position_embeddings=attn.rope.max_seq_len, rope_theta=attn.rope.theta,
                             attention_bias=False, mlp_bias=False, attn_implementation="sdpa")
        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        self.rotary = LlamaRotaryEmbedding(config)
        halves = torch.cat([torch.arange(0, attn.d_head, 2), torch.arange(1, attn.d_head, 2)])
        rows = (torch.arange(attn.num_heads)[:, None] * attn.d_head + halves).flatten()
        hf = self.layer
        with torch.no_grad():
            for mine, theirs in ((attn.q_proj, hf.self_attn.q_proj), (attn.k_proj, hf.self_attn.k_proj)):
                theirs.weight.copy_(mine.weight[rows])
            pairs = ((attn.v_proj, hf.self_attn.v_proj), (attn.output_proj, hf.self_attn.o_proj),
                     (ffn.w1, hf.mlp.gate_proj), (ffn.w3, hf.mlp.up_proj), (ffn.w2, hf.mlp.down_proj),
                     (block.ln1, hf.input_layernorm), (block.ln2, hf.post_attention_layernorm))
            for mine, theirs in pairs:
                theirs.weight.copy_(mine.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device).expand(x.shape[0], -1)
        return self.layer(x, position_ids=positions, position_embeddings=self.rotary(x, positions))


def bench_compiled_block(batch: int, seq_len: int, d_model: int, num_heads: int, repeats: int) -> dict[str, float]:
    """Forward+backward of the library's block and of Hugging Face's Llama layer, both ``torch.compile``d.

    Both compute the same function (checked eagerly first); the compilation (tens of
    seconds each on a laptop CPU) happens in the warm-up, outside the timed repeats.
    """
    torch.manual_seed(0)
    block = TransformerBlock(d_model, num_heads, swiglu_hidden_dim(d_model), seq_len)
    llama = HuggingFaceLlamaLayer(block)
    x = torch.randn(batch, seq_len, d_model, requires_grad=True)
    torch.testing.assert_close(block(x), llama(x), atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()
    compiled = {"library": torch.compile(block), "Hugging Face": torch.compile(llama)}

    def step(module, owner):
        def run():
            module(x).sum().backward()
            owner.zero_grad(set_to_none=True)
            x.grad = None

        return run

    steps = {"library": step(compiled["library"], block), "Hugging Face": step(compiled["Hugging Face"], llama)}
    for run in steps.values():  # compile forward and backward before anything is timed
        run()
    return {**interleaved_median(steps, repeats), "eager library": interleaved_median({"": step(block, block)},
                                                                                     max(3, repeats // 3))[""]}




def bench_rms_norm(rows: int, d_model: int, repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    x, weight = torch.randn(rows, d_model), torch.randn(d_model)
    torch.testing.assert_close(functional.rms_norm(x, weight), F.rms_norm(x, (d_model,), weight, 1e-5))
    return interleaved_median(
        {
            "library": lambda: functional.rms_norm(x, weight),
            "torch": lambda: F.rms_norm(x, (d_model,), weight, 1e-5),
        },
        repeats,
    )


def bench_sliders(repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds per frame of each course slider: a move, and what a move cost before blitting
    (``update``, a full draw and Pillow's PNG encoder) on the same figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from prenorm_lib.lab.figures import slider_registry
    from prenorm_lib.lab.plotting import use_house_style

    use_house_style()
    results = {}
    for name, make in slider_registry().items():
        live = make()
        control = next(iter(live.controls.values()))
        options = getattr(control, "options", None)
        values = list(options) if options else [control.min + (control.max - control.min) * i / 8 for i in range(9)]
        values = [v[1] if isinstance(v, tuple) else v for v in values]
        if not options and isinstance(control.value, int):
            values = list(range(control.min, control.max + 1, max(1, (control.max - control.min) // 8)))
        if hasattr(control, "base"):  # a log slider: min and max are exponents
            values = [control.base ** v for v in values]
        turn = iter(range(10**9))

        def move(live=live, control=control, values=values, turn=turn):
            control.value = values[next(turn) % len(values)]

        def full(live=live):
            live.update(**live.values)
            render_png(live.fig)
            live.blitter.settle()  # this draw is the reference's: the next move still blits

        results[name] = interleaved_median({"move": move, "full draw": full}, repeats)
        plt.close(live.fig)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    setting = f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.repeats} interleaved repeats"
    print(f"{setting}\n")
    table = ["| what | library | reference | ratio | reference is | target |", "|---|---:|---:|---:|---|---|"]

    with measurements.LoadWatch() as load:
        rows = []
        block = bench_block(batch=4, seq_len=256, d_model=512, num_heads=8, repeats=args.repeats)
        rows.append(("TransformerBlock fwd+bwd (B=4, T=256, d=512)", block["library"], block["torch"],
                     "torch fused ops", "≤ 1.05"))
        rope = bench_rope(batch=16, seq_len=512, d_k=128, repeats=args.repeats)
        rows.append(("RoPE (B=16, T=512, d_k=128)", rope["library"], rope["matrix"], "d×d matrices", "≤ 0.5"))
        norm = bench_rms_norm(rows=4096, d_model=1024, repeats=args.repeats)
        rows.append(("rms_norm (4096 × 1024)", norm["library"], norm["torch"], "F.rms_norm", "—"))
        compiled = bench_compiled_block(batch=4, seq_len=256, d_model=512, num_heads=8, repeats=args.repeats)
        rows.append(("compiled block fwd+bwd (B=4, T=256, d=512)", compiled["library"], compiled["Hugging Face"],
                     "compiled HF Llama", "≤ 1.05"))
        rows.append(("  the same block, eager vs compiled", compiled["eager library"], compiled["library"],
                     "compiled block", "—"))

        print(f"{'what':46} {'library':>10} {'reference':>10} {'ratio':>7}  reference        target")
        for name, ours, ref, ref_name, target in rows:
            print(f"{name:46} {ours * 1e3:8.2f}ms {ref * 1e3:8.2f}ms {ours / ref:7.2f}  {ref_name:16} {target}")
            table.append(f"| {name.strip()} | {ours * 1e3:.2f} ms | {ref * 1e3:.2f} ms | {ours / ref:.2f} | "
                         f"{ref_name} | {target} |")

        norms = bench_norms(rows=1024, d_model=1024, repeats=args.repeats, inner=3)
        whole_model = "— (the paper's {:.0%}–{:.0%} is whole-model: not comparable)".format(*PAPER_TIME_SAVED)
        print("\nnormalisation forward+backward (1024 × 1024 fp32), time ratio per repeat: median [quartiles]")
        for label, (q1, median, q3) in norm_ratios(norms).items():
            target = whole_model if label.startswith("RMSNorm /") else ""
            print(f"{label:46} {median:7.2f}  [{q1:.2f}–{q3:.2f}]   {target}")
            table.append(f"| {label} (1024 × 1024), median [quartiles] of per-repeat ratios | | | "
                         f"{median:.2f} [{q1:.2f}–{q3:.2f}] | | {target or '—'} |")

        print("\nslider frames in the kernel (a move vs a full redraw of the same figure), target ≤ 100 ms a move")
        for name, times in bench_sliders(args.repeats).items():
            move, full = times["move"], times["full draw"]
            print(f"{name:46} {move * 1e3:8.1f}ms {full * 1e3:8.1f}ms {move / full:7.2f}  full redraw      ≤ 100 ms")
            table.append(f"| slider `{name}`: a move in the kernel | {move * 1e3:.1f} ms | {full * 1e3:.1f} ms | "
                         f"{move / full:.2f} | a full redraw | ≤ 100 ms a move |")

    command = "make bench" + (f" REPEATS={args.repeats}" if args.repeats != 30 else "")
    body = "\n".join([*table, "", f"{setting}. Ratios are library time / reference time in the same run, "
                       "the two interleaved repeat by repeat (lower is better); each pair is checked to compute "
                       "the same values first."])
    print(f"\nwrote {measurements.write('bench', body, command=command, load=load)}")


if __name__ == "__main__":
    main()
