"""The course on a JupyterHub: one class on one server, learners as Unix accounts.

Everything that runs is the ecosystem's: ``jupyterhub`` (its ``LocalProcessSpawner``
starts each learner's server as that learner's Unix user, its ``PAMAuthenticator``
logs learners in with their Unix passwords), ``configurable-http-proxy`` from the npm
registry, and ``nbgitpuller``, which pulls the course from its git repository into a
learner's home and merges later pulls without overwriting the learner's edits. The
glue that is the course's own:

* :mod:`.environment` -- the hub's folder: the course's pinned environment as the
  single-user environment (a venv every learner can run), the proxy, the learners'
  repository, the hub's secrets;
* :mod:`.distribution` -- what learners receive (exercise notebooks, figures; never a
  solution), committed to the learners' repository the link serves;
* :mod:`.accounts` -- learners and teachers as Unix accounts in the groups the hub admits,
  homes no other learner can read;
* :mod:`.config` -- the ``jupyterhub_config.py`` that ties them together (groups, limits,
  timeouts, idle culler), and the nbgitpuller link a teacher hands out;
* :mod:`.spawner` -- ``LocalProcessSpawner`` with a cgroup per learner (memory, CPU);
* :mod:`.service` -- the hub in the background: start, stop, restart (servers kept), status;
* :mod:`.collect` -- the learners' notebooks into ``FOLDER/<learner>/`` with their last-save
  times and late flags, and the grader's feedback back into their homes;
* :mod:`.learner` -- a learner's browser at the front door (the login form), for the tests and
* :mod:`.class_bench` -- N learners at once, measured; each notebook's kernel memory and sizing.

``python -m prenorm_course.hub --help`` lists the commands; ``make hub`` runs ``start``.
"""
