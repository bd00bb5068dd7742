"""The exercise tool: build, check, grade and verify the course exercises.

Run it as ``python -m prenorm_course.exercises <command>`` (see ``--help``):

* ``build``  -- write notebooks/exercises/ from the solution notebooks
  (``--check`` only reports exercise notebooks that are out of date);
* ``check PATH`` -- check a learner's notebook against the course run;
* ``grade FOLDER`` -- check a folder of learner notebooks into a table;
* ``verify`` -- what CI runs: up to date, unfilled runs to the end and fails,
  filled-in passes.

The verdict is computed where learner code never runs: the learner's notebook runs
in its own sandboxed kernel, and the checkers run in the grader, calling the
learner's functions there and judging only the plain data that comes back.

The course root is found from the installed package; ``PRENORM_ROOT``
overrides it. Modules: ``markers`` (the conventions), ``build``, ``check`` (one
notebook), ``grade``, ``verify``; underneath, ``kernel`` (one learner's kernel),
``sandbox`` (its folder, limits and bubblewrap confinement), ``limits`` (every limit of
grading, in one ``GradingLimits``), ``withheld`` (what its copy of the library lacks: the
answers, derived from the exercises' records in ``prenorm_lib.checks.catalogue``). The
protocol between grader and kernel is the library's own, beside the checkers:
``prenorm_lib.checks.agent`` (the learner's side of a check), ``remote`` (the grader's side),
``wire`` (the plain data between them) and ``probes`` (all that runs on learner objects).
"""
