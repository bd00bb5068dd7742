"""The course's own tools, beside the learner's library and never imported by it.

A learner installs ``prenorm_lib`` (the model, the lab, the exercise checkers); a teacher
or a maintainer runs these from a checkout of the course, through ``make``:

- :mod:`~prenorm_course.exercises`: build the exercise notebooks, check one, grade a
  folder in sandboxed kernels, verify the loop (``make exercises``, ``check``, ``grade``);
- :mod:`~prenorm_course.site`: the static site (``make site``);
- :mod:`~prenorm_course.classroom`: a notebook as a Voilà dashboard (``make demo``);
- :mod:`~prenorm_course.bench`: the library against torch's own ops (``make bench``).
"""
