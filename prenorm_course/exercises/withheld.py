"""What a graded kernel's copy of ``prenorm_lib`` lacks: the answers to the notebook's exercises.

In ``check`` and ``grade`` the learner's kernel imports a copy of the library (see
:mod:`sandbox`). For each course notebook, ``WITHHELD`` names the library's
implementations of what its exercises ask for, and every helper that computes the same
thing; in the kernel's copy each of them is replaced, in its source file, by a stub that
raises ``ImportError`` saying it is withheld while grading. Importing it under another
name, loading its file again (``spec_from_file_location``), ``exec`` of the file's text
or subclassing it finds only the stub: nothing in the kernel computes the answer. The
checkers compute their references in the grader, from the complete library.

The checkers (``prenorm_lib/checks``) hold reference copies of the answers, so in a
graded kernel each checker module keeps only its probes -- the functions a checker runs
where the learner's object lives (``probe(obj, function, ...)``: give a module the
checker's weights, count calls) -- with the imports and the definitions they use
(``probes_only``); ``core`` (comparisons, the kernel-side facts) is kept whole: it holds
no answer. The inline run of a notebook (self-study, ``verify``'s unfilled run) keeps
the complete library. A cell outside the exercises that uses a withheld piece fails in the graded run
only; ``check`` does not count that cell, nor the unedited cells after it, against the
learner (they may need its results), and says so in a note.

**Adding a notebook** (e.g. 06, "Your Transformer"): add one entry to ``WITHHELD``, the
notebook's file name mapped to ``"module:name"`` strings -- a function or class of a
``prenorm_lib`` module (``"prenorm_lib.layers:Linear"``) or a method
(``"prenorm_lib.block:TransformerBlock.pre_norm_forward"``). A name that is not defined
in that module is an error when the kernel's copy is made (``withheld_files``), so a
renamed implementation cannot silently come back. What stays a lint: torch's own
implementation of an answer (``F.rms_norm``, fused attention, ``aten`` ops) is part of
torch, which the kernel needs; the checkers' refusal of such calls reads the learner's
source.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterable, Mapping

MARKER = "withheld while grading"
# Python 3.11's ast.parse is not safe in two threads at once ("AST constructor recursion depth mismatch",
# cpython issue 106905), and grade checks two notebooks at a time: the copies are made one at a time.
_PARSING = threading.Lock()

# RoPE's table of angles p·Θ^(−2k/d_k) and every helper that returns it: 3.1's answer, and 6.4's buffers
_ROPE_TABLE = (
    "prenorm_lib.functional:rope_angles",  # the table itself
    "prenorm_lib.lab.figures.rope:wavelengths",  # 2π/θ_k: the table's speeds, one division away
    "prenorm_lib.positions:sinusoidal_encoding",  # sin and cos of the same table, interleaved
    "prenorm_lib.rope:complex_rotations",  # cos + i·sin of the same table
)

WITHHELD: dict[str, tuple[str, ...]] = {
    # 1.2's forward calls the learner's own kernel (``my_rms_norm``, 1.1), so both answers go; everything else
    # in the library that normalises (figures, timing, the block, the model) calls one of these.
    "01_rmsnorm.ipynb": (
        "prenorm_lib.functional:rms_norm",  # 1.1
        "prenorm_lib.functional:prms_norm",  # RMSNorm over the first p of the channels: with p = 1, 1.1's answer
        "prenorm_lib.norm:RMSNorm",  # 1.2
        "prenorm_lib.functional:layer_norm",  # LayerNorm of [x, −x] (mean 0) is RMSNorm of x: 1.1's answer in one line
    ),
    "02_swiglu_silu_relu.ipynb": (
        "prenorm_lib.functional:silu",  # 2.1
        "prenorm_lib.lab.figures.ffn:swish",  # x·sigmoid(βx): with β = 1, 2.1's answer
        "prenorm_lib.functional:swiglu",  # 2.2, and the kernel of every gated FFN (SwiGLU with its activation)
        "prenorm_lib.functional:gated_ffn",
        "prenorm_lib.ffn:GatedFeedForward",  # the base of SwiGLU, GEGLU, ReGLU, Bilinear: computes SwiGLU with SiLU
        "prenorm_lib.ffn:SwiGLU",
        "prenorm_lib.ffn:swiglu_hidden_dim",  # 2.3
        "prenorm_lib.ffn:default_hidden_dim",  # swiglu_hidden_dim for a gated kind
    ),
    # 3.1's table, every helper that returns it or its speeds θ_k, and 3.2 with the layer. What only calls
    # these (``SinusoidalPositions``, the clock figures, ``extend_context``) fails on its own. Kept:
    # ``lab.figures.rope.long_term_decay``: its θ_i stay inside, it returns only RoFormer's bound.
    "03_rope.ipynb": (
        *_ROPE_TABLE,  # 3.1
        "prenorm_lib.functional:apply_rope",  # 3.2
        "prenorm_lib.rope:RotaryPositionalEmbedding",  # 3.1 and 3.2 together
        "prenorm_lib.rope:rotation_matrix",  # the same rotation, as a matrix
        "prenorm_lib.rope:rotate_complex",  # the same rotation, as complex numbers
    ),
    "04_attention.ipynb": (
        "prenorm_lib.functional:softmax",  # 4.1
        "prenorm_lib.functional:scaled_dot_product_attention",  # 4.3
        "prenorm_lib.attention:MultiHeadSelfAttention",  # 4.4; a block or a model builds one, so they fail too
    ),
    "06_your_transformer.ipynb": (
        "prenorm_lib.layers:Linear",  # 6.1
        "prenorm_lib.layers:Embedding",  # 6.2
        "prenorm_lib.ffn:GatedFeedForward",  # 6.3: the base of SwiGLU, which computes it
        "prenorm_lib.ffn:SwiGLU",
        "prenorm_lib.functional:swiglu",
        "prenorm_lib.functional:gated_ffn",
        "prenorm_lib.rope:RotaryPositionalEmbedding",  # 6.4
        "prenorm_lib.functional:apply_rope",
        "prenorm_lib.rope:rotation_matrix",
        "prenorm_lib.rope:rotate_complex",
        *_ROPE_TABLE,  # 6.4's cos/sin buffers
        "prenorm_lib.attention:MultiHeadSelfAttention",  # 6.5
        "prenorm_lib.functional:scaled_dot_product_attention",
        "prenorm_lib.block:TransformerBlock",  # 6.6
        "prenorm_lib.model:TransformerLM",  # 6.7; the library's side of the training comparison fails with it
    ),
    # 5.3's checker reads its runs from the experiment record, in the grader: nothing graded trains a block in
    # the kernel. The unnormalised, reordered and ReZero passes stay: they add the residuals to whatever the
    # branches return, so pre- or post-norm through them needs the norms placed by the learner's own code.
    "05_prenorm_vs_postnorm.ipynb": (
        "prenorm_lib.block:TransformerBlock.pre_norm_forward",  # 5.1
        "prenorm_lib.block:TransformerBlock.post_norm_forward",  # 5.2
        "prenorm_lib.block:TransformerBlock.sandwich_forward",  # pre-norm, given identities as its output norms
        "prenorm_lib.block:TransformerBlock.deepnorm_forward",  # post-norm, given deepnorm_alpha = 1
        "prenorm_lib.block:TransformerBlock.scaled_pre_norm_forward",  # pre-norm, given both its factors = 1
    ),
}


def withheld_for(notebook: str) -> tuple[str, ...]:
    """The ``module:name`` entries withheld from the kernel that runs ``notebook`` (a file name)."""
    return WITHHELD.get(notebook, ())


_KEPT_DECORATORS = ("staticmethod", "classmethod")  # they change how a method is called, so its shape


def _signature(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``function``'s parameters and return annotation as source text: ``(x: Tensor, dim: int = -1) -> Tensor``."""
    returns = f" -> {ast.unparse(function.returns)}" if function.returns is not None else ""
    return f"({ast.unparse(function.args)}){returns}"


