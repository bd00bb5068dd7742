"""Plain data between the grader and a learner's kernel: JSON, with tensors as raw bytes.

The grader never unpickles anything that comes from a learner's process: a pickle can
run code. What crosses is JSON, and everything that is not a JSON scalar is a tagged
object with a ``"$"`` key:

* ``tensor`` -- dtype name, shape, the raw bytes in base64 (none for ``meta``), whether
  it requires grad and whether it is an ``nn.Parameter``;
* ``ndarray`` / ``npscalar`` -- a NumPy array or scalar of a numeric dtype, the same way;
* ``list``, ``tuple``, ``dict`` (any plain keys), ``ellipsis``, ``dtype``;
* ``handle`` -- anything else stays in the learner's process; the grader gets its id,
  type name and a short repr, and may name it in a later request as ``{"$": "ref"}``.

``decode`` treats its input as hostile: unknown tags, dtypes outside a fixed list, a
byte count that disagrees with the shape, too deep nesting or too many items all raise
``WireError``; nothing in a reply can make the grader import or call anything.
"""

from __future__ import annotations

import base64
import math
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_ITEMS", "WireError", "decode", "encode"]

MAX_DEPTH = 32
MAX_ITEMS = 1_000_000  # scalars, tensors and containers in one message
MAX_STRING = 1_000_000  # characters in one string
REPR_CHARS = 80

TORCH_DTYPES = (
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "int8", "int16", "int32", "int64", "uint8", "bool",
)
NUMPY_KINDS = "biufc"  # bool, signed, unsigned, float, complex: never object or void


class WireError(ValueError):
    """A message that is not well-formed plain data."""


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a learner's __repr__ may raise
        text = f"<{type(value).__name__}>"
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 1] + "…"


def type_name(value: Any) -> str:
    """``module.qualname`` of a value's type (``builtins.`` left out)."""
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _encode_tensor(t: Any) -> dict:
    import torch

    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in TORCH_DTYPES or t.layout != torch.strided or t.is_quantized:
        raise TypeError(f"no plain form for a {dtype} {t.layout} tensor")
    data = None
    if t.device.type != "meta":
        # a fresh dense copy: .contiguous() keeps a one-element view with a non-unit stride (not viewable as bytes)
        flat = t.detach().to("cpu").clone(memory_format=torch.contiguous_format).reshape(-1)
        data = _b64(flat.view(torch.uint8).numpy().tobytes()) if flat.numel() else ""
    return {
        "$": "tensor", "dtype": dtype, "shape": list(t.shape), "data": data, "device": t.device.type,
        "requires_grad": bool(t.requires_grad), "parameter": isinstance(t, torch.nn.Parameter),
    }


def _encode_numpy(a: Any, scalar: bool) -> dict:
    if a.dtype.kind not in NUMPY_KINDS:
        raise TypeError(f"no plain form for a NumPy array of dtype {a.dtype}")
    array = a.copy(order="C")  # ascontiguousarray would turn a scalar into shape (1,)
    return {"$": "npscalar" if scalar else "ndarray", "dtype": array.dtype.str, "shape": list(array.shape),
            "data": _b64(array.tobytes())}


