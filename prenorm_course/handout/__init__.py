"""Your code in the CS336 handout's layout: ``make handout`` (``python -m prenorm_course.handout``).

The handout keeps a learner's code in a package, ``cs336_basics/``, and its tests reach it
through ``tests/adapters.py``, one function per test that "simply" invokes that code (handout,
§1). ``export`` writes both from the learner's exercise notebooks:

* ``cs336_basics/prenorm_model.py`` — the code of notebook 06's exercise cells (the modules
  6.1–6.7 and the cached attention 6.9) and of the kernels they rely on from notebooks 01, 02
  and 04 (1.1 ``my_rms_norm``, 1.2 ``MyRMSNorm``, which 06's cells call ``RMSNorm``; 2.1
  ``my_silu``; 4.1 ``stable_softmax``, 4.3 ``attention``), in course order, as one module;
* ``tests/adapters.py`` — the handout's 21 adapter functions, the model's filled in with these
  (``run_multihead_self_attention`` builds ``MyAttention`` with ``theta=None``), the others
  left to the learner;
* ``tests/test_prenorm_interface.py`` — the course's own interface tests: each adapter against
  torch's operators on drawn weights and inputs (only torch and pytest needed).

It then names every call the handout's rules forbid (``forbidden_calls``) and, unless told not
to, runs the interface tests on the export. The learner's code is copied, never run here
beyond those tests.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.markers import BEGIN, END, exercise_header
from prenorm_course.exercises.paths import solution_name

# notebook (its exercise name) → the exercises whose cells make up the module, in course order
SOURCES: dict[str, tuple[str, ...]] = {
    "01_rmsnorm.ipynb": ("1.1", "1.2"),
    "02_swiglu_silu_relu.ipynb": ("2.1",),
    "04_attention.ipynb": ("4.1", "4.3"),
    "06_your_transformer.ipynb": ("6.1", "6.2", "6.3", "6.4", "6.5", "6.6", "6.7", "6.9"),
}
MODULE = "prenorm_model"
HEADER = '''"""The modules and kernels of the prenorm course's notebooks 01, 02, 04 and 06, as you wrote them.

