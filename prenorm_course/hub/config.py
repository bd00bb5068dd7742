"""The hub's ``jupyterhub_config.py``, and the nbgitpuller link that hands the course out.

The hub listens on ``ip:port`` (127.0.0.1 by default: put a TLS-terminating web server
in front of it for a class over the network), its own process on ``port + 81`` and the
proxy's API on ``port + 1`` (jupyterhub's own 8081 and 8001 for the default 8000); its proxy is the npm registry's
``configurable-http-proxy`` from the hub folder; every learner's server is
``jupyterhub-singleuser`` from the hub's venv, started as the learner's Unix user by
:class:`.spawner.CgroupSpawner` (``LocalProcessSpawner`` in a cgroup with the learner's
memory and CPU limits). Who may log in is decided by Unix groups: PAM checks the password,
members of ``prenorm-learners`` and ``prenorm-teachers`` are admitted (the hub makes its
user at the first login) and teachers are the hub's admins (``/hub/admin``).

A class starts together: a learner's server may take ``START_TIMEOUT`` seconds to start
and to answer (``Spawner.http_timeout``, JupyterHub's 30 s by default, is what stopped 28
of 30 learners who started at once), and JupyterHub starts at most ``concurrent_spawn_limit``
at a time. ``jupyterhub-idle-culler`` runs as a hub service and stops a server idle for
``cull_idle`` seconds (its kernels with it; the learner's files stay). The hub keeps the
learners' servers when it stops (``cleanup_servers = False``), so a restart (a new
configuration, a new version) does not end anyone's work. The teacher's scripts talk to
the REST API as the service ``teacher`` with the token in ``state/teacher_token``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from prenorm_course.hub.accounts import LEARNERS_GROUP, TEACHERS_GROUP

COURSE_FOLDER = "prenorm"  # where the link puts the course in each learner's home
TEACHER_SCOPES = ["admin:users", "admin:servers", "tokens", "list:users", "read:users", "access:servers",
                  "list:services", "read:services"]
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]
START_TIMEOUT = 600  # seconds a learner's server may take to start, and to answer its first request
GLUE = "glue"  # the hub folder's copy of the spawner module, imported by jupyterhub_config.py


@dataclass(frozen=True)
class Limits:
    """Per learner: memory (e.g. "2G", JupyterHub's ByteSpecification), CPUs, idle seconds before culling."""

    memory: str = "2G"
    cpus: float = 1.0
    cull_idle: int = 3600
    concurrent_spawns: int = 100  # JupyterHub's default

    def __post_init__(self):
        if self.cpus <= 0:
            raise ValueError(f"CPU limit {self.cpus!r}: expected a positive number of cores, e.g. 1 or 0.5")
        if self.cull_idle < 60:
            raise ValueError(f"idle culling after {self.cull_idle!r} s: expected at least 60 seconds")
        if not self.memory or not (self.memory[:-1] if self.memory[-1] in "KMGT" else self.memory).isdigit():
            raise ValueError(f"memory limit {self.memory!r}: expected bytes or a number with K, M, G or T, e.g. 2G")


def config_text(hub: Path, ip: str, port: int, limits: Limits = Limits()) -> str:
    """jupyterhub_config.py for the hub folder ``hub`` (see :mod:`.environment`)."""
    state, venv = hub / "state", hub / "venv"
    return f'''# Written by python -m prenorm_course.hub start; edit the glue there, not here.
import sys
from pathlib import Path

sys.path.insert(0, "{hub / GLUE}")
c = get_config()  # noqa: F821
c.JupyterHub.ip = {ip!r}
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
# Beside the public port (jupyterhub's defaults 8000/8001/8081 when it is 8000): two hubs on one machine do not meet.
c.JupyterHub.hub_port = {port + 81}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{port + 1}"
c.JupyterHub.db_url = "sqlite:///{state / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = "{state / "jupyterhub_cookie_secret"}"
c.JupyterHub.pid_file = "{state / "jupyterhub.pid"}"
c.ConfigurableHTTPProxy.command = ["{hub / "node" / "node_modules" / ".bin" / "configurable-http-proxy"}"]
c.ConfigurableHTTPProxy.pid_file = "{state / "proxy.pid"}"
# A restart of the hub keeps every learner's server (the proxy starts anew with the hub).
c.JupyterHub.cleanup_servers = False
c.JupyterHub.cleanup_proxy = False
# Who logs in: a Unix password (PAM) of an account in one of the course's groups (hub learners/teachers add).
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {{{LEARNERS_GROUP!r}, {TEACHERS_GROUP!r}}}
c.PAMAuthenticator.admin_groups = {{{TEACHERS_GROUP!r}}}
c.JupyterHub.spawner_class = "prenorm_hub_spawner.CgroupSpawner"
c.Spawner.cmd = ["{venv / "bin" / "jupyterhub-singleuser"}"]
c.Spawner.default_url = "/lab"
c.Spawner.mem_limit = {limits.memory!r}
c.Spawner.cpu_limit = {float(limits.cpus)!r}
# A class that logs in together: every server may take this long to start and to answer (default 60 s / 30 s).
c.Spawner.start_timeout = {START_TIMEOUT}
c.Spawner.http_timeout = {START_TIMEOUT}
c.JupyterHub.concurrent_spawn_limit = {limits.concurrent_spawns}
# The course repository is root's; git reads another user's repository only if system configuration
# (not the command line or the environment's GIT_CONFIG_*) says it is safe: the hub's own file says so.
c.Spawner.environment = {{"GIT_CONFIG_SYSTEM": "{hub / "gitconfig"}"}}
c.JupyterHub.services = [
    {{"name": "teacher", "api_token": Path("{state / "teacher_token"}").read_text().strip()}},
    {{"name": "idle-culler",
      "command": ["{venv / "bin" / "python"}", "-m", "jupyterhub_idle_culler", "--timeout={limits.cull_idle}"]}},
]
c.JupyterHub.load_roles = [
    {{"name": "teacher", "scopes": {TEACHER_SCOPES!r}, "services": ["teacher"]}},
    {{"name": "idle-culler", "scopes": {CULLER_SCOPES!r}, "services": ["idle-culler"]}},
]
'''


def pull_link(base_url: str, repo: str, branch: str, notebook: str | None = None) -> str:
    """The nbgitpuller link: log in, pull the course into ~/prenorm (merging), open JupyterLab there."""
    path = f"{COURSE_FOLDER}/notebooks/exercises/{notebook}" if notebook else f"{COURSE_FOLDER}/notebooks/exercises"
    query = urlencode({"repo": repo, "branch": branch, "targetpath": COURSE_FOLDER, "urlpath": f"lab/tree/{path}"})
    return f"{base_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"
