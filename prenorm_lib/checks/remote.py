"""The grader's side of a learner's process: objects that stay there, called from here.

A checker receives the learner's function as a ``RemoteObject``. Calling it sends the
arguments (tensors, numbers, other handles) to the learner's process as plain data
(:mod:`prenorm_lib.checks.wire`), the learner's code runs *there*, and only plain
data comes back: the result, each tensor argument as it is after the call (compared here
with what was sent, to name an input the call changed in place; never copied into the
caller's tensors), what the call printed and warned. A learner's exception comes back as its type name, message
and line (``LearnerError``); ``NotImplementedError`` is raised here as itself, so an
unfilled placeholder still reads as "not done".

What the learner's process answers is data to be judged, never a verdict: a tampered
process can at most return numbers, and a checker accepts numbers only if they match
the reference it computed itself. ``Learner`` works over any ``send`` function: the
kernel session of the grader (``prenorm_course.exercises.kernel``), or ``loopback`` (the agent in
this process, through the same JSON), which the tests use.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from prenorm_lib.checks import wire

__all__ = [
    "KernelProblem", "KernelStopped", "Learner", "LearnerError", "LearnerTimeout", "Missing", "NoAnswer",
    "RemoteObject", "loopback",
]


class LearnerError(Exception):
    """The learner's code raised: type name, message, where, and a did-you-mean."""

    def __init__(self, facts: dict):
        self.ename = str(facts.get("type", "Exception"))[:100]
        self.message = str(facts.get("message", ""))[:2000]
        self.frame = str(facts.get("frame", ""))[:200]
        self.suggestion = str(facts.get("suggestion", ""))[:200]
        super().__init__(f"{self.ename}: {self.message}")


class KernelProblem(Exception):
    """The learner's process did not answer properly; never a pass, never a hint."""


class LearnerTimeout(KernelProblem):
    """A call ran past its time limit (the kernel was interrupted)."""


class KernelStopped(KernelProblem):
    """The learner's process ended (``exit()``, ``os._exit``, a crash, a resource limit)."""


class NoAnswer(KernelProblem):
    """The learner's process sent no well-formed answer (its code changed how cells run?)."""


class Missing:
    """``lookup`` of a name the learner's namespace does not have."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Missing({self.name!r})"


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


class RemoteObject:
    """An object in the learner's process: its type, a short repr, and a way to call it."""

    __slots__ = ("handle_id", "is_callable", "learner", "remote_repr", "remote_type")

    def __init__(self, learner: Learner, data: dict):
        self.learner = learner
        self.handle_id = data["id"]
        self.remote_type = _text(data.get("type"), 200) or "object"
        self.remote_repr = _text(data.get("repr"), 200) or f"<{self.remote_type}>"
        self.is_callable = data.get("callable") is True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.learner.call(self, args, kwargs)

    def __repr__(self) -> str:
        return self.remote_repr


