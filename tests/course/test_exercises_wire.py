"""The plain data between the grader and a learner's kernel, and both ends of a check request.

No kernel here: ``remote.loopback`` runs the learner-side agent in this process, through
the same JSON. What must hold: every value a checker needs survives the trip exactly;
nothing that arrives can make the grader run code (no pickle, no unknown tags, no dtype
outside a fixed list, sizes checked); a reply that is not the answer to this request is
refused.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch

from prenorm_lib.checks import wire
from prenorm_lib.checks.agent import Agent
from prenorm_lib.checks.remote import Learner, LearnerError, Missing, NoAnswer, RemoteObject, loopback


def round_trip(value):
    return loopback({"value": value}).lookup("value")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int64,
                                   torch.uint8, torch.bool, torch.complex64])
def test_tensors_cross_exactly(dtype):
    t = (torch.randn(2, 3, 4) * 100).to(dtype)
    back = round_trip(t)
    assert back.dtype == dtype and back.shape == t.shape and torch.equal(back, t)


def test_special_tensors_and_values_cross():
    weight = torch.nn.Parameter(torch.ones(3))
    back = round_trip([weight, torch.zeros(2, 0), torch.empty(4, 5, device="meta"), torch.tensor(1.5),
                       torch.ones(2, requires_grad=True) * 2, torch.arange(6).reshape(2, 3).T])
    assert isinstance(back[0], torch.nn.Parameter) and back[0].requires_grad
    assert back[1].shape == (2, 0) and back[2].device.type == "meta" and back[2].shape == (4, 5)
    assert back[3].shape == () and back[3].item() == 1.5
    assert back[4].requires_grad and torch.equal(back[4].detach(), torch.full((2,), 2.0))
    assert torch.equal(back[5], torch.arange(6).reshape(2, 3).T)  # non-contiguous
    plain = round_trip({"a": (1, 2.5, float("inf"), float("nan"), None, True, "x", ...), 3: [torch.float16]})
    assert plain["a"][:2] == (1, 2.5) and math.isinf(plain["a"][2]) and math.isnan(plain["a"][3])
    assert plain["a"][4:] == (None, True, "x", ...) and plain[3] == [torch.float16]
    scalar, array = round_trip(np.float64(2048.0)), round_trip(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert type(scalar) is np.float64 and scalar == 2048.0
    assert array.dtype == np.int32 and array.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_other_objects_stay_in_the_learners_process():
    class Norm(torch.nn.Module):
        pass

    handle = round_trip(Norm())
    assert isinstance(handle, RemoteObject) and handle.remote_type.endswith("Norm") and handle.is_callable
    assert not round_trip(object()).is_callable
    with pytest.raises(TypeError, match="no plain form"):
        wire.encode(object())  # without a handle table nothing else goes out (never a pickle)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"$": "tensor", "dtype": "object", "shape": [1], "data": ""}, "not allowed"),
        ({"$": "tensor", "dtype": "float32", "shape": [2], "data": "AAAA"}, "bytes, its shape needs 8"),
        ({"$": "tensor", "dtype": "float32", "shape": [-1], "data": ""}, "bad shape"),
        ({"$": "tensor", "dtype": "float32", "shape": [2**20, 2**20], "data": ""}, "too large"),
        ({"$": "ndarray", "dtype": "|O", "shape": [1], "data": "AAAAAAAAAAA="}, "not allowed"),
        ({"$": "pickle", "data": "gASVAAAA"}, "unknown tag"),
        ({"$": "handle", "id": 1}, "unexpected handle"),
        ({"$": "float", "value": "__import__('os')"}, "bad float"),
        ([1, 2], "unexpected list"),
        ({"$": "dict", "items": [[{"$": "list", "items": []}, 1]]}, "unhashable"),
    ],
)
def test_malformed_data_is_refused(data, why):
    with pytest.raises(wire.WireError, match=why):
        wire.decode(data)


def test_nesting_and_size_are_bounded():
    deep: dict = {"$": "list", "items": []}
    for _ in range(100):
        deep = {"$": "list", "items": [deep]}
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.decode(deep)
    with pytest.raises(wire.WireError, match="items"):
        wire.decode({"$": "list", "items": [0] * (wire.MAX_ITEMS + 1)})


def test_a_call_names_the_arguments_it_changed_in_place_and_never_writes_into_ours():
    def scale_in_place(x, factor):
        x.mul_(factor)
        return None

    def reshape_in_place(x):
        x.unsqueeze_(0)

    learner = loopback({"scale": scale_in_place, "reshape": reshape_in_place})
    x = torch.ones(3)
    assert learner.lookup("scale")(x, 2.0) is None
    assert learner.changed_arguments == [0]
    assert torch.equal(x, torch.ones(3))  # the grader's tensor is as it was sent
    y = torch.ones(3)
    learner.lookup("reshape")(x=y)
    assert learner.changed_arguments == ["x"] and y.shape == (3,)


def test_an_in_place_change_is_seen_even_if_the_learner_patches_torch_comparisons(monkeypatch):
    """Whether an argument changed is decided grader-side from bytes, not by torch calls in the learner's process."""

    def sneaky(x):
        monkeypatch.setattr(torch, "equal", lambda *a, **k: True)
        monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
        x.add_(1.0)

    learner = loopback({"sneaky": sneaky})
    x = torch.zeros(3)
    learner.lookup("sneaky")(x)
    monkeypatch.undo()
    assert learner.changed_arguments == [0] and torch.equal(x, torch.zeros(3))


