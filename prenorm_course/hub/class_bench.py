"""How many learners the hub holds, measured: N learners through the front door at once.

``python -m prenorm_course.hub.class_bench --learners N`` (``make class-bench N=…``, as root)
prepares a hub folder of its own, starts the hub as ``make hub`` does (the same limits and
timeouts), makes N learner accounts with passwords, and then lets all N start together
(a barrier): each opens the nbgitpuller link, logs in through the form with its Unix
password, waits for its server, lets nbgitpuller pull the course, runs exercise notebook 01
with its answers in a kernel of its own server, and saves it with a marker of its own.
It reports spawn time (link to server answering) and notebook time (Run All) as p50/p95,
the proportional set size of each learner's processes with their kernels alive (psutil:
shared pages counted once), failures by stage, lost work (a saved notebook whose file in the
learner's home lacks the learner's marker), and the machine: cores, memory, load before and
after, and the share of the run during which some task stalled on memory (``/proc/pressure``).
Then it stops the hub and removes the accounts.

``--kernel-memory`` measures instead the peak memory of a kernel running each course
notebook top to bottom (its high-water resident set, ``VmHWM``) and builds from it the
sizing table for TLJH, Zero to JupyterHub, Gradescope and Binder.

Tables go to the course's measurements page (:mod:`prenorm_course.measurements`, where it
exists) with the command, date, machine and load, else to ``test-artifacts/``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
import requests

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.paths import exercise_name, repo_root, solution_notebooks, solution_path
from prenorm_course.exercises.verify import filled_in
from prenorm_course.hub import accounts, service
from prenorm_course.hub.config import COURSE_FOLDER, Limits, pull_link
from prenorm_course.hub.environment import BRANCH, REPOSITORY, prepare
from prenorm_course.hub.learner import Learner

NOTEBOOK = "01_rmsnorm.ipynb"
IN_HOME = f"{COURSE_FOLDER}/notebooks/exercises/{NOTEBOOK}"
PREFIX = "pnbench"
STAGES = ("login and spawn", "pull", "notebook 01", "save")


def machine() -> str:
    memory = psutil.virtual_memory().total / 2**30
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "?")
    return f"{os.cpu_count()} cores ({model}), {memory:.0f} GiB, {platform.system()} {platform.release()}"


def load_text() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def memory_stall_us() -> int | None:
    """Microseconds some task stalled on memory since boot (PSI), or None where the kernel has no PSI."""
    try:
        some = Path("/proc/pressure/memory").read_text().splitlines()[0]
    except OSError:
        return None
    return int(some.rsplit("total=", 1)[1])


def _measurements():
    """The course's measurements page module (docs/measurements.md), where this checkout has it."""
    try:
        from prenorm_course import measurements
    except ImportError:
        return None
    return measurements if hasattr(measurements, "write") else None


@contextlib.contextmanager
def load_watch():
    """The measurements page's load sampler while a run lasts (None where the page's module is missing)."""
    module = _measurements()
    if module is None or not hasattr(module, "LoadWatch"):
        yield None
        return
    with module.LoadWatch() as watch:
        yield watch