class Learner:
    """Requests to one learner's process through ``send(request) -> reply`` (JSON-able dicts).

    ``send`` raises ``KernelProblem`` when the process does not answer; the reply is
    checked here (its nonce, its shape) and decoded as untrusted data.
    """

    def __init__(self, send: Callable[[dict], Any]):
        self._send = send
        self.printed: list[str] = []  # what the learner's calls printed or warned, for notes
        self._torch = None
        self.changed_arguments: list = []  # positions and names of the inputs the last call changed in place

    # -- the three requests -----------------------------------------------------------------

    def lookup(self, name: str) -> Any:
        """The value of ``name`` in the learner's namespace: plain data, a RemoteObject or ``Missing``."""
        reply = self._request({"op": "lookup", "name": name})
        if reply.get("missing") is True:
            return Missing(name)
        return self._value(reply)

    def call(self, target: RemoteObject, args: tuple, kwargs: dict) -> Any:
        """Call ``target(*args, **kwargs)`` there; ``changed_arguments`` then names the inputs it changed."""
        self.changed_arguments = []
        torch = self._import_torch()
        sent = {key: self._encode(value) for key, value in (dict(enumerate(args)) | dict(kwargs)).items()}
        reply = self._request({
            "op": "call", "target": target.handle_id, "args": self._encode(list(args)),
            "kwargs": self._encode(dict(kwargs)), "grad": bool(torch.is_grad_enabled()) if torch else True,
        })
        self._note_output(reply)
        if "error" in reply:
            self._raise(reply["error"])
        self.changed_arguments = self._changed(reply.get("after"), sent)
        return self._value(reply)

    def facts(self, target: RemoteObject, attributes: list[str]) -> Any:
        """Plain facts about ``target`` (type names, parameter shapes, attribute tensors), decoded as data."""
        reply = self._request({"op": "facts", "target": target.handle_id, "attributes": list(attributes)})
        if "error" in reply:
            self._raise(reply["error"])
        return self._value(reply)

    def probe(self, function: str, args: tuple, kwargs: dict | None = None) -> Any:
        """Run the course's probe ``module:qualname`` there on learner objects; its result comes back."""
        reply = self._request({"op": "probe", "function": function, "args": self._encode(list(args)),
                               "kwargs": self._encode(dict(kwargs or {}))})
        if "error" in reply:
            self._raise(reply["error"])
        return self._value(reply)

    # -- plumbing -------------------------------------------------------------------------

    def _import_torch(self):
        if self._torch is None:
            import torch

            self._torch = torch
        return self._torch

    def _encode(self, value: Any) -> Any:
        def refuse(obj: Any) -> int:
            raise TypeError(f"cannot send a {type(obj).__name__} to the learner's process")

        return wire.encode(self._refs(value), keep=refuse)

    def _refs(self, value: Any) -> Any:
        """RemoteObjects (possibly inside lists, tuples, dicts) become ``wire.Ref``."""
        if isinstance(value, RemoteObject):
            if value.learner is not self:
                raise ValueError("a RemoteObject of another learner")
            return wire.Ref(value.handle_id)
        if type(value) in (list, tuple):
            return type(value)(self._refs(v) for v in value)
        if type(value) is dict:
            return {k: self._refs(v) for k, v in value.items()}
        return value

    def _request(self, request: dict) -> dict:
        nonce = secrets.token_hex(8)  # not guessable by code that only sees earlier requests
        reply = self._send({**request, "nonce": nonce})
        if not isinstance(reply, dict) or reply.get("nonce") != nonce:
            raise NoAnswer("the learner's kernel sent no answer to the check")
        return reply

    def _decode(self, data: Any) -> Any:
        def resolve(handle: dict) -> RemoteObject:
            if handle.get("$") != "handle":
                raise wire.WireError("a ref in a reply")
            return RemoteObject(self, handle)

        try:
            return wire.decode(data, resolve)
        except wire.WireError as exc:
            raise NoAnswer(f"the learner's kernel sent malformed data ({exc})") from None

    def _value(self, reply: dict) -> Any:
        if "value" not in reply:
            raise NoAnswer("the learner's kernel sent an answer without a value")
        return self._decode(reply["value"])

    def _raise(self, facts: Any) -> None:
        if not isinstance(facts, dict):
            raise NoAnswer("the learner's kernel sent a malformed error")
        error = LearnerError(facts)
        if error.ename == "NotImplementedError":
            raise NotImplementedError(error.message)
        raise error

    def _note_output(self, reply: dict) -> None:
        for key in ("out", "warnings"):
            value = reply.get(key)
            items = value if isinstance(value, list) else [value]
            self.printed += [item[:500] for item in items if isinstance(item, str) and item.strip()][:5]

    def _changed(self, after: Any, sent: dict) -> list:
        """The arguments the learner's call changed in place, decided here from plain data.

        ``after`` is each tensor argument's encoding after the call, as the learner's
        process reports it; an argument changed if that differs from the exact encoding
        we sent. Nothing in it is copied into our tensors: a report is never taken as
        the new value of a checker's input.
        """
        if not after:
            return []
        if not isinstance(after, list) or not all(isinstance(i, list) and len(i) == 2 for i in after):
            raise NoAnswer("malformed list of changed arguments")
        return [key for key, data in after if isinstance(key, int | str) and key in sent and data != sent[key]]


def loopback(namespace: dict) -> Learner:
    """A Learner whose 'process' is an agent in this one, reached through the same JSON.

    For tests: everything a checker sees goes through encoding and decoding exactly as
    with a kernel, only the transport is a function call.
    """
    from prenorm_lib.checks.agent import Agent

    agent = Agent(namespace)
    return Learner(lambda request: json.loads(agent.handle(json.dumps(request))))
