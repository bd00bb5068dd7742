"""Start and stop the local servers the browser tests talk to.

Every server binds to the loopback address on a free port, runs with its own
throw-away Jupyter folders (so a learner's settings, kernels or workspaces can
neither leak in nor be overwritten) and is stopped by the id of the process we
started, never by name.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat

from prenorm_course import classroom

REPO_ROOT = Path(__file__).resolve().parents[3]

# JupyterLab settings that keep the page quiet and predictable under automation:
# no "news?" toast covering cells, the notebook's own kernel started without a
# "Select Kernel" dialog, and every cell kept in the DOM (no windowing), so
# prompts, outputs and sliders below the fold can be found and counted.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_tool(name: str) -> str:
    """Path of a console script installed next to the running interpreter."""
    tool = Path(sys.executable).with_name(name)
    if not tool.exists():
        raise FileNotFoundError(f"{name!r} is not installed next to {sys.executable!r}")
    return str(tool)


def isolated_jupyter_env(home: Path) -> dict[str, str]:
    """Environment variables that point every Jupyter/IPython/matplotlib folder into `home`."""
    folders = {
        "JUPYTER_CONFIG_DIR": "config",
        "JUPYTER_DATA_DIR": "data",
        "JUPYTER_RUNTIME_DIR": "runtime",
        "JUPYTERLAB_SETTINGS_DIR": "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces",
        "IPYTHONDIR": "ipython",
        "MPLCONFIGDIR": "matplotlib",
    }
    env = dict(os.environ)
    for variable, sub in folders.items():
        path = home / sub
        path.mkdir(parents=True, exist_ok=True)
        env[variable] = str(path)
    for relative, settings in LAB_SETTINGS.items():
        target = home / "lab-settings" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(settings))
    env.pop("JUPYTER_PATH", None)
    return env


def copy_notebooks(source: Path, target: Path, clear_outputs: bool) -> Path:
    """Copy the course notebooks into `target`, the only folder a server may write to.

    Lab autosaves whatever it runs into the file it serves; working on a copy keeps
    the committed notebooks byte-for-byte untouched. Clearing outputs makes every
    prompt start empty, so a fresh execution count is proof the cell ran here.
    """
    target.mkdir(parents=True, exist_ok=True)
    for notebook in sorted(source.glob("*.ipynb")):
        node = nbformat.read(notebook, as_version=4)
        if clear_outputs:
            for cell in node.cells:
                if cell.cell_type == "code":
                    cell.outputs = []
                    cell.execution_count = None
            node.metadata.pop("widgets", None)
        nbformat.write(node, target / notebook.name)
    return target


@dataclass
class ServerProcess:
    """A server we started: its process, address, token and log file."""

    process: subprocess.Popen
    base_url: str
    token: str
    log_path: Path

    def url(self, path: str) -> str:
        """Absolute address of `path` on this server, with the token attached."""
        separator = "&" if "?" in path else "?"
        query = f"{separator}token={self.token}" if self.token else ""
        return f"{self.base_url}{path}{query}"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server log, for error messages."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def wait_until_answering(server: ServerProcess, path: str, timeout_s: float) -> None:
    """Poll `path` until the server answers (any status below 500), or fail with its log."""
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"server exited with code {server.process.returncode}:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(server.url(path), timeout=5) as response:
                if response.status < 500:
                    return
        except urllib.error.HTTPError as error:
            if error.code < 500:  # e.g. a redirect to a login page: the server is up
                return
            last_error = str(error)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            last_error = str(error)
        time.sleep(0.25)
    raise TimeoutError(
        f"{server.base_url}{path} did not answer within {timeout_s} s ({last_error}):\n"
        f"{server.log_tail()}"
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (Linux /proc), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def wait_until_preheated(server: ServerProcess, timeout_s: float, quiet_s: float = 3.0) -> float:
    """Wait until Voilà's pool kernel has run the notebook: the server has started a kernel,
    whose CPU time has grown past importing torch and then stood still for `quiet_s` (cells run
    back to back, so a pause that long means the last one is done). Voilà's API does not say
    (it refuses to list kernels), so the kernel's own CPU clock does. Returns the seconds until
    then: how long before class a teacher must start `make demo`."""
    started = time.monotonic()
    last, still_since = None, None
    while time.monotonic() - started < timeout_s:
        kernels = [pid for pid in descendant_pids(server.process.pid) if "ipykernel" in _command_line(pid)]
        busy = sum(_cpu_seconds(pid) for pid in kernels)
        now = time.monotonic()
        if kernels and busy > 1.0 and busy == last:
            still_since = still_since or now
            if now - still_since >= quiet_s:
                return still_since - started
        else:
            still_since = None
        last = busy
        time.sleep(0.5)
    raise TimeoutError(f"no preheated kernel finished within {timeout_s} s:\n{server.log_tail()}")


def child_pids(pid: int) -> list[int]:
    """Ids of the direct children of `pid` (Linux /proc; empty elsewhere)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def _is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait for processes to exit; returns those still alive after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _is_running(pid)]
        time.sleep(0.1)
    return alive


