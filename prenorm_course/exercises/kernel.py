"""One learner's kernel: start it in its sandbox, run cells, send check requests, stop it.

The kernel is an ordinary IPython kernel (the learner's code behaves as in JupyterLab:
widgets, displays, magics), started and driven by the Jupyter libraries:
``jupyter_client``'s ``AsyncKernelManager`` starts it from a kernel spec whose command
is the kernel wrapped in bubblewrap (:mod:`sandbox`), with ``ipc`` transport (Unix
sockets in the kernel's own folder: the sandbox has no network; that folder is a memory
folder inside the sandbox, which the grader reaches through ``/proc/PID/root``) and ``interrupt_mode``
"message"; ``nbclient``'s ``NotebookClient`` runs each cell (outputs as nbformat, a
time limit with an interrupt past it, a dead kernel noticed). What is ours:

* a cell that does not stop within ``interrupt_grace`` after the interrupt gets its
  kernel killed, with its whole sandbox; a kernel that exits (``exit()``,
  ``os._exit``, a crash, a memory or CPU limit) is reported in words (``death``);
* what comes back is bounded: messages over ``message_bytes`` are dropped by ZeroMQ,
  and a cell's stored output is capped (``output_chars``); widget (comm) messages
  count against the same cap and their state is never kept (the grader shows no widgets);
* ``rpc`` runs one agent request and returns the one reply that carries its nonce;
* the kernel's peak memory, read from its sandbox;
* without a cgroup (a normal user), a watchdog thread adds up the resident memory of all
  the sandbox's processes every ``watch_seconds`` and kills the sandbox past
  ``memory_bytes`` (``memory_total``): a total, as the cgroup gives root.

The limits are the sandbox's (:class:`~prenorm_course.exercises.limits.GradingLimits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import nbformat
import zmq
import zmq.asyncio
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from prenorm_course.exercises.limits import GradingLimits
from prenorm_course.exercises.sandbox import (
    CONFINED,
    CONNECTION_FILE,
    Sandbox,
    kernel_env,
    resident_kb,
)
from prenorm_lib.checks.agent import REPLY_MIME
from prenorm_lib.checks.remote import KernelStopped, LearnerTimeout, NoAnswer

KERNEL_COMMAND = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                  "--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]


class CellStatus(StrEnum):
    """How a cell (or a check request) ran in the kernel."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    DIED = "died"


OK, ERROR, TIMEOUT, DIED = CellStatus.OK, CellStatus.ERROR, CellStatus.TIMEOUT, CellStatus.DIED


