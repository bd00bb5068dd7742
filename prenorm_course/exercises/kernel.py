"""One learner's kernel: start it in its sandbox, run cells, send check requests, stop it.

The grader talks to an ordinary IPython kernel (the learner's code behaves as in
JupyterLab: widgets, displays, magics) through jupyter_client, but:

* the kernel is started inside bubblewrap (:mod:`sandbox`) with an environment made
  here, in a throw-away folder; it talks over Unix sockets in that folder (``ipc``
  transport: the sandbox has no network, and no other local process can reach it);
* every cell has a time limit; past it the kernel is interrupted by a message on its
  control channel, and if it does not stop, killed with its whole sandbox. A kernel
  that exits (``exit()``, ``os._exit``, a crash, a memory or
  CPU limit) is noticed at once and reported in words (``death``);
* what comes back is bounded: messages over ``MAX_MESSAGE_BYTES`` are dropped by ZeroMQ,
  and a cell's stored output is capped;
* ``rpc`` runs one agent request and returns the one reply that carries its nonce.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import zmq
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.connect import write_connection_file

from prenorm_course.exercises.agent import REPLY_MIME
from prenorm_course.exercises.remote import KernelStopped, LearnerTimeout, NoAnswer
from prenorm_course.exercises.sandbox import MEMORY_BYTES, TRUSTED, Sandbox, kernel_env

MAX_MESSAGE_BYTES = 64 * 2**20
MAX_OUTPUT_CHARS = 1_000_000  # stored per cell, for comparing with the course run
STARTUP_TIMEOUT = 120.0
INTERRUPT_GRACE = 10.0
POLL = 0.05
KERNEL_COMMAND = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection}",
                  "--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
MEMORY_LIMIT_GIB = MEMORY_BYTES / 2**30
OK, ERROR, TIMEOUT, DIED = "ok", "error", "timeout", "died"


@dataclass
class CellRun:
    """How one cell went: ``status`` ok/error/timeout/died, its outputs (nbformat dicts), its error."""

    status: str = OK
    outputs: list[dict] = field(default_factory=list)
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0


def _death(returncode: int, wrapped: bool = True) -> str:
    """What a kernel's exit status says, for a learner (bubblewrap passes a signal on as 128 + its number)."""
    if wrapped and returncode > 128:
        returncode = 128 - returncode
    if returncode >= 0:
        return "your code stopped the kernel (exit(), quit(), sys.exit() in a thread or os._exit())"
    signum = -returncode
    if signum == signal.SIGXCPU:
        return "the kernel used up its CPU time"
    if signum == signal.SIGKILL:
        return "the kernel was killed (it ran out of memory, or did not stop when interrupted)"
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
    return f"the kernel crashed ({name})"