def _init_of(cls: ast.ClassDef, tree: ast.Module) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The ``__init__`` that ``cls`` runs: its own, or that of a base class defined in the same module."""
    own = next((node for node in cls.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name == "__init__"), None)
    if own is not None:
        return own
    for base in cls.bases:
        parent = _find(tree, [base.id]) if isinstance(base, ast.Name) else None
        if isinstance(parent, ast.ClassDef) and parent is not cls:
            found = _init_of(parent, tree)
            if found is not None:
                return found
    return None


def _stub(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, tree: ast.Module, qualified: str,
          notebook: str) -> list[str]:
    """The lines that replace ``node``: a definition of the same name and signature that raises ImportError.

    The signature (parameters, defaults and annotations as source text) is the original's, so code
    that inspects it (``inspect.signature``, as 06's ``build_model`` does for ``TransformerLM``) or
    calls it with keyword arguments sees the same shape and reaches the withheld message, not an
    error of its own. A class keeps the signature of the ``__init__`` it runs (``self, *args,
    **kwargs`` where that is defined outside the module) and nothing else.
    """
    indent = " " * node.col_offset
    message = (f"{qualified} is {MARKER} {notebook}: the graded kernel has no copy of an exercise's answer "
               "(run the notebook yourself to use it)")
    if isinstance(node, ast.ClassDef):
        init = _init_of(node, tree)
        return [f"{indent}class {node.name}:",
                f"{indent}    def __init__{_signature(init) if init is not None else '(self, *args, **kwargs)'}:",
                f"{indent}        raise ImportError({message!r})"]
    kept = [f"{indent}@{d.id}" for d in node.decorator_list if isinstance(d, ast.Name) and d.id in _KEPT_DECORATORS]
    return [*kept, f"{indent}def {node.name}{_signature(node)}:",
            f"{indent}    raise ImportError({message!r})"]


def _find(tree: ast.Module, path: list[str]) -> ast.FunctionDef | ast.ClassDef | None:
    """The definition ``path`` (``["Class", "method"]``) at the top of a module, or None."""
    body: list[ast.stmt] = tree.body
    found = None
    for part in path:
        found = next((node for node in body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                      and node.name == part), None)
        if found is None:
            return None
        body = found.body if isinstance(found, ast.ClassDef) else []
    return found


def withheld_source(source: str, module: str, names: Iterable[str], notebook: str) -> str:
    """``source`` of ``module`` with each definition in ``names`` replaced by a stub that raises ImportError."""
    lines = source.splitlines()
    tree = ast.parse(source)
    spans = []
    for name in names:
        node = _find(tree, name.split("."))
        if node is None:
            raise ValueError(f"withheld: {module} defines no {name!r} (WITHHELD[{notebook!r}] names it)")
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        stub = _stub(node, tree, f"{module}.{name}", notebook)
        spans.append((start, node.end_lineno, stub))
    for start, end, stub in sorted(spans, reverse=True):
        lines[start:end] = stub
    return "\n".join(lines) + "\n"


CHECKS = "prenorm_lib/checks/"
CHECKS_KEPT_WHOLE = ("__init__.py", "core.py")


def _top_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def probes_only(source: str) -> str:
    """A checker module's ``source`` reduced to its imports and its probes with what they use, nothing else.

    A probe is the second argument of a ``probe(anchor, function, ...)`` call in the module.
    """
    tree = ast.parse(source)
    defined = {name: node for node in tree.body for name in _top_names(node)}
    wanted = [call.args[1].id for call in ast.walk(tree) if isinstance(call, ast.Call)
              and isinstance(call.func, ast.Name) and call.func.id == "probe" and len(call.args) > 1
              and isinstance(call.args[1], ast.Name)]
    kept: set[int] = set()
    while wanted:
        node = defined.get(wanted.pop())
        if node is None or id(node) in kept:
            continue
        kept.add(id(node))
        wanted += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defined]
    lines = source.splitlines()
    out = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or id(node) in kept:
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
            out += [*lines[start:node.end_lineno], ""]
    header = '"""A checker module in a graded kernel: only its probes (the checks and references run in the grader)."""'
    return "\n".join([header, "", *out])


def withheld_files(files: Mapping[str, bytes], notebook: str) -> dict[str, bytes]:
    """The kernel's files for ``notebook``: ``files`` with the withheld definitions stubbed out of their modules.

    And every checker module reduced to its probes (``probes_only``).
    """
    with _PARSING:
        return _withheld_files(files, notebook)


def _withheld_files(files: Mapping[str, bytes], notebook: str) -> dict[str, bytes]:
    changed = {path: probes_only(data.decode("utf-8")).encode()
               if path.startswith(CHECKS) and path.endswith(".py") and path[len(CHECKS):] not in CHECKS_KEPT_WHOLE
               else data for path, data in files.items()}
    by_module: dict[str, list[str]] = {}
    for entry in withheld_for(notebook):
        module, _, name = entry.partition(":")
        by_module.setdefault(module, []).append(name)
    for module, names in by_module.items():
        relative = module.replace(".", "/") + ".py"
        if relative not in files:
            raise ValueError(f"withheld: no module {module} in the library (WITHHELD[{notebook!r}] names it)")
        changed[relative] = withheld_source(files[relative].decode("utf-8"), module, names, notebook).encode()
    return changed
