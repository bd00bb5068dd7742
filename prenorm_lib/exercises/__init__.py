"""The exercise tool: build, check, grade and verify the course exercises.

Run it as ``python -m prenorm_lib.exercises <command>`` (see ``--help``):

* ``build``  -- write notebooks/exercises/ from the solution notebooks
  (``--check`` only reports exercise notebooks that are out of date);
* ``check PATH`` -- check a learner's notebook against the course run;
* ``grade FOLDER`` -- check a folder of learner notebooks into a table;
* ``verify`` -- what CI runs: up to date, unfilled fails, filled-in passes.

The course root is found from the installed package; ``PRENORM_ROOT``
overrides it. Modules: ``markers`` (the conventions), ``build``, ``runner``
(one nbval run), ``check``, ``grade``, ``verify``.
"""
