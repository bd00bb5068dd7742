"""Every exercise of the course, declared once: one record per exercise (nbgrader's one dict per cell).

A record says which notebook an exercise belongs to, which library code answers it, what
else in the library computes the same, and what its checker refuses as "not your code".
Everything else is derived from these records, never kept beside them:

* ``prenorm_course.exercises.withheld.WITHHELD`` -- per notebook, what its graded kernel's
  copy of the library lacks: the ``answers`` and ``also_withheld`` of its exercises;
* ``prenorm_course.exercises.leaks.LIBRARY_ANSWERS`` -- per exercise, the library code that
  must not be in view in its exercise notebook (``answers``);
* the refusals of each checker (``core.refuse_library_object`` / ``refuse_library_calls`` /
  ``refuse_library_ops``): ``refuses`` (what the learner's object must not *be*),
  ``refused_calls`` (what its source must not call), ``refused_ops`` (the torch functions and
  operators its call must not run, from a trace of the call: ``probes.traced_ops``) and
  ``task`` (what the exercise asks, said with a refusal).

Library pieces are written ``"module:qualname"`` -- a function or class of a ``prenorm_lib``
module (``"prenorm_lib.layers:Linear"``) or a method (``"prenorm_lib.block:TransformerBlock.
pre_norm_forward"``). ``validate`` runs on import: ids unique, each id of its notebook,
each piece well-formed, a task given wherever something is refused.

This module runs in the grader (and inline); a graded kernel has no copy of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# each notebook by the name of its exercise version, notebooks/exercises/NN_<name>.ipynb: the learner's file name
# (the solution notebook is its `_solutions` twin; prenorm_course.exercises.paths maps one to the other)
NOTEBOOKS = {
    "1": "01_rmsnorm.ipynb", "2": "02_swiglu_silu_relu.ipynb", "3": "03_rope.ipynb", "4": "04_attention.ipynb",
    "5": "05_prenorm_vs_postnorm.ipynb", "6": "06_your_transformer.ipynb",
}
PIECE = re.compile(r"^prenorm_lib(\.\w+)*:\w+(\.\w+)?$")


@dataclass(frozen=True)
class ExerciseRecord:
    """One exercise: its id ``N.M``, its notebook, the library code that answers it, and its refusals."""

    id: str
    answers: tuple[str, ...] = ()  # the library code that answers it: out of view in the exercise notebook, withheld
    also_withheld: tuple[str, ...] = ()  # other library pieces that compute the same (withheld too)
    refuses: frozenset[str] = frozenset()  # qualified names the learner's object must not be (nor subclass)
    refused_calls: re.Pattern[str] | None = None  # what the learner's source must not call (a lint)
    refused_ops: re.Pattern[str] | None = None  # torch functions and operators its call must not run (a lint)
    task: str = ""  # what the exercise asks, said with a refusal
    notebook: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "notebook", NOTEBOOKS[self.id.split(".")[0]])

    @property
    def withheld(self) -> tuple[str, ...]:
        """Everything this exercise keeps out of its notebook's graded kernel."""
        return (*self.answers, *self.also_withheld)


def _calls(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives))


# RoPE's table of angles p·Θ^(−2k/d_k) and every helper that returns it: 3.1's answer, and 6.4's buffers
ROPE_TABLE = (
    "prenorm_lib.functional:rope_angles",  # the table itself
    "prenorm_lib.lab.figures.rope:wavelengths",  # 2π/θ_k: the table's speeds, one division away
    "prenorm_lib.positions:sinusoidal_encoding",  # sin and cos of the same table, interleaved
    "prenorm_lib.rope:complex_rotations",  # cos + i·sin of the same table
)
ROTATIONS = ("prenorm_lib.rope:rotation_matrix", "prenorm_lib.rope:rotate_complex")  # the same rotation, other forms
ROPE_CALLS = (r"\bRotaryPositionalEmbedding\b", r"\brotation_matrix\s*\(", r"\brotary_embedding\b", r"\bonnx\b")
GATED_FFN = ("prenorm_lib.functional:gated_ffn", "prenorm_lib.ffn:GatedFeedForward", "prenorm_lib.ffn:SwiGLU")
# torch's fused attention and the library's, under their names: notebook 06's own attention must not call them
FUSED_ATTENTION_CALLS = (r"(?<!def )\bscaled_dot_product_attention\b", r"\bMultiheadAttention\s*\(",
                         r"\bis_causal\b", r"\b_scaled_dot_product\w*", r"\bmulti_head_attention_forward\b",
                         r"\bflex_attention\b", r"\bMultiHeadSelfAttention\s*\(")
