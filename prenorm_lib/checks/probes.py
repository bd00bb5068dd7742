"""Everything that runs in a learner's kernel on the learner's objects: the probes.

A checker runs in the grader and calls the learner's objects through
:mod:`prenorm_lib.checks.remote`; what must happen *where those objects live* is one of the
functions here, run by the agent (:mod:`prenorm_lib.checks.agent`) on the checker's request
(``core.probe(anchor, probes.set_weight, ...)``), or inline in a notebook on the real object.
Each returns plain data (or an object that stays in the kernel behind a handle) and decides
nothing: the checker judges what comes back, from values it computes itself.

This module holds no answer to an exercise and imports none (a graded kernel has it whole;
the checker modules are not there at all, see ``prenorm_course.exercises.withheld``). Only the
names in ``__all__`` can be requested by the grader. Nothing here is trusted: the learner's
code runs in the same process and may replace any of it, so each probe is a guard against
honest mistakes, never the basis of a pass.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "buffers_of", "call_counts", "counted_parts", "error_facts", "facts_of", "gradient_step", "learner_source",
    "library_origin", "load_projections", "load_state", "set_eval", "set_weight", "shares_weight",
    "state_dict_of",
]


# --- facts about a learner's object ------------------------------------------------------------

MODULE_CLASS = "torch.nn.modules.module.Module"
PARAMETER_CLASS = "torch.nn.parameter.Parameter"
TENSOR_CLASS = "torch.Tensor"


def _class_names(obj: Any) -> list[str]:
    """The qualified names of ``obj``'s type and its bases (``object`` left out)."""
    return [_qualified(c) for c in type(obj).__mro__ if c is not object]


def facts_of(obj: Any, attributes: Iterable[str] = ()) -> dict:
    """Plain facts about a learner's object, gathered where it lives; every decision is the caller's.

    In the grader this runs in the learner's kernel (the agent's ``facts`` request) and
    arrives as data: type names as strings, parameter names and shapes, each requested
    attribute's type names and, for a tensor, a copy of it (its bytes, shape, dtype,
    device). Whether that makes a Module, a Parameter of ones, the right shape or the
    library's own object is decided from these strings and bytes by the checker, in the
    grader's process, with nothing the learner's code can patch there.
    """
    facts: dict[str, Any] = {"types": _class_names(obj), "origin": library_origin(obj), "attributes": {},
                             "parameters": None}
    for name in attributes:
        value = obj
        for part in str(name).split("."):
            value = getattr(value, part, None) if value is not None else None
        if value is None:
            facts["attributes"][name] = None
            continue
        types = _class_names(value)
        tensor = value.detach().clone() if TENSOR_CLASS in types and isinstance(value, torch.Tensor) else None
        facts["attributes"][name] = {"types": types, "tensor": tensor}
    if MODULE_CLASS in facts["types"]:
        facts["parameters"] = [[str(n), [int(d) for d in p.shape]] for n, p in obj.named_parameters()]
    return facts


def _qualified(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    name = obj.__name__ if inspect.isbuiltin(obj) else getattr(obj, "__qualname__", None) or obj.__name__
    return f"{module}.{name}" if module else name


def library_origin(obj: Any) -> list[str]:
    """Qualified names that say what ``obj`` is: its function, or its class and the bases.

    A bound method or a ``functools.partial`` is seen through; an instance counts as its
    class (``nn.SiLU()`` is ``torch.nn.modules.activation.SiLU``).
    """
    for _ in range(8):
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif inspect.ismethod(obj):
            obj = obj.__func__
        else:
            break
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethoddescriptor(obj):
        return [_qualified(obj)]
    classes = obj.__mro__ if inspect.isclass(obj) else type(obj).__mro__
    return [_qualified(c) for c in classes if c is not object]


def _source_of(target: Any) -> str:
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        return ""


def learner_source(obj: Any) -> str:
    """The source code of a learner's function or class ("" when Python cannot find it).

    Python 3.11 finds no source for a class defined in a notebook cell (``__main__`` has no
    file), but it does for the class's functions (IPython keeps each cell's text): such a
    class is read as the sources of its own methods.
    """
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) else type(obj)
    source = _source_of(target)
    if not source and inspect.isclass(target):
        members = (getattr(m, "__func__", getattr(m, "fget", m)) for m in vars(target).values())
        source = "\n".join(filter(None, (_source_of(m) for m in members if inspect.isfunction(m))))
    return source[:100_000]


# --- an exception, in words a hint can quote ---------------------------------------------------

def _own_code(filename: str) -> bool:
    """True for a file of this package or of the Python installation (not the learner's)."""
    package = str(Path(__file__).resolve().parents[1])
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, package}
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return any(resolved.startswith(p) or filename.startswith(p) for p in prefixes if p)


