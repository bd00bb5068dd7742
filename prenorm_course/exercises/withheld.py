"""What a graded kernel's copy of ``prenorm_lib`` lacks: the answers to the notebook's exercises.

In ``check`` and ``grade`` the learner's kernel imports a copy of the library (see
:mod:`sandbox`). For each course notebook, ``WITHHELD`` names the library's
implementations of what its exercises ask for, and every helper that computes the same
thing -- derived from the exercises' records (:mod:`prenorm_lib.checks.catalogue`, each
exercise's ``answers`` and ``also_withheld``), never listed here. In the kernel's copy each of
them is replaced, in its source file, by a stub that raises ``ImportError`` saying it is
withheld while grading. Importing it under another name, loading its file again
(``spec_from_file_location``), ``exec`` of the file's text or subclassing it finds only the
stub: nothing in the kernel computes the answer. The checkers compute their references in
the grader, from the complete library.

The checker modules hold reference copies of the answers, so a graded kernel has none of
them: each file of ``prenorm_lib/checks`` other than ``KERNEL_SIDE`` -- the protocol the
grader speaks to the kernel (``agent``, ``wire``, ``remote``), the probes it runs there
(``probes``) and ``core`` (comparisons, no answer) -- is replaced whole by a module that says
so (``CHECKER_STUB``): a check cell's ``from prenorm_lib.checks import rmsnorm as check`` still
runs, and using a checker there says the checks run in the grader. The inline run of a
notebook (self-study, ``verify``'s unfilled run) keeps the complete library. A cell outside
the exercises that uses a withheld piece fails in the graded run only; ``check`` does not
count that cell, nor the unedited cells after it, against the learner (they may need its
results), and says so in a note.

A name that is not defined in its module is an error when the kernel's copy is made
(``withheld_files``), so a renamed implementation cannot silently come back. What stays a
lint: torch's own implementation of an answer (``F.rms_norm``, fused attention, ``aten``
ops) is part of torch, which the kernel needs; the checkers' refusal of such calls reads
the learner's source.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterable, Mapping

from prenorm_lib.checks.catalogue import EXERCISES, ExerciseRecord

MARKER = "withheld while grading"
# Python 3.11's ast.parse is not safe in two threads at once ("AST constructor recursion depth mismatch",
# cpython issue 106905), and grade checks two notebooks at a time: the copies are made one at a time.
_PARSING = threading.Lock()


def derive_withheld(records: Iterable[ExerciseRecord]) -> dict[str, tuple[str, ...]]:
    """Per notebook, the pieces its exercises withhold, each once; a method of a withheld class goes with it."""
    found: dict[str, list[str]] = {}
    for record in records:
        pieces = found.setdefault(record.notebook, [])
        pieces += [piece for piece in record.withheld if piece not in pieces]
    return {notebook: tuple(piece for piece in pieces
                            if not any(piece.startswith(other + ".") for other in pieces))
            for notebook, pieces in found.items() if pieces}


WITHHELD: dict[str, tuple[str, ...]] = derive_withheld(EXERCISES.values())


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
            raise ValueError(f"withheld: {module} defines no {name!r} (an exercise record of {notebook} names it)")
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        stub = _stub(node, tree, f"{module}.{name}", notebook)
        spans.append((start, node.end_lineno, stub))
    for start, end, stub in sorted(spans, reverse=True):
        lines[start:end] = stub
    return "\n".join(lines) + "\n"


CHECKS = "prenorm_lib/checks/"
KERNEL_SIDE = ("__init__.py", "core.py", "probes.py", "agent.py", "wire.py", "remote.py")
CHECKER_STUB = '''"""A checker module in a graded kernel: its checks run in the grader, where the answers are."""


def __getattr__(name):
    raise AttributeError(f"{__name__}.{name}: the checks run in the grader, not in a graded kernel")
'''


def withheld_files(files: Mapping[str, bytes], notebook: str) -> dict[str, bytes]:
    """The kernel's files for ``notebook``: ``files`` with the withheld definitions stubbed out of their modules.

    And every checker module (all of ``prenorm_lib/checks`` but ``KERNEL_SIDE``) replaced by ``CHECKER_STUB``.
    """
    with _PARSING:
        return _withheld_files(files, notebook)


def _withheld_files(files: Mapping[str, bytes], notebook: str) -> dict[str, bytes]:
    changed = {path: CHECKER_STUB.encode()
               if path.startswith(CHECKS) and path.endswith(".py") and path[len(CHECKS):] not in KERNEL_SIDE
               else data for path, data in files.items()}
    by_module: dict[str, list[str]] = {}
    for entry in withheld_for(notebook):
        module, _, name = entry.partition(":")
        by_module.setdefault(module, []).append(name)
    for module, names in by_module.items():
        relative = module.replace(".", "/") + ".py"
        if relative not in files:
            raise ValueError(f"withheld: no module {module} in the library (an exercise record of {notebook} names it)")
        changed[relative] = withheld_source(files[relative].decode("utf-8"), module, names, notebook).encode()
    return changed
