"""The course's grader as a Gradescope autograder.

Gradescope grades each submission in a container of its own, built from a zip the
teacher uploads (``setup.sh`` and ``run_autograder`` at its root; see
https://gradescope-autograders.readthedocs.io/en/latest/specs/). This package is
only the glue between that layout and the course's grader:

* ``python -m prenorm_course.gradescope build OUT.zip`` (``make gradescope``) writes
  the zip (:mod:`.autograder_zip`): the pinned requirements, the library, the grader,
  the course notebooks and which of them the assignment grades;
* ``python -m prenorm_course.gradescope run`` is what ``run_autograder`` calls in the
  container (:mod:`.results`): every submitted notebook is checked by
  :func:`prenorm_course.exercises.check.check_notebook` -- the same kernels, the same
  verdicts computed outside the learner's kernel -- and ``results.json`` gets one test
  per exercise, with the grader's one-line hint as its output.
"""