def _learner_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return [f for f in traceback.extract_tb(exc.__traceback__) if not _own_code(f.filename)]


def _suggestion(exc: BaseException) -> str:
    """A did-you-mean for a misspelt name or attribute, as Python's own traceback gives."""
    if isinstance(exc, NameError) and getattr(exc, "name", None):
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is None:
            return ""
        frame = tb.tb_frame
        names = [*frame.f_locals, *frame.f_globals, *frame.f_builtins]
        wanted = exc.name
    elif isinstance(exc, AttributeError) and getattr(exc, "name", None) and getattr(exc, "obj", None) is not None:
        try:
            names = dir(exc.obj)
        except Exception:  # a learner's __dir__ may raise
            return ""
        wanted = exc.name
    else:
        return ""
    close = difflib.get_close_matches(wanted, [n for n in names if n != wanted], n=1, cutoff=0.7)
    return f" — did you mean `{close[0]}`?" if close else ""


def error_facts(exc: BaseException) -> dict[str, str]:
    """What a hint says about an exception: its type, message, the learner's line, a did-you-mean."""
    frames = _learner_frames(exc)
    frame = f" (in {frames[-1].name}, line {frames[-1].lineno})" if frames else ""
    try:
        message = str(exc)
    except Exception:  # a learner's exception whose __str__ raises
        message = ""
    return {"type": type(exc).__name__, "message": message[:2000], "frame": frame, "suggestion": _suggestion(exc)}


# --- actions on a learner's module: the checker's weights, one training step ------------------

def gradient_step(module: Any, x: torch.Tensor, direction: torch.Tensor, lr: float) -> None:
    """One plain SGD step on ``module.parameters()`` for the loss ``sum(module(x) * direction)``.

    An output that depends on no parameter through autograd takes no step (the output
    afterwards then tells).
    """
    for parameter in module.parameters():
        parameter.grad = None
    out = module(x)
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        return
    (out * direction).sum().backward()
    with torch.no_grad():
        for parameter in module.parameters():
            if parameter.grad is not None:
                parameter -= lr * parameter.grad


def set_weight(module: nn.Module, value: torch.Tensor) -> None:
    """Give a learner's module the gain ``value`` (1.2: RMSNorm)."""
    with torch.no_grad():
        module.weight.copy_(value)


def load_projections(module: nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Give a learner's module the checker's projection weights (4.4: ``q_proj.weight`` ...)."""
    with torch.no_grad():
        for name, value in weights.items():
            getattr(module, name).weight.copy_(value)


# --- the submodules handed to a learner's block (5.1, 5.2), counting their calls ---------------

BLOCK_PARTS = ("ln1", "attn", "ln2", "ffn")


class Counted:
    """A submodule that counts its calls, so a hint can say "ln2 was never called"."""

    def __init__(self, name: str, module: torch.nn.Module):
        self.name, self.module, self.calls = name, module, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.module(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:  # weight, d_model, ... of the wrapped module
        return getattr(self.module, attr)


def counted_parts(sizes: list[int], state: dict[str, torch.Tensor], max_seq_len: int) -> tuple[Counted, ...]:
    """The four submodules of a pre-norm block of these sizes and weights, each counting its calls."""
    from prenorm_lib.block import TransformerBlock

    block = TransformerBlock(*sizes, max_seq_len, norm="pre")
    block.load_state_dict(state)
    return tuple(Counted(name, getattr(block.eval(), name)) for name in BLOCK_PARTS)


def call_counts(*parts: Counted) -> list[int]:
    """How often each counted submodule was called."""
    return [part.calls for part in parts]


# --- a learner's module as the CS336 handout grades it: its state dict (06) --------------------


def state_dict_of(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the module's state dict."""
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def load_state(module: nn.Module, state: dict[str, torch.Tensor]) -> str:
    """``module.load_state_dict(state)``; "" on success, else the error's text."""
    try:
        module.load_state_dict(state)
    except Exception as exc:  # a learner's module may fail to load in any way
        return f"{type(exc).__name__}: {exc}"[:600]
    return ""


def buffers_of(module: nn.Module) -> list[str]:
    """The names of the module's buffers, saved in the state dict or not."""
    return [name for name, _ in module.named_buffers()]


def shares_weight(module: nn.Module, first: str, second: str) -> bool:
    """True when two dotted attributes are one tensor (a tied embedding and head)."""
    a, b = module, module
    for part in first.split("."):
        a = getattr(a, part, None)
    for part in second.split("."):
        b = getattr(b, part, None)
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.data_ptr() == b.data_ptr()


def set_eval(module: nn.Module) -> None:
    """Put the learner's module in eval mode."""
    module.eval()