def descendant_pids(pid: int) -> list[int]:
    """Ids of every process below `pid` (children, their children, …)."""
    found, stack = [], [pid]
    while stack:
        children = child_pids(stack.pop())
        found += children
        stack += children
    return found


def stop_process(process: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """Stop a server we started by its PID, wait for it, then for the kernels it started.

    The processes below it are remembered by id before the server goes: a server killed
    without its own clean-up would otherwise leave its kernels running. A server started
    through `make` (its own session, see :func:`running`) is stopped with its process
    group, which is that session's: make and the server it runs, never anything else.
    """
    if process.poll() is not None:
        return
    kernels = descendant_pids(process.pid)
    if os.getpgid(process.pid) == process.pid:
        os.killpg(process.pid, signal.SIGTERM)
    else:
        process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    for pid in _wait_gone(kernels, timeout_s=10):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    _wait_gone(kernels, timeout_s=5)


def shutdown_kernels(server: ServerProcess) -> None:
    """Ask a Jupyter server to shut down every kernel it runs (frees memory between notebooks)."""
    try:
        with urllib.request.urlopen(server.url("/api/kernels"), timeout=10) as response:
            kernels = json.load(response)
        for kernel in kernels:
            request = urllib.request.Request(
                server.url(f"/api/kernels/{kernel['id']}"), method="DELETE"
            )
            urllib.request.urlopen(request, timeout=30).close()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        pass


@contextmanager
def running(command: list[str], *, cwd: Path, env: dict[str, str], base_url: str,
            token: str, log_path: Path, ready_path: str,
            ready_timeout_s: float = 300.0) -> Iterator[ServerProcess]:
    """Run `command` as a server until the with-block ends, then stop it and wait for exit."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    server = ServerProcess(process, base_url, token, log_path)
    try:
        wait_until_answering(server, ready_path, ready_timeout_s)
        yield server
    finally:
        stop_process(process)


@contextmanager
def jupyter_lab(root: Path, home: Path) -> Iterator[ServerProcess]:
    """JupyterLab serving `root`, isolated in `home`, on 127.0.0.1 and a free port."""
    port, token = free_port(), secrets.token_hex(16)
    command = [
        venv_tool("jupyter-lab"), "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    with running(command, cwd=root, env=isolated_jupyter_env(home),
                 base_url=f"http://127.0.0.1:{port}", token=token,
                 log_path=home / "jupyter-lab.log", ready_path="/api/status") as server:
        try:
            yield server
        finally:
            shutdown_kernels(server)


@contextmanager
def voila(folder: Path, home: Path) -> Iterator[ServerProcess]:
    """Voilà serving the notebooks in `folder` as the classroom view (`make demo`'s template
    and options), isolated in `home`, on 127.0.0.1; a notebook is at /voila/render/NAME."""
    port = free_port()
    command = classroom.voila_command(
        str(folder), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1", "--Voila.port_retries=0",
    )
    with running(command, cwd=folder, env=classroom.voila_environment(isolated_jupyter_env(home)),
                 base_url=f"http://127.0.0.1:{port}", token="",
                 log_path=home / "voila.log", ready_path="/") as server:
        yield server


@contextmanager
def make_demo(number: str, home: Path) -> Iterator[ServerProcess]:
    """`make demo NB=<number> PORT=<port>` exactly as a teacher types it in the course's root,
    with Jupyter's folders isolated in `home`; the notebook is at "/" (Voilà serves one)."""
    port = free_port()
    env = isolated_jupyter_env(home)
    env["BROWSER"] = "true"  # Voilà opens the page in "the" browser: here a command that does nothing
    with running(["make", "demo", f"NB={number}", f"PORT={port}"], cwd=REPO_ROOT, env=env,
                 base_url=f"http://127.0.0.1:{port}", token="", log_path=home / f"make-demo-{number}.log",
                 ready_path="/api/kernels") as server:
        yield server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static file handler that does not print a line per request."""

    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def static_site(folder: Path) -> Iterator[str]:
    """Serve `folder` over HTTP on 127.0.0.1 from a thread; yields the base address."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def remove_tree(path: Path) -> None:
    """Delete a temporary folder, ignoring files a dying process still holds."""
    shutil.rmtree(path, ignore_errors=True)