def publish(section: str, title: str, body: str, command: str, load=None) -> Path:
    """The table as ``section`` of docs/measurements.md, else in test-artifacts/hub/ (before that page exists)."""
    module = _measurements()
    if module is not None:
        return module.write(section, body, command=command, load=load)
    out = repo_root() / "test-artifacts" / "hub"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{section}.md"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    path.write_text(f"## {title}\n\n`{command}`, {stamp}; {machine()}; {load_text()} at the end\n\n{body}\n")
    return path


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile: the smallest measured value with at least q % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _one_learner(base: str, link: str, name: str, password: str, answers: dict, barrier: threading.Barrier,
                 result: dict) -> None:
    learner = Learner(base, name, password)
    stage = STAGES[0]
    try:
        barrier.wait()
        start = time.monotonic()
        page = learner.open_link(link)
        result["spawn"] = time.monotonic() - start
        stage = STAGES[1]
        learner.pull(page)
        stage = STAGES[2]
        notebook = learner.read_notebook(IN_HOME)
        notebook = json.loads(nbformat.writes(filled_in(nbformat.from_dict(notebook), answers)))
        marker = f"work of {name}: {secrets.token_hex(8)}"
        notebook["cells"].append(nbformat.v4.new_markdown_cell(marker))
        start = time.monotonic()
        notebook = learner.run(notebook)
        result["notebook"] = time.monotonic() - start
        errors = [o for c in notebook["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
        if errors:
            raise RuntimeError(f"notebook 01 raised {errors[0]['ename']}: {errors[0]['evalue'][:200]}")
        stage = STAGES[3]
        learner.save(IN_HOME, notebook)
        result["marker"] = marker
    except Exception as exc:  # every failure is counted, by stage, with its first line
        result["failed"] = f"{stage}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def run_class(n: int, hub: Path, port: int, root: Path, log=print) -> dict:
    """N learners at once on a hub started in ``hub``; the measurements."""
    names = [f"{PREFIX}{i:03d}" for i in range(n)]
    passwords = {name: secrets.token_urlsafe(16) for name in names}
    for name in names:
        accounts.add(name)
    subprocess.run(["chpasswd"], input="".join(f"{u}:{p}\n" for u, p in passwords.items()), text=True, check=True)
    base = f"http://127.0.0.1:{port}"
    link = pull_link(base, f"file://{hub / REPOSITORY}", BRANCH, NOTEBOOK)
    answers = read_notebook(solution_path(root, NOTEBOOK))
    results = {name: {} for name in names}
    barrier = threading.Barrier(n)
    threads = [threading.Thread(target=_one_learner, args=(base, link, name, passwords[name], answers, barrier,
                                                           results[name])) for name in names]
    load_before, stall_before, start = load_text(), memory_stall_us(), time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, stall_after, load_after = time.monotonic() - start, memory_stall_us(), load_text()
    memory = {name: accounts.pss_mb(name) for name in names if "failed" not in results[name]}
    lost = []
    for name in names:
        marker = results[name].get("marker")
        home = Path(os.path.expanduser(f"~{name}"))
        if marker and marker not in (home / IN_HOME).read_text(errors="replace"):
            lost.append(name)
    available = psutil.virtual_memory().available / 2**30
    return {"n": n, "results": results, "memory": memory, "lost": lost, "wall": wall, "load_before": load_before,
            "load_after": load_after, "available_gib": available,
            "stall": None if stall_before is None else (stall_after - stall_before) / 1e6 / wall}


def table(measured: list[dict]) -> str:
    rows = ["| learners at once | started | spawn p50 / p95 (s) | notebook 01 p50 / p95 (s) | PSS per learner, "
            "median / max (MB) | failures | lost work | memory stall | load before → after |",
            "| ---: | ---: | --- | --- | --- | --- | ---: | ---: | --- |"]
    for m in measured:
        results = m["results"].values()
        spawn = [r["spawn"] for r in results if "spawn" in r]
        notebook = [r["notebook"] for r in results if "notebook" in r]
        failures = [r["failed"] for r in results if "failed" in r]
        pss = list(m["memory"].values())

        def pair(values: list[float]) -> str:
            return f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}" if values else "–"
        by_stage: dict[str, list[str]] = {}  # each failure is "stage: what was raised"
        for failure in failures:
            stage, _, said = failure.partition(": ")
            by_stage.setdefault(stage, []).append(said)
        named = "; ".join(f"{stage}" + (f" ×{len(said)}" if len(said) > 1 else "") + f": {said[0]}"
                          for stage, said in sorted(by_stage.items()))
        rows.append(f"| {m['n']} | {len(spawn)} | {pair(spawn)} | {pair(notebook)} | "
                    + (f"{statistics.median(pss):.0f} / {max(pss):.0f}" if pss else "–")
                    + f" | {len(failures)}" + (f" ({named})" if failures else "")
                    + f" | {len(m['lost'])} | " + ("–" if m["stall"] is None else f"{100 * m['stall']:.0f} %")
                    + f" | {m['load_before'].split()[-3].rstrip(',')} → {m['load_after'].split()[-3].rstrip(',')} |")
    return "\n".join(rows)


def bench(sizes: list[int], hub: Path | None, port: int, keep: bool, log=print) -> str:
    if os.geteuid() != 0:
        raise PermissionError("the class benchmark needs root: learners are Unix accounts, their servers run as them")
    root = repo_root()
    made = hub is None
    hub = hub or Path(tempfile.mkdtemp(prefix="prenorm-class-bench-", dir="/tmp"))
    hub.chmod(0o755)
    measured = []
    with load_watch() as watch:
        _runs(sizes, hub, port, root, made, keep, measured, log)
    body = (f"{table(measured)}\n\nEach learner: the nbgitpuller link, the login form with a Unix password, the spawn "
            f"page until the server answers (spawn), nbgitpuller's pull, exercise notebook 01 with right answers in a "
            f"kernel of its own (notebook 01), save; PSS with every kernel alive. Limits per learner: "
            f"{Limits().memory}, {Limits().cpus:g} CPU. Machine: {machine()}.")
    return str(publish("class", "Class size on one hub", body,
                       f"make class-bench N=\"{' '.join(map(str, sizes))}\"" if len(sizes) > 1 else
                       f"make class-bench N={sizes[0]}", load=watch))


def _runs(sizes: list[int], hub: Path, port: int, root: Path, made: bool, keep: bool, measured: list, log) -> None:
    try:
        prepare(root, hub, log=log)
        for n in sizes:
            service.start(root, hub, "127.0.0.1", port, Limits(), log=log, record=False)  # not the class's hub
            try:
                log(f"{n} learners at once ({load_text()})")
                measured.append(run_class(n, hub, port, root, log))
                log(table(measured[-1:]))
            finally:
                service.stop(hub, log=log)
                for name in [f"{PREFIX}{i:03d}" for i in range(n)]:
                    _remove_account(name)
    finally:
        if made and not keep:
            shutil.rmtree(hub, ignore_errors=True)


def _remove_account(name: str) -> None:
    if not accounts.exists(name):
        return
    deadline = time.monotonic() + 20
    while accounts.processes(name) and time.monotonic() < deadline:
        for pid in accounts.processes(name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        time.sleep(0.2)
    with contextlib.suppress(subprocess.CalledProcessError):
        accounts.remove(name)


# --- peak memory of a kernel per notebook, and the sizing table ---------------------------------


def kernel_peaks(root: Path, log=print) -> dict[str, tuple[float, float]]:
    """notebook (its exercise name) -> (peak resident MB of its kernel, seconds), each run top to bottom in a
    fresh kernel."""
    from nbclient import NotebookClient

    peaks = {}
    for path in solution_notebooks(root):
        nb = read_notebook(path)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        seen, done = [0.0], threading.Event()

        def watch(client=client, seen=seen, done=done):  # VmHWM only grows: its last reading is the peak
            while not done.wait(0.2):
                with contextlib.suppress(AttributeError, OSError, StopIteration, ValueError):
                    status = Path(f"/proc/{client.km.provisioner.process.pid}/status").read_text()
                    hwm = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
                    seen[0] = max(seen[0], int(hwm.split()[1]) / 1024)

        watcher = threading.Thread(target=watch)
        watcher.start()
        start = time.monotonic()
        try:
            client.execute()
        finally:
            done.set()
            watcher.join()
        name = exercise_name(path)  # the tables name a notebook as learners' files do
        peaks[name] = (seen[0], time.monotonic() - start)
        log(f"{name}: kernel peak {seen[0]:.0f} MB, {peaks[name][1]:.1f} s")
    return peaks


def sizing(peaks: dict[str, tuple[float, float]], server_mb: float) -> str:
    """Per platform, what a learner needs: the server (measured) plus the heaviest kernel (measured)."""
    heaviest = max(peak for peak, _ in peaks.values())
    need = server_mb + heaviest
    need_g = math.ceil(need / 102.4) / 10  # GiB, rounded up to a tenth
    rows = ["| notebook | kernel peak (MB) | Run All (s) |", "| --- | ---: | ---: |"]
    rows += [f"| {name} | {peak:.0f} | {seconds:.1f} |" for name, (peak, seconds) in peaks.items()]
    platforms = [
        ("The Littlest JupyterHub (per-user limit)", f"`limits.memory` ≥ {need_g:.1f} G (server {server_mb:.0f} "
         f"MB + heaviest kernel {heaviest:.0f} MB); the course's hub sets 2G"),
        ("Zero to JupyterHub", f"`singleuser.memory.guarantee` {server_mb + min(p for p, _ in peaks.values()):.0f}M "
         f"(server + lightest kernel), `limit` {need:.0f}M or more"),
        ("Gradescope (768 MB, ½ CPU by default)", f"one kernel per notebook (heaviest {heaviest:.0f} MB) beside the "
         "grader's own process; notebook 01's grading at 768 MB and ½ CPU is in tests/course/test_gradescope.py"),
        ("Binder (1–2 GB)", ", ".join(f"{name.split('_')[0]} {'fits 1 GB' if server_mb + peak < 1024 else 'needs 2 GB'}"
                                      for name, (peak, _) in peaks.items())),
    ]
    rows += ["", "| platform | what a learner needs, from the figures above |", "| --- | --- |"]
    rows += [f"| {name} | {need} |" for name, need in platforms]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.hub.class_bench",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, nargs="+", default=[8], metavar="N",
                        help="how many learners at once (several: one run each, e.g. 10 20 30 40)")
    parser.add_argument("--dir", type=Path, help="a hub folder to reuse (default: a new one, removed after)")
    parser.add_argument("--port", type=int, default=18500)
    parser.add_argument("--keep", action="store_true", help="keep the hub folder it made")
    parser.add_argument("--kernel-memory", action="store_true", help="measure each notebook's kernel peak instead")
    parser.add_argument("--server-mb", type=float, default=None,
                        help="a learner's server without kernel, MB (default: measured here, a bare jupyter server)")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.learners):
        parser.error(f"--learners {args.learners}: expected whole numbers of at least 1")
    try:
        if args.kernel_memory:
            root = repo_root()
            with load_watch() as watch:
                peaks = kernel_peaks(root)
                server = args.server_mb or server_memory(root)
            where = publish("kernel-memory", "Kernel memory and sizing", sizing(peaks, server),
                            "make kernel-memory", load=watch)
        else:
            where = bench(args.learners, args.dir, args.port, args.keep)
    except (PermissionError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {where}")
    return 0


def server_memory(root: Path) -> float:
    """A learner's server (jupyter-lab, as jupyterhub-singleuser runs it) with no kernel, once it answers:
    its resident MB."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "JUPYTER_CONFIG_DIR": tmp, "JUPYTER_DATA_DIR": tmp, "JUPYTER_RUNTIME_DIR": tmp}
        process = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
                                    f"--port={port}", "--ServerApp.port_retries=0", "--ServerApp.token=bench",
                                    "--allow-root", f"--notebook-dir={tmp}"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                with contextlib.suppress(requests.RequestException):
                    if requests.get(f"http://127.0.0.1:{port}/api/status?token=bench", timeout=5).ok:
                        break
                time.sleep(0.5)
            else:
                raise TimeoutError("a bare jupyter server did not answer within 300 s")
            rss = psutil.Process(process.pid).memory_info().rss / 2**20
        finally:
            process.terminate()
            process.wait(30)
    return rss


if __name__ == "__main__":
    sys.exit(main())