Written by `make handout` (prenorm_course.handout) from your exercise notebooks; edit them there and
export again, or edit this file and leave the notebooks behind.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F
'''
# notebook 06's cells call notebook 01's module by the library's name
ALIASES = "RMSNorm = MyRMSNorm  # notebook 06 gave you the library's RMSNorm; the handout wants yours (exercise 1.2)"
TEMPLATES = Path(__file__).parent
NOT_DONE = 'raise NotImplementedError("Exercise '

# what the handout's §1 lets a learner use from torch.nn, torch.nn.functional and torch.optim
ALLOWED_NN = {"Module", "ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict", "Parameter",
              "init", "Buffer"}


class ExportError(ValueError):
    """An exercise the export needs is missing or not done."""


@dataclass(frozen=True)
class Exported:
    """What ``export`` wrote and what it found."""

    module: Path
    adapters: Path
    tests: Path
    forbidden: list[str]


def _code_of(notebook: Path, wanted: tuple[str, ...]) -> list[str]:
    """The source of each wanted exercise cell of ``notebook``, solution markers dropped, in the order wanted."""
    found: dict[str, str] = {}
    for cell in read_notebook(notebook).cells:
        header = exercise_header(cell.source) if cell.cell_type == "code" else None
        if header is not None and header[0] in wanted:
            found[header[0]] = "\n".join(line for line in cell.source.split("\n") if line.strip() not in (BEGIN, END))
    missing = [e for e in wanted if e not in found]
    if missing:
        raise ExportError(f"{notebook.name} has no cell for exercise {', '.join(missing)}: is it a course notebook?")
    undone = [e for e in wanted if f"{NOT_DONE}{e}:" in found[e]]
    if undone:
        them = "it" if len(undone) == 1 else "them"
        raise ExportError(f"exercise {', '.join(undone)} in {notebook} is not done yet: the export needs {them} "
                          "(fill in the cell, run its check, save, export again)")
    return [found[e] for e in wanted]


def module_source(notebooks: Path) -> str:
    """The exported module's text, from the notebooks in the folder ``notebooks``: the exercise notebooks
    (``01_rmsnorm.ipynb``) or, where a folder holds those of the solutions, them (``01_rmsnorm_solutions.ipynb``)."""
    parts = [HEADER.strip()]
    for name, wanted in SOURCES.items():
        path = next((p for p in (notebooks / name, notebooks / solution_name(name)) if p.is_file()), None)
        if path is None:
            raise ExportError(f"no {name} in {notebooks}: the export reads notebooks 01, 02, 04 and 06")
        parts.append(f"# --- from {name} " + "-" * max(3, 88 - len(name)))
        parts += [code.strip() for code in _code_of(path, wanted)]
        if name.startswith("01_"):
            parts.append(ALIASES.strip())
    source = "\n\n\n".join(parts) + "\n"
    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise ExportError(f"the exported code does not parse (line {exc.lineno}: {exc.msg}); run each exercise cell "
                          "in its notebook first") from None
    return source


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def forbidden_calls(source: str) -> list[str]:
    """Each use of ``torch.nn`` / ``torch.nn.functional`` / ``torch.optim`` that the handout's §1 does not allow.

    "You may not use any definitions from torch.nn, torch.nn.functional, or torch.optim except
    for" ``torch.nn.Parameter``, the container classes and the ``torch.optim.Optimizer`` base
    class; its §3.4.1 asks for ``torch.nn.init.trunc_normal_``. Read from the names in the code
    (``F`` and ``nn`` as the module imports them), so a lint, not a proof.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        name = _dotted(node)
        parts = name.split(".")
        if parts[0] == "torch" and parts[1:2] == ["nn"]:
            parts = ["nn", *parts[2:]]
        if parts[:2] in (["nn", "functional"], ["torch", "optim"]) or parts[:1] == ["F"]:
            bad = len(parts) > 2 or parts[0] == "F"
        elif parts[0] == "nn" and len(parts) == 2:
            bad = parts[1] not in ALLOWED_NN
        else:
            continue
        if bad and not (parts[:2] == ["torch", "optim"] and parts[-1] == "Optimizer"):
            found.append(f"line {node.lineno}: {name}")
    for node in ast.walk(ast.parse(source)):  # torch's softmax: allowed by §1's letter, but §3.5.4 asks for yours
        if isinstance(node, ast.Attribute) and node.attr in ("softmax", "log_softmax") and _dotted(node) not in (
                "F.softmax", "F.log_softmax", "nn.functional.softmax", "nn.functional.log_softmax"):
            found.append(f"line {node.lineno}: {_dotted(node) or '….' + node.attr} (§3.5.4 asks for your own softmax)")
    return sorted(set(found), key=lambda line: int(line.split()[1].rstrip(":")))


def export(notebooks: Path, out: Path) -> Exported:
    """Write the module, ``adapters.py`` and the interface tests into ``out`` (the handout's layout)."""
    source = module_source(notebooks)
    package, tests = out / "cs336_basics", out / "tests"
    package.mkdir(parents=True, exist_ok=True)
    tests.mkdir(parents=True, exist_ok=True)
    for folder in (package, tests):
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("")
    module = package / f"{MODULE}.py"
    module.write_text(source, encoding="utf-8")
    adapters = tests / "adapters.py"
    shutil.copyfile(TEMPLATES / "adapters.py", adapters)
    interface = tests / "test_prenorm_interface.py"
    shutil.copyfile(TEMPLATES / "test_prenorm_interface.py", interface)
    return Exported(module, adapters, interface, forbidden_calls(source))


def run_interface_tests(out: Path) -> int:
    """``python -m pytest tests/test_prenorm_interface.py`` in ``out``; its exit status."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(out),
               "tests/test_prenorm_interface.py"]
    return subprocess.run(command, cwd=out, check=False).returncode
