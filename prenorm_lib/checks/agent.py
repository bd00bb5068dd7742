"""The learner's side of a check: runs inside the learner's kernel and answers in plain data.

The grader sends a request as the text of one small cell,
``__import__("prenorm_lib.checks.agent", fromlist=["serve"]).serve("<json>")`` (an ordinary
import of the library the kernel already has), and reads the answer from a display message
of type ``REPLY_MIME``. Four requests:

* ``lookup`` -- the value of a name in the notebook's namespace;
* ``call`` -- call an object with arguments the grader chose, and report the result,
  every tensor argument as it is after the call (the grader decides whether it changed),
  and what it printed or warned;
* ``facts`` -- plain facts about a learner object: its type names, its parameters' names
  and shapes, the type names and bytes of attributes the grader names; the grader decides
  what they mean ("is `weight` an nn.Parameter of ones") from these strings and bytes;
* ``probe`` -- run one of the course's probes (:mod:`prenorm_lib.checks.probes`, by name) on
  learner objects, for actions only (give a module the checker's weights, count calls).

Objects with no plain form stay here in a table; the grader gets handles to them.

Nothing here is trusted: the learner's code runs in this process and may replace any
of it. That is harmless by design, because the grader decides, from the data alone,
by comparing it with references it computes itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from typing import Any

from prenorm_lib.checks import probes, wire

REPLY_MIME = "text/x-prenorm-reply"
OUTPUT_CHARS = 2000


class Agent:
    """Answers requests about one namespace (the kernel's, unless one is given)."""

    def __init__(self, namespace: dict | None = None):
        self._namespace = namespace
        self._objects: dict[int, Any] = {}

    def namespace(self) -> dict:
        if self._namespace is None:
            from IPython import get_ipython

            return get_ipython().user_ns
        return self._namespace

    def keep(self, obj: Any) -> int:
        handle_id = len(self._objects) + 1
        self._objects[handle_id] = obj
        return handle_id

    def resolve(self, data: dict) -> Any:
        return self._objects[data["id"]]

    def handle(self, request_text: str) -> str:
        """One request in, one reply out (both JSON text)."""
        request = json.loads(request_text)
        try:
            body = getattr(self, f"_op_{request['op']}")(request)
        except Exception as exc:  # a failure of the agent itself, e.g. a result it cannot encode
            body = {"error": probes.error_facts(exc)}
        return json.dumps({"nonce": request.get("nonce"), **body})

    def _op_lookup(self, request: dict) -> dict:
        namespace = self.namespace()
        if request["name"] not in namespace:
            return {"missing": True}
        return {"value": wire.encode(namespace[request["name"]], self.keep)}

    def _arguments(self, request: dict) -> tuple[list, dict]:
        return wire.decode(request["args"], self.resolve), wire.decode(request["kwargs"], self.resolve)

    def _op_call(self, request: dict) -> dict:
        target = self._objects[request["target"]]
        args, kwargs = self._arguments(request)
        inputs = dict(enumerate(args)) | kwargs
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), \
                warnings.catch_warnings(record=True) as caught, _grad_mode(request.get("grad", True)):
            warnings.simplefilter("always")
            try:
                result = target(*args, **kwargs)
                body = {"value": wire.encode(result, self.keep)}
            except KeyboardInterrupt:  # the grader's interrupt after a timeout
                raise
            except BaseException as exc:  # the learner's code may raise anything, SystemExit included
                body = {"error": probes.error_facts(exc)}
        # every tensor argument as it is now: whether the call changed it is decided by the grader,
        # from these bytes and what it sent, not here with comparisons the learner's code could patch
        body["after"] = [[key, wire.encode(value)] for key, value in inputs.items() if _is_tensor(value)]
        body["out"] = out.getvalue()[:OUTPUT_CHARS]
        body["warnings"] = [f"{w.category.__name__}: {w.message}"[:500] for w in caught[:5]]
        return body

    def _op_facts(self, request: dict) -> dict:
        """Plain facts about one object (type names, parameter shapes, attribute tensors); no verdict."""
        attributes = [a for a in request.get("attributes", []) if isinstance(a, str)]
        return {"value": wire.encode(probes.facts_of(self._objects[request["target"]], attributes))}

    def _op_probe(self, request: dict) -> dict:
        name = request["function"]
        if name not in probes.__all__:
            raise ValueError(f"{name!r} is not a course probe")
        function = getattr(probes, name)
        args, kwargs = self._arguments(request)
        return {"value": wire.encode(function(*args, **kwargs), self.keep)}


def _is_tensor(value: Any) -> bool:
    """A tensor argument with data (its state after the call goes back to the grader)."""
    module = type(value).__module__ or ""
    if module.startswith("torch"):
        import torch

        return isinstance(value, torch.Tensor) and value.device.type != "meta"
    return False


@contextlib.contextmanager
def _grad_mode(enabled: Any):
    """The grader's autograd mode (``torch.no_grad()`` around a call there holds here too)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    with torch.set_grad_enabled(enabled is not False):
        yield


_AGENT = Agent()


def serve(request_text: str) -> None:
    """Answer one request in a kernel: the reply goes out as a display message."""
    from IPython.display import display

    display({REPLY_MIME: _AGENT.handle(request_text)}, raw=True)