class _Outputs:
    """Collects a cell's iopub messages as nbformat outputs, within a size budget."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.chars = 0

    def add(self, msg: dict) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "clear_output":
            self.items.clear()
            return
        size = len(json.dumps(content, default=str))
        if self.chars + size > MAX_OUTPUT_CHARS:
            return
        self.chars += size
        if kind == "stream":
            last = self.items[-1] if self.items else {}
            if last.get("output_type") == "stream" and last["name"] == content.get("name"):
                last["text"] += content.get("text", "")
            else:
                self.items.append({"output_type": "stream", "name": content.get("name", "stdout"),
                                   "text": content.get("text", "")})
        elif kind in ("display_data", "execute_result", "update_display_data"):
            output = {"output_type": "execute_result" if kind == "execute_result" else "display_data",
                      "data": content.get("data", {}), "metadata": content.get("metadata", {})}
            self.items.append(output)
        elif kind == "error":
            self.items.append({"output_type": "error", "ename": str(content.get("ename", "")),
                               "evalue": str(content.get("evalue", "")), "traceback": content.get("traceback", [])})


class Kernel:
    """A learner's kernel in its sandbox; use as a context manager."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.proc: subprocess.Popen | None = None
        self.client: BlockingKernelClient | None = None
        self.death = ""
        self.peak_memory_kb = 0
        self._log = None

    # -- life ---------------------------------------------------------------------------

    def __enter__(self) -> Kernel:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        stage = self.sandbox.stage
        _, info = write_connection_file(str(stage / "kernel.json"), transport="ipc", ip=str(stage / "ipc"),
                                        key=secrets.token_hex(32).encode())
        self.sandbox.own()  # as root: the kernel's user must read its connection file and make its sockets
        command = [part.replace("{connection}", str(self.sandbox.workdir / "kernel.json")) for part in KERNEL_COMMAND]
        self._log = open(stage / "kernel.log", "w+b")  # noqa: SIM115 — lives as long as the kernel
        self.proc = subprocess.Popen(
            self.sandbox.command(command), env=kernel_env(self.sandbox.workdir),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True,
        )
        context = zmq.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.client = BlockingKernelClient(context=context)
        self.client.load_connection_info(info)
        self.client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=True)
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        """The kernel answers, and its output channel is connected (nothing of the first cell is lost)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            msg_id = self.client.kernel_info()
            until = time.monotonic() + 2.0
            while time.monotonic() < until:
                if self.proc.poll() is not None:
                    raise KernelStopped(f"the kernel did not start: {self._log_tail()}")
                try:
                    msg = self.client.get_iopub_msg(timeout=POLL)
                except queue.Empty:
                    continue
                if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status":
                    self._drain_shell()
                    return
        raise KernelStopped(f"the kernel did not start within {STARTUP_TIMEOUT:g} s: {self._log_tail()}")

    def _drain_shell(self) -> None:
        while True:
            try:
                self.client.get_shell_msg(timeout=0.2)
            except queue.Empty:
                return

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _read_peak_memory(self) -> None:
        if self.proc is not None:
            self.peak_memory_kb = max(self.peak_memory_kb, self.sandbox.peak_memory_kb(self.proc.pid))

    def interrupt(self) -> None:
        """Ask the kernel to interrupt the running cell (a message: signals do not cross the sandbox)."""
        self.client.control_channel.send(self.client.session.msg("interrupt_request", {}))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._read_peak_memory()
        if self.proc is not None:
            with contextlib.suppress(OSError):  # the kernel and whatever it started, in its own group
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        if self.client is not None:
            self.client.stop_channels()
            self.client.context.destroy(linger=0)
            self.client = None
        if self._log is not None:
            self._log.close()
            self._log = None
        self.sandbox.remove()

    def _died(self) -> bool:
        if self.proc.poll() is None:
            return False
        if not self.death:
            self.death = _death(self.proc.returncode, wrapped=self.sandbox.mode != TRUSTED)
            if self.sandbox.cgroup is not None and self.sandbox.cgroup.oom_killed():
                self.death = "the kernel ran out of memory (its sandbox may use " \
                             f"{MEMORY_LIMIT_GIB:g} GiB in all) and was stopped"
        return True

    # -- running code ---------------------------------------------------------------------

    def _execute(self, code: str, timeout: float, store_history: bool, on_output: Callable[[dict], None]) -> CellRun:
        """Run ``code``; collect its outputs until the kernel is idle again, within ``timeout``."""
        run = CellRun()
        if self._died():
            run.status = DIED
            return run
        start = time.monotonic()
        msg_id = self.client.execute(code, store_history=store_history, allow_stdin=False, stop_on_error=False)
        deadline, interrupted = start + timeout, False
        idle, reply = False, None
        while not (idle and reply is not None):
            if self._died():
                run.status = DIED
                break
            if time.monotonic() > deadline:
                if interrupted:
                    self.proc.kill()
                    self.proc.wait()
                    self.death = "your code did not stop when interrupted after the time limit"
                    run.status = DIED
                    break
                self._read_peak_memory()
                self.interrupt()
                interrupted, deadline = True, time.monotonic() + INTERRUPT_GRACE
            try:
                msg = self.client.get_iopub_msg(timeout=POLL)
            except queue.Empty:
                msg = None
            if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                if msg["msg_type"] == "status":
                    idle = idle or msg["content"].get("execution_state") == "idle"
                else:
                    on_output(msg)
            if reply is None:
                try:
                    shell = self.client.get_shell_msg(timeout=0)
                except queue.Empty:
                    shell = None
                if shell is not None and shell["parent_header"].get("msg_id") == msg_id:
                    reply = shell["content"]
        run.seconds = time.monotonic() - start
        if run.status == DIED:
            return run
        if interrupted:
            run.status = TIMEOUT
        elif reply.get("status") != "ok":
            run.status = ERROR
            run.ename, run.evalue = str(reply.get("ename", "")), str(reply.get("evalue", ""))
        return run

    def run_cell(self, source: str, timeout: float) -> CellRun:
        """Run one notebook cell as JupyterLab would; its outputs are kept for comparison."""
        outputs = _Outputs()
        run = self._execute(source, timeout, store_history=True, on_output=outputs.add)
        run.outputs = outputs.items
        if run.status == ERROR and not run.ename:
            errors = [o for o in run.outputs if o["output_type"] == "error"]
            if errors:
                run.ename, run.evalue = errors[-1]["ename"], errors[-1]["evalue"]
        return run

    def rpc(self, request: dict, timeout: float) -> dict:
        """Send one agent request; return its reply (raise if there is none, or more than one)."""
        replies: list[dict] = []
        nonce = request["nonce"]

        def collect(msg: dict) -> None:
            text = msg["content"].get("data", {}).get(REPLY_MIME)
            if msg["msg_type"] == "display_data" and isinstance(text, str) and len(text) <= MAX_MESSAGE_BYTES:
                try:
                    reply = json.loads(text)
                except ValueError:
                    return
                if isinstance(reply, dict) and reply.get("nonce") == nonce:
                    replies.append(reply)

        code = f"__import__('prenorm_course.exercises.agent', fromlist=['serve']).serve({json.dumps(request)!r})"
        run = self._execute(code, timeout, store_history=False, on_output=collect)
        if run.status == DIED:
            raise KernelStopped(self.death)
        if run.status == TIMEOUT:
            raise LearnerTimeout(f"ran longer than {timeout:g} s")
        if len(replies) != 1:
            raise NoAnswer("the learner's kernel sent no answer to the check" if not replies
                           else "the learner's kernel sent more than one answer to the check")
        return replies[0]

    def sender(self, deadline: float) -> Callable[[dict], dict]:
        """A ``send`` function for :class:`~.remote.Learner`, all calls within ``deadline``."""

        def send(request: dict) -> dict:
            return self.rpc(request, max(deadline - time.monotonic(), 0.5))

        return send