# notebook 06's one rule (stated in its section 4): earlier notebooks' kernels may be torch's, this notebook's may not
NOTEBOOK_06_RULE = ("this notebook's rule: a kernel from an earlier notebook may be torch's (torch.softmax, "
                    "nn.functional.silu), but the attention itself is yours — scores, scale, mask, weights times "
                    "values")
NORM_OPS = _calls(r"rms_norm", r"layer_norm", r"group_norm", r"instance_norm", r"batch_norm", r"\b_?decomp")
ATTENTION_OPS = (r"scaled_dot_product", r"flex_attention", r"multi_head_attention", r"_safe_softmax",
                 r"MultiheadAttention")
BLOCK_TASK = ("this exercise asks you to write the forward pass yourself from ln1, attn, ln2 and ffn; compare "
              "with the library's method afterwards")

RECORDS = (
    ExerciseRecord(
        "1.1",
        answers=("prenorm_lib.functional:rms_norm",),
        # RMSNorm over the first p of the channels (p = 1 is 1.1's answer); LayerNorm of [x, −x] is RMSNorm of x
        also_withheld=("prenorm_lib.functional:prms_norm", "prenorm_lib.functional:layer_norm"),
        refuses=frozenset({"prenorm_lib.functional.rms_norm", "torch.nn.functional.rms_norm", "torch.rms_norm"}),
        refused_calls=_calls(
            r"\b(?:functional|F|torch|nn\s*\.\s*functional)\s*\.\s*rms_norm\b", r"\bRMSNorm\s*\(",
            # torch's other roads: LayerNorm of [x, −x] is RMSNorm of x; torch ships a Python RMSNorm among its
            # decompositions
            r"\b(?:layer|group)_norm\s*\(", r"\b(?:LayerNorm|GroupNorm)\s*\(", r"_fused_rms_norm", r"\b_decomp\b",
            r"\bdecompositions\b", r"\b_refs\b"),
        refused_ops=NORM_OPS,  # torch's norms, also by a string name, torch.ops.aten or a decomposition
        task="this exercise asks you to write the kernel yourself from torch operations (pow, mean, sqrt, ...); "
             "compare with the library afterwards"),
    ExerciseRecord(
        "1.2",
        answers=("prenorm_lib.norm:RMSNorm",),
        refuses=frozenset({"prenorm_lib.norm.RMSNorm", "torch.nn.modules.normalization.RMSNorm"}),
        # 1.2's forward builds on the learner's kernel my_rms_norm: a library or torch kernel there is not the
        # exercise (and the graded kernel has no library kernel at all: it fails there with the withheld message)
        refused_calls=_calls(r"\b(?:functional|F|torch|nn\s*\.\s*functional)\s*\.\s*rms_norm\b"),
        refused_ops=NORM_OPS,
        task="this exercise asks you to write the module yourself: subclass nn.Module, store the gain as an "
             "nn.Parameter and call your kernel my_rms_norm in forward"),
    ExerciseRecord("1.3"),
    ExerciseRecord(
        "2.1",
        answers=("prenorm_lib.functional:silu",),
        # x·sigmoid(βx): with β = 1, 2.1's answer; the attention's gate is x·σ(x) for d_head 1 and an identity gate
        also_withheld=("prenorm_lib.lab.figures.ffn:swish", "prenorm_lib.attention:MultiHeadSelfAttention.gate_heads"),
        refuses=frozenset({"torch.nn.functional.silu", "prenorm_lib.functional.silu",
                           "torch.nn.modules.activation.SiLU"}),
        refused_calls=_calls(
            r"\b(?:F|functional|torch|nn\s*\.\s*functional)\s*\.\s*silu_?\b", r"\bnn\s*\.\s*SiLU\b",
            r"(?<!class )\bSiLU\s*\(", r"\baten\s*\.\s*silu", r"\b_nn\s*\.\s*silu",
            r"\bglu\s*\(", r"\bGLU\s*\(",  # GLU of [x, x] is x·σ(x)
            r"\btorch\s*\.\s*nn\s*\.\s*functional\b"),
        refused_ops=_calls(r"\bsilu", r"\bglu\b", r"swish"),
        task="calling a ready-made SiLU is correct, but the point of this exercise is to build it from torch.exp or "
             "torch.sigmoid — try x · σ(x) with σ(x) = 1 / (1 + exp(-x))"),
    ExerciseRecord(
        "2.2",
        answers=("prenorm_lib.functional:swiglu",),
        also_withheld=GATED_FFN,  # the kernel of every gated FFN; their base class computes SwiGLU with SiLU
        refuses=frozenset({"prenorm_lib.functional.swiglu"}),
        refused_calls=_calls(r"\bfunctional\s*\.\s*swiglu\b", r"\bSwiGLU\s*\("),
        task="this exercise asks you to write the forward pass yourself from matrix products and SiLU "
             "(F.silu is fine); compare with functional.swiglu afterwards"),
    ExerciseRecord(
        "2.3",
        answers=("prenorm_lib.ffn:swiglu_hidden_dim",),
        also_withheld=("prenorm_lib.ffn:default_hidden_dim",),  # swiglu_hidden_dim for a gated kind
        refuses=frozenset({"prenorm_lib.ffn.swiglu_hidden_dim", "prenorm_lib.ffn.default_hidden_dim"}),
        refused_calls=_calls(r"\b(?:swiglu_hidden_dim|default_hidden_dim)\b"),
        task="this exercise asks you to write the rounding rule yourself (8/3·d_model to the nearest multiple of "
             "64)"),
    ExerciseRecord(
        "3.1",
        answers=ROPE_TABLE[:1],
        also_withheld=ROPE_TABLE[1:],
        refuses=frozenset({"prenorm_lib.functional.rope_angles"}),
        refused_calls=_calls(r"\brope_angles\s*\(", *ROPE_CALLS),
        task="this exercise asks you to build the angle table yourself: positions (arange) times the speeds "
             "Θ^(−2k/d_k), then cos and sin; compare with functional.rope_angles afterwards"),
    ExerciseRecord(
        "3.2",
        answers=("prenorm_lib.functional:apply_rope",),
        also_withheld=("prenorm_lib.rope:RotaryPositionalEmbedding", *ROTATIONS),  # 3.1 and 3.2 together
        refuses=frozenset({"prenorm_lib.functional.apply_rope"}),
        refused_calls=_calls(r"\bapply_rope\s*\(", *ROPE_CALLS),
        refused_ops=_calls(r"rotary_embedding", r"RotaryEmbedding", r"\bonnx\b"),
        task="this exercise asks you to rotate the pairs yourself (x[..., 0::2], x[..., 1::2], cos, sin); "
             "compare with functional.apply_rope afterwards"),
    ExerciseRecord("3.3"),
    ExerciseRecord(
        "4.1",
        answers=("prenorm_lib.functional:softmax",),
        also_withheld=("prenorm_lib.functional:softmax_with_sink",),  # with a sink logit of −∞, the plain softmax
        refuses=frozenset({"prenorm_lib.functional.softmax", "torch._VariableFunctionsClass.softmax",
                           "torch.nn.functional.softmax", "torch.softmax"}),
        refused_calls=_calls(
            r"\.\s*(?:log_)?softmax\s*\(", r"(?<!def )(?<![\w.])(?:log_)?softmax\s*\(",
            r"(?<!class )\b(?:Log)?Softmax\s*\(",  # nn.Softmax(dim)(x), from-imported too
            r"\b_?softmin\s*\(", r"\bSoftmin\s*\(", r"\b_(?:log_)?softmax\b"),  # softmin(−x), torch._softmax
        refused_ops=_calls(r"softmax", r"softmin"),  # torch.special.softmax, Tensor.softmax, Categorical(...).probs
        task="this exercise asks you to write the softmax yourself from torch.exp, amax and sum; "
             "compare with torch.softmax afterwards"),
    ExerciseRecord("4.2"),
    ExerciseRecord(
        "4.3",
        answers=("prenorm_lib.functional:scaled_dot_product_attention",),
        refuses=frozenset({"prenorm_lib.functional.scaled_dot_product_attention",
                           "torch._C._nn.scaled_dot_product_attention"}),
        refused_calls=_calls(r"(?<!def )\bscaled_dot_product_attention\b", r"\bMultiheadAttention\s*\(",
                             r"\b_scaled_dot_product\w*", r"\bmulti_head_attention_forward\b"),
        refused_ops=_calls(*ATTENTION_OPS),
        task="this exercise asks you to write attention yourself — scores, mask, your softmax, weighted sum; "
             "compare with torch.nn.functional.scaled_dot_product_attention afterwards"),
    ExerciseRecord(
        "4.4",
        answers=("prenorm_lib.attention:MultiHeadSelfAttention.forward",),
        also_withheld=("prenorm_lib.attention:MultiHeadSelfAttention",),  # a block or a model builds one: they fail too
        refuses=frozenset({"prenorm_lib.attention.MultiHeadSelfAttention",
                           "torch.nn.modules.activation.MultiheadAttention", "prenorm_lib.block.TransformerBlock"}),
        refused_calls=_calls(r"\bMultiHeadSelfAttention\s*\(", r"\bMultiheadAttention\s*\(", r"\bTransformerBlock\s*\(",
                             r"(?<!def )\bscaled_dot_product_attention\s*\(", r"\bis_causal\b"),
        refused_ops=_calls(*ATTENTION_OPS),
        task="this exercise asks you to assemble the layer yourself from the projections, RoPE and your "
             "attention function; compare with prenorm_lib.attention.MultiHeadSelfAttention afterwards"),
    # 5.3's checker reads its runs from the experiment record, in the grader: nothing graded trains a block in the
    # kernel. The unnormalised, reordered and ReZero passes stay: they add the residuals to whatever the branches
    # return, so pre- or post-norm through them needs the norms placed by the learner's own code.
    ExerciseRecord(
        "5.1",
        answers=("prenorm_lib.block:TransformerBlock.pre_norm_forward",),
        # pre-norm, given identities as its output norms; pre-norm, given both its depth factors = 1
        also_withheld=("prenorm_lib.block:TransformerBlock.sandwich_forward",
                       "prenorm_lib.block:TransformerBlock.scaled_pre_norm_forward"),
        refuses=frozenset({"prenorm_lib.block.TransformerBlock.pre_norm_forward"}),
        refused_calls=_calls(r"\bpre_norm_forward\b", r"\bTransformerBlock\s*\("),
        task=BLOCK_TASK),
    ExerciseRecord(
        "5.2",
        answers=("prenorm_lib.block:TransformerBlock.post_norm_forward",),
        also_withheld=("prenorm_lib.block:TransformerBlock.deepnorm_forward",),  # post-norm, given deepnorm_alpha = 1
        refuses=frozenset({"prenorm_lib.block.TransformerBlock.post_norm_forward"}),
        refused_calls=_calls(r"\bpost_norm_forward\b", r"\bTransformerBlock\s*\("),
        task=BLOCK_TASK),
    ExerciseRecord("5.3"),
    ExerciseRecord(
        "6.1",
        answers=("prenorm_lib.layers:Linear",),
        refuses=frozenset({"prenorm_lib.layers.Linear", "torch.nn.modules.linear.Linear"}),
        task="this exercise asks you to write Linear yourself: an nn.Parameter and x @ W.T"),
    ExerciseRecord(
        "6.2",
        answers=("prenorm_lib.layers:Embedding",),
        refuses=frozenset({"prenorm_lib.layers.Embedding", "torch.nn.modules.sparse.Embedding"}),
        task="this exercise asks you to write Embedding yourself: an nn.Parameter and indexing"),
    ExerciseRecord(
        "6.3",
        answers=("prenorm_lib.ffn:GatedFeedForward",),  # SwiGLU's code is its base class's
        also_withheld=("prenorm_lib.ffn:SwiGLU", "prenorm_lib.functional:swiglu", "prenorm_lib.functional:gated_ffn"),
        refuses=frozenset({"prenorm_lib.ffn.SwiGLU", "prenorm_lib.ffn.GatedFeedForward"}),
        task="this exercise asks you to write the module yourself from three of your Linears"),
    ExerciseRecord(
        "6.4",
        answers=("prenorm_lib.rope:RotaryPositionalEmbedding",),
        also_withheld=("prenorm_lib.functional:apply_rope", *ROTATIONS, *ROPE_TABLE),  # and its cos/sin buffers
        refuses=frozenset({"prenorm_lib.rope.RotaryPositionalEmbedding"}),
        refused_calls=_calls(*ROPE_CALLS),  # 3.2's roads to torch's rotation, the ONNX op among them
        task="this exercise asks you to write the module yourself"),
    ExerciseRecord(
        "6.5",
        answers=("prenorm_lib.attention:MultiHeadSelfAttention",),
        # the attention kernel; a softmax with a sink logit of −∞ is the plain softmax
        also_withheld=("prenorm_lib.functional:scaled_dot_product_attention",
                       "prenorm_lib.functional:softmax_with_sink"),
        refuses=frozenset({"prenorm_lib.attention.MultiHeadSelfAttention",
                           "torch.nn.modules.activation.MultiheadAttention"}),
        refused_calls=_calls(*FUSED_ATTENTION_CALLS),
        task=NOTEBOOK_06_RULE),
    ExerciseRecord(
        "6.6",
        answers=("prenorm_lib.block:TransformerBlock.pre_norm_forward",),
        also_withheld=("prenorm_lib.block:TransformerBlock",),
        refuses=frozenset({"prenorm_lib.block.TransformerBlock"}),
        task="this exercise asks you to assemble the block from your attention and SwiGLU"),
    ExerciseRecord(
        "6.7",
        answers=("prenorm_lib.model:TransformerLM",),  # the library's side of the training comparison fails with it
        refuses=frozenset({"prenorm_lib.model.TransformerLM"}),
        task="this exercise asks you to assemble the model from your embedding, blocks and Linear"),
    ExerciseRecord(
        "6.8",
        # measured, not written: torch's FlopCounterMode over the library's model answers by value
        also_withheld=("prenorm_lib.lab.accounting:measured_flops", "prenorm_lib.lab.accounting:measured_parameters"),
        refuses=frozenset({"prenorm_lib.lab.accounting.measured_flops",
                           "prenorm_lib.lab.accounting.measured_parameters",
                           "prenorm_lib.model.TransformerLM.num_parameters",
                           "torch.utils.flop_counter.FlopCounterMode"}),
        refused_calls=_calls(r"\bmeasured_(?:flops|parameters)\b", r"\bFlopCounterMode\b", r"\bflop_counter\b",
                             r"\bnum_parameters\s*\(", r"\.numel\s*\(", r"\.parameters\s*\(", r"\bTransformerLM\s*\("),
        task="this exercise asks you to count from the shapes alone, by hand; the next cell compares your numbers "
             "with torch's FlopCounterMode"),
    ExerciseRecord(
        "6.9",
        answers=("prenorm_lib.attention:MultiHeadSelfAttention.forward",),  # its cache and grouped heads
        refuses=frozenset({"prenorm_lib.attention.MultiHeadSelfAttention",
                           "torch.nn.modules.activation.MultiheadAttention"}),
        refused_calls=_calls(*FUSED_ATTENTION_CALLS),
        task=NOTEBOOK_06_RULE),
)


def validate(records: tuple[ExerciseRecord, ...]) -> dict[str, ExerciseRecord]:
    """The records by id; ``ValueError`` for a duplicate id, a malformed piece, or a refusal without its task."""
    by_id: dict[str, ExerciseRecord] = {}
    for record in records:
        if not re.fullmatch(r"\d+\.\d+", record.id) or record.id in by_id:
            raise ValueError(f"exercise record {record.id!r}: ids are N.M and unique")
        bad = [piece for piece in record.withheld if not PIECE.match(piece)]
        if bad:
            raise ValueError(f"exercise record {record.id}: {bad[0]!r} is not 'prenorm_lib.module:name'")
        if (record.refuses or record.refused_calls or record.refused_ops) and not record.task:
            raise ValueError(f"exercise record {record.id}: a refusal needs the task it says")
        by_id[record.id] = record
    return by_id


EXERCISES: dict[str, ExerciseRecord] = validate(RECORDS)
