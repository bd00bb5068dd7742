"""Checkers for the course exercises.

Each notebook imports its own topic module in the code cell right after an
exercise and hands it the learner's object::

    from prenorm_lib.checks import rmsnorm as check
    check.rms_norm(my_rms_norm)

A checker prints one stable line ``Exercise N.M passed: ...`` on success and
raises ``Hint`` (an AssertionError whose message starts ``Exercise N.M: ``; IPython
shows it as that one line) on a wrong answer. An unfilled exercise prints one line,
``Exercise N.M is not done yet — fill in `my_rms_norm` above``, and returns, so Run
All goes on. ``checker.core`` is the strict form the grader calls, with the learner's
objects living in the learner's own kernel (see ``prenorm_lib.checks.core``).

The topic modules (rmsnorm, ffn, rope, block) are deliberately not imported
here: ``from prenorm_lib.checks import rmsnorm`` loads only the one it needs.
Their shared helpers live in ``prenorm_lib.checks.core``.
"""

from prenorm_lib.checks.core import Hint, passed

__all__ = ["Hint", "passed"]