def encode(value: Any, keep: Callable[[Any], int] | None = None, _depth: int = 0) -> Any:
    """The plain form of ``value``; objects with none go to ``keep`` (which returns a handle id).

    Without ``keep`` an object that has no plain form is a ``TypeError``. A ``Ref``
    (a handle the grader holds) is written as ``{"$": "ref"}``.
    """
    if _depth > MAX_DEPTH:
        raise TypeError("nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
    if value is Ellipsis:
        return {"$": "ellipsis"}
    if isinstance(value, Ref):
        return {"$": "ref", "id": value.id}
    if kind in (list, tuple):
        return {"$": kind.__name__, "items": [encode(v, keep, _depth + 1) for v in value]}
    if kind is dict:
        return {"$": "dict", "items": [[encode(k, keep, _depth + 1), encode(v, keep, _depth + 1)]
                                        for k, v in value.items()]}
    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")  # only if the process uses them
    try:
        if torch is not None:
            if isinstance(value, torch.Tensor):  # a subclass too: its data is what counts
                return _encode_tensor(value)
            if isinstance(value, torch.Size):
                return {"$": "tuple", "items": list(value)}
            if isinstance(value, torch.dtype):
                return {"$": "dtype", "name": str(value).removeprefix("torch.")}
        if np is not None and isinstance(value, np.ndarray | np.generic):
            return _encode_numpy(np.asarray(value), scalar=isinstance(value, np.generic))
    except TypeError:
        if keep is None:
            raise
    if keep is None:
        raise TypeError(f"no plain form for {type_name(value)}")
    return {"$": "handle", "id": keep(value), "type": type_name(value), "repr": _short_repr(value),
            "callable": callable(value)}


class Ref:
    """A handle the grader holds, sent back to the learner's process by id."""

    __slots__ = ("id",)

    def __init__(self, handle_id: int):
        self.id = handle_id


class _Budget:
    def __init__(self) -> None:
        self.items = 0

    def take(self) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise WireError(f"more than {MAX_ITEMS} items")


def _want(condition: bool, what: str) -> None:
    if not condition:
        raise WireError(what)


def _shape(data: dict) -> tuple[int, ...]:
    shape = data.get("shape")
    _want(isinstance(shape, list) and len(shape) <= 16, "bad shape")
    _want(all(type(n) is int and 0 <= n < 2**31 for n in shape), "bad shape")
    return tuple(shape)


def _raw(data: dict, expected: int) -> bytes:
    text = data.get("data")
    _want(isinstance(text, str) and len(text) <= 4 * (expected // 3 + 2), "bad tensor data")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise WireError("bad tensor data") from exc
    _want(len(raw) == expected, f"tensor data has {len(raw)} bytes, its shape needs {expected}")
    return raw


def _decode_tensor(data: dict) -> Any:
    import torch

    name = data.get("dtype")
    _want(name in TORCH_DTYPES, f"dtype {name!r} is not allowed")
    dtype = getattr(torch, name)
    shape = _shape(data)
    numel = math.prod(shape)
    _want(numel <= 50_000_000, "tensor too large")
    if data.get("device") == "meta":
        t = torch.empty(shape, dtype=dtype, device="meta")
    elif numel == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        itemsize = torch.empty((), dtype=dtype).element_size()
        raw = torch.frombuffer(bytearray(_raw(data, numel * itemsize)), dtype=torch.uint8)
        t = (raw != 0 if dtype == torch.bool else raw.view(dtype)).reshape(shape)
    grad = data.get("requires_grad") is True and (t.is_floating_point() or t.is_complex())
    if data.get("parameter") is True:
        return torch.nn.Parameter(t, requires_grad=grad)
    return t.requires_grad_() if grad else t


def _decode_numpy(data: dict, scalar: bool) -> Any:
    import numpy as np

    try:
        dtype = np.dtype(data.get("dtype"))
    except TypeError as exc:
        raise WireError("bad NumPy dtype") from exc
    _want(dtype.kind in NUMPY_KINDS and dtype.fields is None and not dtype.subdtype, "NumPy dtype not allowed")
    shape = _shape(data)
    numel = math.prod(shape)
    _want(numel <= 50_000_000, "array too large")
    array = np.frombuffer(_raw(data, numel * dtype.itemsize), dtype=dtype).reshape(shape).copy()
    return array[()] if scalar else array


def decode(data: Any, resolve: Callable[[dict], Any] | None = None) -> Any:
    """The value ``data`` stands for; ``resolve`` turns a handle (or a ref) into an object.

    Raises ``WireError`` for anything that is not well-formed plain data.
    """
    return _decode(data, resolve, _Budget(), 0)


def _decode(data: Any, resolve: Callable[[dict], Any] | None, budget: _Budget, depth: int) -> Any:
    budget.take()
    _want(depth <= MAX_DEPTH, "nested too deeply")
    if data is None or type(data) in (bool, int, float):
        return data
    if type(data) is str:
        _want(len(data) <= MAX_STRING, "string too long")
        return data
    _want(type(data) is dict, f"unexpected {type(data).__name__}")
    tag = data.get("$")
    if tag in ("list", "tuple"):
        items = data.get("items")
        _want(isinstance(items, list), "bad items")
        values = [_decode(v, resolve, budget, depth + 1) for v in items]
        return values if tag == "list" else tuple(values)
    if tag == "dict":
        items = data.get("items")
        _want(isinstance(items, list) and all(isinstance(p, list) and len(p) == 2 for p in items), "bad items")
        out = {}
        for key, value in items:
            key = _decode(key, resolve, budget, depth + 1)
            try:
                out[key] = _decode(value, resolve, budget, depth + 1)
            except TypeError as exc:  # an unhashable key
                raise WireError("unhashable dict key") from exc
        return out
    if tag == "float":
        _want(data.get("value") in ("inf", "-inf", "nan"), "bad float")
        return float(data["value"])
    if tag == "ellipsis":
        return Ellipsis
    if tag == "tensor":
        return _decode_tensor(data)
    if tag in ("ndarray", "npscalar"):
        return _decode_numpy(data, scalar=tag == "npscalar")
    if tag == "dtype":
        _want(data.get("name") in TORCH_DTYPES, "dtype not allowed")
        import torch

        return getattr(torch, data["name"])
    if tag in ("handle", "ref"):
        _want(type(data.get("id")) is int, "bad handle")
        _want(resolve is not None, "unexpected handle")
        return resolve(data)
    raise WireError(f"unknown tag {tag!r}")