def test_a_forged_after_report_is_never_copied_into_the_checkers_tensors():
    """A kernel that reports 'your input is now X' changes nothing here (class 11: no copy-back)."""
    agent = Agent({"f": lambda x: x.sum()})

    def send(request):
        reply = json.loads(agent.handle(json.dumps(request)))
        if request["op"] == "call":
            reply["after"] = [[0, wire.encode(torch.full((3,), 7.0))]]
        return reply

    learner = Learner(send)
    x = torch.zeros(3)
    learner.lookup("f")(x)
    assert torch.equal(x, torch.zeros(3)) and learner.changed_arguments == [0]


def test_a_call_reports_errors_output_and_warnings():
    def noisy(x):
        print("debugging", x)
        warnings.warn("careful", UserWarning, stacklevel=1)
        return x + 1

    def broken(x):
        return x * weigth  # noqa: F821

    def unfinished(x):
        raise NotImplementedError("Exercise 9.9: a placeholder")

    learner = loopback({"noisy": noisy, "broken": broken, "unfinished": unfinished})
    assert learner.lookup("noisy")(1) == 2
    assert learner.printed == ["debugging 1\n", "UserWarning: careful"]
    with pytest.raises(LearnerError) as info:
        learner.lookup("broken")(1)
    assert (info.value.ename, info.value.message) == ("NameError", "name 'weigth' is not defined")
    assert info.value.frame.startswith(" (in broken, line ")
    with pytest.raises(NotImplementedError, match=r"Exercise 9\.9: a placeholder"):
        learner.lookup("unfinished")(1)
    assert isinstance(learner.lookup("nothing"), Missing)


def test_probes_are_the_probes_modules_functions_only():
    learner = loopback({"f": len})
    for name in ("os:system", "system", "prenorm_lib.checks.probes:library_origin", "__all__", "Counted"):
        with pytest.raises(LearnerError, match="is not a course probe"):
            learner.probe(name, ("true",))
    assert learner.probe("library_origin", (learner.lookup("f"),)) == ["builtins.len"]


def test_a_checker_probes_only_with_the_probes_module():
    """``core.probe`` refuses a function that is not one of ``probes.__all__`` (the agent could not find it there)."""
    from prenorm_lib.checks import core, probes

    assert core.probe(len, probes.library_origin, len) == ["builtins.len"]
    with pytest.raises(ValueError, match=r"is not a probe of prenorm_lib\.checks\.probes"):
        core.probe(len, lambda obj: obj, len)


def test_a_reply_to_another_request_is_refused():
    agent = Agent({"x": 1})

    def replay(request):
        reply = json.loads(agent.handle(json.dumps(request)))
        return {**reply, "nonce": "0"}

    with pytest.raises(NoAnswer, match="no answer"):
        Learner(replay).lookup("x")
    with pytest.raises(NoAnswer, match="malformed"):
        Learner(lambda request: {"nonce": request["nonce"], "value": {"$": "pickle"}}).lookup("x")
    with pytest.raises(NoAnswer, match="without a value"):
        Learner(lambda request: {"nonce": request["nonce"]}).lookup("x")


def test_a_one_element_view_with_a_non_unit_stride_crosses():
    for t in (torch.arange(10.0)[::5][:1], torch.arange(12.0).reshape(3, 4)[:1, ::4], torch.arange(6.0)[5:].expand(1)):
        back = round_trip(t)
        assert back.shape == t.shape and torch.equal(back, t)
