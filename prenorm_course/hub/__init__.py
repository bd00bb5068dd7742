"""The course on a JupyterHub: one class on one server, learners as Unix accounts.

Everything that runs is the ecosystem's: ``jupyterhub`` (its ``LocalProcessSpawner``
starts each learner's server as that learner's Unix user, its ``PAMAuthenticator``
logs learners in with their Unix passwords), ``configurable-http-proxy`` from the npm
registry, and ``nbgitpuller``, which pulls the course from its git repository into a
learner's home and merges later pulls without overwriting the learner's edits. The
glue that is the course's own:

* :mod:`.environment` -- the hub's folder: the course's pinned environment as the
  single-user environment (a venv every learner can run), the proxy, the course as a
  bare git repository served over ``file://``, the hub's secrets;
* :mod:`.accounts` -- learners as Unix accounts whose homes no other learner can read;
* :mod:`.config` -- the ``jupyterhub_config.py`` that ties them together, and the
  nbgitpuller link a teacher hands out;
* :mod:`.collect` -- the learners' notebooks copied into ``FOLDER/<learner>/`` for
  ``python -m prenorm_course.exercises grade FOLDER``.

``python -m prenorm_course.hub --help`` lists the commands; ``make hub`` runs
``prepare`` and ``serve``.
"""
