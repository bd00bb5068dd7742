"""Argument checks shared by the library.

Every message names the argument, the value it got and what was expected, so that a
learner who passes the wrong thing reads what to change instead of a shape error from
deep inside a matmul.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive ``int``; raise otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return value


def positive_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 0; raise otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number > 0, got {value!r} ({type(value).__name__})")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return float(value)


def choice(name: str, value: object, allowed: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``allowed``; raise naming the options otherwise."""
    allowed = tuple(allowed)
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value  # type: ignore[return-value]


def tensor(name: str, value: object) -> torch.Tensor:
    """Return ``value`` if it is a tensor; raise a TypeError naming the argument otherwise."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def last_dim(name: str, x: torch.Tensor, expected: int, meaning: str = "d_model") -> None:
    """Refuse a tensor whose last dimension is not ``expected`` (no silent broadcasting)."""
    tensor(name, x)
    if x.ndim == 0 or x.shape[-1] != expected:
        raise ValueError(
            f"{name} must have last dimension {meaning}={expected}, got shape {tuple(x.shape)}"
        )


def floating(name: str, x: torch.Tensor) -> None:
    """Refuse integer or boolean tensors where real numbers are needed."""
    tensor(name, x)
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def values_checked(x: torch.Tensor) -> bool:
    """Whether to run a check that reads ``x``'s values (a range check on ids or positions).

    Shape and dtype checks cost nothing and always run. A value check does not: on a GPU
    it copies a number back to the host and waits for the device, every step, and under
    ``torch.compile`` it breaks the graph (``tests/model/test_compile.py``). So it runs
    where it is free and where learners meet it, in eager mode on the CPU; compiled or on
    an accelerator, an id out of range fails in the lookup itself (an index error).
    """
    return x.device.type == "cpu" and not torch.compiler.is_compiling()
