"""The hub as a service: started in the background, outliving the teacher's terminal; stopped, restarted, asked.

``start`` writes ``jupyterhub_config.py`` and ``state/hub.json`` (where the hub answers,
its limits), starts JupyterHub in a session of its own (no terminal: closing the teacher's
SSH session or pressing Ctrl-C does not reach it) with its output in ``state/jupyterhub.log``,
and returns once the hub answers. ``stop`` stops every learner's server through the hub,
then the hub and its proxy (the end of a class); ``restart`` stops only the hub and starts
it again, keeping the learners' servers and their kernels (the hub finds them again from its
database; its proxy starts anew with it, so for the seconds of the restart a learner's page
cannot reach its server, and then goes on). ``status`` says what runs.

The teacher's commands find the hub folder as the hub uses it: ``--dir``, else ``$HUB_DIR``
(what ``make`` passes), else the folder the last ``make hub`` of this checkout started
(``.hub-dir`` in the checkout), else ``/srv/prenorm-hub`` with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from prenorm_course.hub.config import Limits, config_text

DEFAULT_HUB = Path("/srv/prenorm-hub")
RECORD = ".hub-dir"  # in the checkout: the hub folder its last `make hub` started


class HubNotRunning(RuntimeError):
    """The hub does not answer: the teacher's command that needs it says why."""


def find_hub(given: Path | None, root: Path | None, warn=None) -> Path:
    """The hub folder the teacher means (see the module's text); warns through ``warn`` where it must guess."""
    warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr))
    if given is not None:
        return given.resolve()
    if os.environ.get("HUB_DIR"):
        return Path(os.environ["HUB_DIR"]).resolve()
    record = root / RECORD if root is not None else None
    if record is not None and record.is_file():
        return Path(record.read_text().strip())
    warn(f"no hub folder given (--dir or HUB_DIR) and none recorded by `make hub` in this checkout: "
         f"using {DEFAULT_HUB}, which may not be the hub your learners use")
    return DEFAULT_HUB


def hub_pid(hub: Path) -> int | None:
    """The hub's pid if it runs, else None."""
    return _alive(hub / "state" / "jupyterhub.pid")


def _alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def info(hub: Path) -> dict:
    """What ``start`` recorded: the hub's url, ip, port and limits."""
    path = hub / "state" / "hub.json"
    if not path.is_file():
        raise HubNotRunning(f"the hub folder {hub} has no state/hub.json: no hub was started there (make hub)")
    return json.loads(path.read_text())


class Api:
    """The hub's REST API as the service ``teacher``."""

    def __init__(self, hub: Path):
        self.base = info(hub)["url"] + "/hub/api"
        self.headers = {"Authorization": f"token {(hub / 'state' / 'teacher_token').read_text().strip()}"}

    def __call__(self, method: str, path: str, ok=(200, 201, 202, 204), **kwargs):
        try:
            response = requests.request(method, self.base + path, headers=self.headers, timeout=60, **kwargs)
        except requests.ConnectionError as exc:
            raise HubNotRunning(f"the hub at {self.base} does not answer ({type(exc).__name__})") from exc
        if response.status_code not in ok:
            raise RuntimeError(f"the hub answered {response.status_code} to {method} {path}: {response.text[:300]}")
        return response

    def answers(self) -> bool:
        try:
            self("GET", "/")
        except (HubNotRunning, RuntimeError):
            return False
        return True

    def user(self, name: str) -> dict | None:
        response = self("GET", f"/users/{name}", ok=(200, 404))
        return response.json() if response.status_code == 200 else None

    def servers(self) -> dict[str, dict]:
        """name -> its default server, for every user whose server runs or is starting or stopping."""
        users = self("GET", "/users", params={"state": "active", "limit": 10000}).json()
        return {u["name"]: u["servers"][""] for u in users if "" in u.get("servers", {})}

    def stop_server(self, name: str, seconds: float = 120) -> None:
        """Stop ``name``'s server and wait until the hub says it has stopped."""
        self("DELETE", f"/users/{name}/server", ok=(202, 204, 400, 404))
        deadline = time.monotonic() + seconds
        while (user := self.user(name)) is not None and user.get("servers", {}).get(""):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}'s server had not stopped {seconds:.0f} s after the hub was asked")
            time.sleep(0.3)


