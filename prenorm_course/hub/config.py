"""The hub's ``jupyterhub_config.py``, and the nbgitpuller link that hands the course out.

The hub listens on ``ip:port`` (127.0.0.1 by default: put a TLS-terminating web server
in front of it for a class over the network), its own process on ``port + 81`` and the
proxy's API on ``port + 1`` (jupyterhub's own 8081 and 8001 for the default 8000); its proxy is the npm registry's
``configurable-http-proxy`` from the hub folder; every learner's server is
``jupyterhub-singleuser`` from the hub's venv, started as the learner's Unix user by
``LocalProcessSpawner``; learners log in with their Unix passwords (PAM). The teacher's
scripts talk to the REST API as the service ``teacher`` with the token in
``state/teacher_token``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

COURSE_FOLDER = "prenorm"  # where the link puts the course in each learner's home
TEACHER_SCOPES = ["admin:users", "admin:servers", "tokens", "list:users", "read:users", "access:servers"]


def config_text(hub: Path, ip: str, port: int) -> str:
    """jupyterhub_config.py for the hub folder ``hub`` (see :mod:`.environment`)."""
    state = hub / "state"
    return f'''# Written by python -m prenorm_course.hub serve; edit the glue there, not here.
from pathlib import Path

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
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allow_existing_users = True  # the learners the teacher added (hub learners add)
c.Spawner.cmd = ["{hub / "venv" / "bin" / "jupyterhub-singleuser"}"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
# The course repository is root's; git reads another user's repository only if system configuration
# (not the command line or the environment's GIT_CONFIG_*) says it is safe: the hub's own file says so.
c.Spawner.environment = {{"GIT_CONFIG_SYSTEM": "{hub / "gitconfig"}"}}
c.JupyterHub.services = [{{"name": "teacher",
                           "api_token": Path("{state / "teacher_token"}").read_text().strip()}}]
c.JupyterHub.load_roles = [{{"name": "teacher", "scopes": {TEACHER_SCOPES!r}, "services": ["teacher"]}}]
'''


def pull_link(base_url: str, repo: str, branch: str, notebook: str | None = None) -> str:
    """The nbgitpuller link: log in, pull the course into ~/prenorm (merging), open JupyterLab there."""
    path = f"{COURSE_FOLDER}/notebooks/exercises/{notebook}" if notebook else f"{COURSE_FOLDER}/notebooks"
    query = urlencode({"repo": repo, "branch": branch, "targetpath": COURSE_FOLDER, "urlpath": f"lab/tree/{path}"})
    return f"{base_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"
