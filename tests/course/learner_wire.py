"""Run a checker on a learner's object in the two places it runs for real.

``via`` is a fixture with two params: ``local`` hands the object over as it is (a
notebook's check cell), ``wire`` hands over a ``RemoteObject`` reached through the
grader's JSON wire (``remote.loopback``: the same encoding, agent and decoding as with
a learner's kernel, only without the kernel). Every hint test runs both ways, so a
checker that only works on real objects fails here.
"""

from __future__ import annotations

import pytest

from prenorm_lib.checks.remote import loopback


def through_wire(obj):
    """``obj`` as the grader sees it when it lives in a learner's kernel."""
    return loopback({"answer": obj}).lookup("answer")


@pytest.fixture(params=["local", "wire"])
def via(request):
    return (lambda obj: obj) if request.param == "local" else through_wire
