"""The course's own tools, around the model and the lab.

- :mod:`~prenorm_lib.course.checks`: the exercise checkers and their mistake catalogues;
- :mod:`~prenorm_lib.course.exercises`: build the exercise notebooks, check one, grade a
  folder in sandboxed kernels, verify the loop (``python -m prenorm_lib.course.exercises``);
- :mod:`~prenorm_lib.course.site`: the static site (``make site``);
- :mod:`~prenorm_lib.course.classroom`: a notebook as a Voilà dashboard (``make demo``);
- :mod:`~prenorm_lib.course.bench`: the library against torch's own ops (``make bench``).
"""