def start(root: Path, hub: Path, ip: str, port: int, limits: Limits, wait: float = 180, log=print,
          record: bool = True) -> int:
    """Start the hub in the background on ``hub`` (prepared already); return its pid once it answers. With
    ``record``, the checkout remembers ``hub`` as its hub folder (the teacher's later commands find it)."""
    hub = hub.resolve()
    running = hub_pid(hub)
    if running:
        log(f"the hub of {hub} runs already (pid {running}, {info(hub)['url']}); "
            "make hub-restart applies new settings, make hub-stop stops it")
        return running
    state = hub / "state"
    config = hub / "jupyterhub_config.py"
    config.write_text(config_text(hub, ip, port, limits))
    url = f"http://{'127.0.0.1' if ip in ('', '0.0.0.0') else ip}:{port}"
    (state / "hub.json").write_text(json.dumps({"url": url, "ip": ip, "port": port, "memory": limits.memory,
                                                "cpus": limits.cpus, "cull_idle": limits.cull_idle}, indent=1))
    with contextlib.suppress(FileNotFoundError):
        (state / "jupyterhub.pid").unlink()
    logfile = state / "jupyterhub.log"
    with open(logfile, "ab") as out:
        process = subprocess.Popen([str(hub / "venv" / "bin" / "jupyterhub"), "-f", str(config)], cwd=state,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True, close_fds=True)
    if record:
        (root / RECORD).write_text(f"{hub}\n")
    deadline = time.monotonic() + wait
    api = Api(hub)
    while not api.answers():
        if process.poll() is not None:
            tail = logfile.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"jupyterhub stopped as it started (exit {process.returncode}); {logfile} ends:\n{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the hub did not answer within {wait:.0f} s; see {logfile}")
        time.sleep(0.3)
    log(f"the hub runs in the background (pid {process.pid}) at {url}; its log: {logfile}")
    log("make hub-status says what runs, make hub-stop stops it and every learner's server")
    return process.pid


def _terminate(pid: int, seconds: float) -> bool:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def stop(hub: Path, keep_servers: bool = False, log=print) -> None:
    """Stop the hub; unless ``keep_servers``, every learner's server (through the hub) and the proxy first."""
    pid = hub_pid(hub)
    if pid is None:
        log(f"no hub runs in {hub}")
    else:
        if not keep_servers:
            api = Api(hub)
            servers = api.servers()
            for name in servers:
                api("DELETE", f"/users/{name}/server", ok=(202, 204, 400, 404))
            for name in servers:
                api.stop_server(name)
            if servers:
                log(f"stopped {len(servers)} learner server(s): {', '.join(sorted(servers))}")
        if not _terminate(pid, 60):
            raise RuntimeError(f"the hub (pid {pid}) did not stop within 60 s of SIGTERM")
        log(f"stopped the hub (pid {pid})" + ("; the learners' servers run on" if keep_servers else ""))
    proxy = _alive(hub / "state" / "proxy.pid")
    if proxy and not keep_servers:
        _terminate(proxy, 20)
        log(f"stopped the proxy (pid {proxy})")


def status(hub: Path) -> list[str]:
    """Lines saying what runs in ``hub``."""
    pid, proxy = hub_pid(hub), _alive(hub / "state" / "proxy.pid")
    lines = [f"hub folder: {hub}"]
    if pid is None:
        lines.append("hub: not running" + (f" (its proxy runs: pid {proxy})" if proxy else ""))
        return lines
    recorded = info(hub)
    api = Api(hub)
    lines.append(f"hub: running, pid {pid}, at {recorded['url']}" + ("" if api.answers() else ", NOT answering"))
    lines.append(f"proxy: {'pid ' + str(proxy) if proxy else 'not running'}")
    lines.append(f"limits per learner: memory {recorded['memory']}, {recorded['cpus']:g} CPU; "
                 f"idle servers stopped after {recorded['cull_idle']} s")
    services = {s["name"]: s for s in api("GET", "/services").json().values()} if api.answers() else {}
    culler = services.get("idle-culler", {})
    lines.append("idle culler: " + ("running" if culler.get("pid") else "NOT running"))
    if api.answers():
        servers = api.servers()
        ready = sorted(n for n, s in servers.items() if s.get("ready"))
        lines.append(f"learner servers: {len(ready)} running" + (f" ({', '.join(ready)})" if ready else "")
                     + (f", {len(servers) - len(ready)} starting or stopping" if len(servers) > len(ready) else ""))
    lines.append(f"log: {hub / 'state' / 'jupyterhub.log'}")
    return lines
