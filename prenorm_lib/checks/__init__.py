"""Checkers for the course exercises.

Each notebook imports its own topic module in the code cell right after an
exercise and hands it the learner's object::

    from prenorm_lib.checks import rmsnorm as check
    check.rms_norm(my_rms_norm)

A checker prints one stable line ``Exercise N.M passed: ...`` on success and
raises ``Hint`` (an AssertionError whose message starts ``Exercise N.M: ``) on a
wrong answer. ``NotImplementedError`` from an unfilled scaffold passes through,
which the exercise tool reports as "not done yet".

The topic modules (rmsnorm, ffn, rope, block) are deliberately not imported
here: ``from prenorm_lib.checks import rmsnorm`` loads only the one it needs.
Their shared helpers live in ``prenorm_lib.checks.core``.
"""

from prenorm_lib.checks.core import Hint, passed

__all__ = ["Hint", "passed"]
