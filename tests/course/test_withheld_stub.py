"""A withheld piece keeps its signature (issue 31, item 1): code in front of it reaches the withheld message.

The graded kernel's copy of the library replaces each exercise's answer by a stub that raises
``ImportError``. The stub used to take ``(*args, **kwargs)``, so a helper that reads the
signature (06's ``build_model`` asks ``inspect.signature(TransformerLM)`` which keyword
arguments exist) failed with an error of its own ("unknown TransformerLM arguments"), and
``check`` needed a special case for the cells that call it. Now the stub has the original's
parameters, defaults and annotations, and the helper raises the withheld message itself.
"""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

from prenorm_course.exercises.kernel import OK, Kernel
from prenorm_course.exercises.paths import repo_root
from prenorm_course.exercises.sandbox import CONFINED, CourseFiles, Sandbox
from prenorm_course.exercises.withheld import MARKER, WITHHELD, withheld_source

SOURCE = '''"""A module."""

import torch


def answer(x: torch.Tensor, dim: int = -1, *, scale: float = 2.0, **options) -> torch.Tensor:
    return x * scale


class Base:
    def __init__(self, width: int, depth: int = 2, device=None):
        self.width = width


class Layer(Base):
    @staticmethod
    def rule(d_model: int, multiple_of: int = 64) -> int:
        return d_model * multiple_of

    def forward(self, x, /, mask=None):
        return answer(x)
'''


def _both(names: list[str]) -> tuple[dict, dict]:
    """The module's namespace as written, and with ``names`` withheld."""
    original: dict = {}
    exec(SOURCE, original)
    withheld: dict = {}
    exec(withheld_source(SOURCE, "lib.mod", names, "04_x.ipynb"), withheld)
    return original, withheld


def test_a_withheld_function_keeps_its_signature_and_raises_the_message_for_keyword_calls():
    original, withheld = _both(["answer", "Layer.rule", "Layer.forward"])
    assert inspect.signature(withheld["answer"]) == inspect.signature(original["answer"])
    with pytest.raises(ImportError, match=r"^lib\.mod\.answer is withheld while grading"):
        withheld["answer"](1, dim=0, scale=3.0, extra=True)
    for method in ("rule", "forward"):  # a static method stays static; a positional-only marker stays
        assert inspect.signature(getattr(withheld["Layer"], method)) == \
            inspect.signature(getattr(original["Layer"], method))
    with pytest.raises(ImportError, match=r"lib\.mod\.Layer\.rule is withheld while grading"):
        withheld["Layer"].rule(d_model=8, multiple_of=32)
    with pytest.raises(TypeError, match="unexpected keyword argument 'multiple'"):  # as the original would
        withheld["Layer"].rule(8, multiple=32)


def test_a_withheld_class_keeps_the_signature_of_the_init_it_runs():
    original, withheld = _both(["Base", "Layer"])
    for name in ("Base", "Layer"):  # Layer's __init__ is Base's, defined in the same module
        assert inspect.signature(withheld[name]) == inspect.signature(original[name])
        with pytest.raises(ImportError, match=rf"lib\.mod\.{name} is withheld while grading"):
            withheld[name](width=4, depth=3)
    assert not hasattr(withheld["Layer"], "rule")  # the class keeps nothing else


def test_every_withheld_piece_keeps_its_signature():
    files = CourseFiles.take(repo_root()).files
    for notebook, entries in WITHHELD.items():
        by_module: dict[str, list[str]] = {}
        for entry in entries:
            module, _, name = entry.partition(":")
            by_module.setdefault(module, []).append(name)
        for module, names in by_module.items():
            namespace = {"__name__": f"{module}_withheld"}
            source = files[module.replace(".", "/") + ".py"].decode()
            exec(withheld_source(source, module, names, notebook), namespace)
            real = importlib.import_module(module)
            for name in names:
                stub, original = namespace, real
                for part in name.split("."):
                    stub, original = (s[part] if isinstance(s, dict) else getattr(s, part) for s in (stub, original))
                assert inspect.signature(stub) == inspect.signature(original), (notebook, module, name)


TRAINING_HELPER = '''
import types
from prenorm_lib.lab.train import build_model
try:
    build_model(types.SimpleNamespace(vocab_size=40), seed=0, context_length=16, d_model=64, num_layers=2,
                num_heads=4, d_ff=192, rope_theta=10000.0)
except Exception as exc:
    print(type(exc).__name__, exc)
'''


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
def test_in_the_graded_kernel_of_06_the_training_helper_raises_the_withheld_message():
    """06's uses-exercises cell builds the library's model with build_model; it said 'unknown TransformerLM
    arguments' before (the stub's signature was (*args, **kwargs))."""
    course = CourseFiles.take(repo_root()).for_grading("06_your_transformer.ipynb")
    with Kernel(Sandbox.create(CONFINED, course)) as kernel:
        run = kernel.run_cell(TRAINING_HELPER, 60)
    assert run.status == OK, run
    printed = "".join(o.get("text", "") for o in run.outputs if o["output_type"] == "stream").strip()
    assert printed.startswith(f"ImportError prenorm_lib.model.TransformerLM is {MARKER} 06_your_transformer.ipynb"), \
        printed