@dataclass
class CellRun:
    """How one cell went: ``status`` ok/error/timeout/died, its outputs (nbformat dicts), its error."""

    status: CellStatus = OK
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


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel spec runs the kernel inside ``sandbox``."""

    def __init__(self, sandbox: Sandbox, **kwargs: Any):
        super().__init__(kernel_name="python3", transport="ipc", ip=str(sandbox.stage / "ipc"),
                         connection_file=str(sandbox.stage / CONNECTION_FILE), **kwargs)
        self.sandbox = sandbox
        self._kernel_spec = KernelSpec(argv=sandbox.command(KERNEL_COMMAND), display_name="learner (sandboxed)",
                                       language="python", interrupt_mode="message", env={})

    def write_connection_file(self, **kwargs: Any) -> None:
        super().write_connection_file(**kwargs)
        self.sandbox.own()  # as root: the kernel's user must read its connection file

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        """Launch; in bubblewrap, connect to the sockets where they are: in the sandbox's memory folder.

        The kernel binds them at the folder's path inside its mount namespace; from here that
        is ``/proc/PID/root`` of the sandbox's first process (ZeroMQ retries until they exist).
        """
        await super()._async_launch_kernel(kernel_cmd, **kw)
        if self.sandbox.mode != CONFINED:
            return
        deadline = time.monotonic() + self.sandbox.limits.startup_seconds
        process = self.provisioner.process
        while (pid := self.sandbox.inside_pid()) is None and process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if pid is not None:  # else bubblewrap failed: the kernel never becomes ready, and its log says why
            self.ip = f"/proc/{pid}/root{self.sandbox.stage}/ipc"


class _Client(NotebookClient):
    """nbclient's executor with our bounds on what a cell may send back."""

    def __init__(self, *args: Any, limits: GradingLimits, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.chars: dict[int, int] = {}
        self.replies: dict[int, int] = {}
        self.timed_out = False
        self.reply: dict = {}
        self.on_cell_executed = self._keep_reply

    def _keep_reply(self, cell: Any, cell_index: int, execute_reply: dict) -> None:
        self.reply = execute_reply.get("content", {})

    async def _async_handle_timeout(self, timeout: int, cell: Any = None) -> dict[str, Any] | None:
        self.timed_out = True
        return await super()._async_handle_timeout(timeout, cell)

    def _within_cap(self, cell_index: int, size: int) -> bool:
        """Count ``size`` against the cell's output cap; False once the cap is passed."""
        if self.chars.get(cell_index, 0) + size > self.limits.output_chars:
            return False
        self.chars[cell_index] = self.chars.get(cell_index, 0) + size
        return True

    def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
        """A widget message: under the output cap (its buffers too), else dropped; no state is stored."""
        size = len(json.dumps(msg.get("content", {}), default=str)) + sum(len(b) for b in msg.get("buffers") or [])
        if self._within_cap(cell_index, size):
            super().handle_comm_msg(outs, msg, cell_index)

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        data = msg.get("content", {}).get("data") or {}
        if REPLY_MIME in data:  # a check's answer: not a learner output, not capped, but few
            self.replies[cell_index] = self.replies.get(cell_index, 0) + 1
            if self.replies[cell_index] > self.limits.replies:
                return None
            return super().output(outs, msg, display_id, cell_index)
        if not self._within_cap(cell_index, len(json.dumps(msg.get("content", {}), default=str))):
            return None
        return super().output(outs, msg, display_id, cell_index)


class Kernel:
    """A learner's kernel in its sandbox; use as a context manager. Runs its own event loop."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.km: SandboxKernelManager | None = None
        self.client: _Client | None = None
        self.death = ""
        self.peak_memory_kb = 0
        self._loop = asyncio.new_event_loop()
        self._log: Any = None
        self._cells = nbformat.v4.new_notebook()
        self.limits = sandbox.limits
        self.memory_total = self.limits.memory_bytes
        self._over_memory = False
        self._stop_watch = threading.Event()

    # -- life ---------------------------------------------------------------------------

    def __enter__(self) -> Kernel:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self, coroutine: Any) -> Any:
        return self._loop.run_until_complete(coroutine)

    def start(self) -> None:
        self._log = open(self.sandbox.stage / "kernel.log", "w+b")  # noqa: SIM115 — lives as long as the kernel
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, self.limits.message_bytes)
        self.km = SandboxKernelManager(self.sandbox, context=context)
        self.client = _Client(self._cells, km=self.km, allow_errors=True, interrupt_on_timeout=True,
                              startup_timeout=int(self.limits.startup_seconds), iopub_timeout=4,
                              record_timing=False, kernel_name="python3", store_widget_state=False,
                              limits=self.limits)

        async def start() -> None:
            await self.km.start_kernel(env=kernel_env(self.sandbox.workdir), cwd=str(self.sandbox.workdir),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log)
            self.client.kc = self.km.client(context=context)
            self.client.kc.start_channels()
            try:
                await self.client.kc.wait_for_ready(timeout=self.limits.startup_seconds)
            except RuntimeError as exc:
                raise KernelStopped(f"the kernel did not start: {exc}: {self._log_tail()}") from None

        self._run(start())
        if self.sandbox.cgroup is None:
            threading.Thread(target=self._watch_memory, daemon=True).start()

    def _watch_memory(self) -> None:
        """Kill the sandbox once its processes together hold more than ``memory_total`` (no cgroup here)."""
        while not self._stop_watch.wait(self.limits.watch_seconds):
            process = self._process
            if process is None or process.poll() is not None:
                return
            if resident_kb(process.pid) * 1024 > self.memory_total:
                self._over_memory = True
                self._kill()
                return

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    @property
    def _process(self) -> Any:
        return getattr(getattr(self.km, "provisioner", None), "process", None)

    def alive(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    def _read_peak_memory(self) -> None:
        process = self._process
        if process is not None:
            self.peak_memory_kb = max(self.peak_memory_kb, self.sandbox.peak_memory_kb(process.pid))

    def _kill(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(OSError):
                process.kill()
            with contextlib.suppress(Exception):
                process.wait(timeout=30)

    def stop(self) -> None:
        self._stop_watch.set()
        if self.alive():
            self._read_peak_memory()
        if self.km is not None:
            with contextlib.suppress(Exception):
                self._run(self.km.shutdown_kernel(now=True))
            self._kill()
            with contextlib.suppress(Exception):
                self.client.kc.stop_channels()
            self.km.context.destroy(linger=0)
            self.km = None
        if self._log is not None:
            self._log.close()
            self._log = None
        self.sandbox.remove()
        if not self._loop.is_closed():
            self._loop.close()

    def _died(self) -> bool:
        process = self._process
        if process is None or process.poll() is None:
            return False
        if not self.death:
            self.death = _death(process.returncode, wrapped=self.sandbox.mode == CONFINED)
            if self._over_memory or (self.sandbox.cgroup is not None and self.sandbox.cgroup.oom_killed()):
                self.death = "the kernel ran out of memory (its sandbox may use " \
                             f"{self.limits.memory_bytes / 2**30:g} GiB in all) and was stopped"
        return True

    # -- running code ---------------------------------------------------------------------

    def _execute(self, code: str, timeout: float, store_history: bool) -> CellRun:
        """Run ``code`` with nbclient; past ``timeout`` interrupt it, past the grace kill the kernel."""
        run = CellRun()
        if self.km is None or self._died():
            run.status = DIED
            return run
        cell = nbformat.v4.new_code_cell(code)
        self._cells.cells = [cell]
        client = self.client
        client.timeout, client.timed_out, client.reply = max(int(timeout + 0.999), 1), False, {}
        client.chars.clear()
        client.replies.clear()
        start = time.monotonic()
        try:
            self._run(asyncio.wait_for(client.async_execute_cell(cell, 0, store_history=store_history),
                                       timeout + self.limits.interrupt_grace))
        except (TimeoutError, DeadKernelError):  # nbclient reports our cancelling as a dead kernel
            if self.alive():
                self._read_peak_memory()
                self._kill()
                self.death = "your code did not stop when interrupted after the time limit"
            else:
                self._died()
            run.status = DIED
        run.seconds = time.monotonic() - start
        run.outputs = [dict(o) for o in cell.outputs]
        if run.status == DIED:
            return run
        if self._died():
            run.status = DIED
        elif client.timed_out:
            run.status = TIMEOUT
        elif client.reply.get("status") != "ok":
            run.status = ERROR
            run.ename, run.evalue = str(client.reply.get("ename", "")), str(client.reply.get("evalue", ""))
        return run

    def run_cell(self, source: str, timeout: float) -> CellRun:
        """Run one notebook cell as JupyterLab would; its outputs are kept for comparison."""
        run = self._execute(source, timeout, store_history=True)
        if run.status == ERROR and not run.ename:
            errors = [o for o in run.outputs if o["output_type"] == "error"]
            if errors:
                run.ename, run.evalue = errors[-1]["ename"], errors[-1]["evalue"]
        return run

    def rpc(self, request: dict, timeout: float) -> dict:
        """Send one agent request; return its reply (raise if there is none, or more than one)."""
        nonce = request["nonce"]
        code = f"__import__('prenorm_lib.checks.agent', fromlist=['serve']).serve({json.dumps(request)!r})"
        run = self._execute(code, timeout, store_history=False)
        if run.status == DIED:
            raise KernelStopped(self.death)
        if run.status == TIMEOUT:
            raise LearnerTimeout(f"ran longer than {timeout:g} s")
        replies = []
        for output in run.outputs:
            text = output.get("data", {}).get(REPLY_MIME) if output.get("output_type") == "display_data" else None
            if isinstance(text, str) and len(text) <= self.limits.message_bytes:
                try:
                    reply = json.loads(text)
                except ValueError:
                    continue
                if isinstance(reply, dict) and reply.get("nonce") == nonce:
                    replies.append(reply)
        if len(replies) != 1:
            raise NoAnswer("the learner's kernel sent no answer to the check" if not replies
                           else "the learner's kernel sent more than one answer to the check")
        return replies[0]

    def sender(self, deadline: float) -> Callable[[dict], dict]:
        """A ``send`` function for :class:`~.remote.Learner`, all calls within ``deadline``."""

        def send(request: dict) -> dict:
            return self.rpc(request, max(deadline - time.monotonic(), 0.5))

        return send
