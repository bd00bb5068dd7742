"""Attacks on the grader's confinement: each ran against the old hand-written jail and worked.

Every test runs hostile code in a real learner kernel (bubblewrap, as the grader starts
it) and checks from outside that it achieved nothing: a loopback listener receives no
connection, the kernel sees only its own processes, a re-forking daemon is gone after
the kernel stops, a shared folder stays empty, the course's solution notebook cannot be
read, a memory bomb kills only its own kernel, and grading says how learner code ran.
They run as whoever runs the suite: CI runs them as root (``make test``) and as a normal
user (``make attacks-as-user``, which sets PRENORM_REQUIRE_USER=1). As root,
``test_as_a_normal_user`` also repeats the core of them as an unprivileged user; where
that cannot be done it skips, unless PRENORM_REQUIRE_USER=1 makes the skip a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from prenorm_course.exercises import inert, sandbox
from prenorm_course.exercises.grade import learner_notebooks
from prenorm_course.exercises.kernel import Kernel
from prenorm_course.exercises.limits import LIMITS
from prenorm_course.exercises.paths import repo_root, solution_notebooks, solution_path
from prenorm_course.exercises.sandbox import CONFINED, CourseFiles, Sandbox
from prenorm_course.exercises.tables import ClassTable, Copy

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap confines kernels on Linux only")
REQUIRE_USER = os.environ.get("PRENORM_REQUIRE_USER") == "1"  # the normal-user run must happen, not skip


def _skip_unless_required(reason: str) -> None:
    if REQUIRE_USER:
        pytest.fail(f"{reason} (PRENORM_REQUIRE_USER=1: this run must prove the attacks fail as a normal user)")
    pytest.skip(reason)


def _kernel() -> Kernel:
    return Kernel(Sandbox.create(CONFINED, CourseFiles({})))


def _out(run) -> str:
    assert run.status == "ok", run
    return "".join(o.get("text", "") for o in run.outputs if o["output_type"] == "stream").strip()


def test_a_loopback_listener_receives_nothing():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        with _kernel() as kernel:
            out = _out(kernel.run_cell(
                "import socket\ns = socket.socket()\ns.settimeout(2)\n"
                f"print(s.connect_ex(('127.0.0.1', {port})) != 0)", 30))
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert out == "True"


def test_the_kernel_sees_only_its_own_processes_and_not_the_grader():
    with _kernel() as kernel:
        out = _out(kernel.run_cell(
            "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "cmds = [open(f'/proc/{p}/cmdline', 'rb').read() for p in pids]\n"
            "print(len(pids), any(b'pytest' in c for c in cmds))", 30))
    count, grader = out.split()
    assert int(count) <= 3 and grader == "False"  # bubblewrap's init, the kernel (and maybe its child)


def test_a_reforking_daemon_is_gone_after_stop(tmp_path: Path):
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True:\n"
        "        if os.fork():\n"
        "            os._exit(0)\n"
        "        time.sleep(0.01)\n"
        "print('started')\n"
    )
    kernel = _kernel()
    kernel.start()
    try:
        assert _out(kernel.run_cell(daemon, 30)) == "started"
        stage, uid = kernel.sandbox.stage, kernel.sandbox.uid
        time.sleep(0.3)
        assert _kernel_processes(stage, uid), "the daemon is not found while the kernel runs"
    finally:
        kernel.stop()
    time.sleep(0.5)
    assert _kernel_processes(stage, uid) == [] and not stage.exists()


def _kernel_processes(stage: Path, uid: int | None) -> list[str]:
    """Processes of the kernel's user (as root), or (as anyone) whose environment names its folder."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            text = (proc / "status").read_text()
            environ = (proc / "environ").read_bytes()
        except OSError:  # gone, or another user's (a normal user reads only its own)
            continue
        uid_line = next((line for line in text.splitlines() if line.startswith("Uid:")), "")
        if (uid is not None and uid_line and int(uid_line.split()[1]) == uid) or str(stage).encode() in environ:
            found.append(proc.name)
    return found


def test_shared_folders_stay_empty():
    shared = [Path(p) for p in ("/run/lock", "/var/tmp", "/dev/shm", "/tmp") if Path(p).is_dir()]
    before = {p: set(os.listdir(p)) for p in shared}
    with _kernel() as kernel:
        out = _out(kernel.run_cell(
            "import os\nwrote = []\n"
            f"for d in {[str(p) for p in shared]!r}:\n"
            "    try:\n        open(os.path.join(d, 'planted-by-learner'), 'w').write('x')\n        wrote.append(d)\n"
            "    except OSError:\n        pass\nprint(len(wrote))", 30))
    after = {p: set(os.listdir(p)) for p in shared}
    # what the kernel wrote (its private /tmp and /dev/shm) disappeared with it
    assert all("planted-by-learner" not in after[p] for p in shared), (out, before, after)


def test_the_course_solution_notebooks_cannot_be_read():
    root = repo_root()
    solutions = solution_notebooks(root)
    assert solutions
    with _kernel() as kernel:
        out = _out(kernel.run_cell(
            "import glob, os, sys\nfound = []\n"
            f"for path in {[str(p) for p in solutions]!r} + glob.glob({str(root)!r} + '/**/*.ipynb', recursive=True):\n"
            "    try:\n        found.append(('BEGIN SOLUTION' in open(path).read(), path))\n"
            "    except OSError:\n        pass\n"
            "print([p for hit, p in found if hit], [p for p in sys.path if 'notebooks' in p])", 60))
    assert out == "[] []"


def test_a_memory_bomb_is_contained_to_its_own_kernel():
    with _kernel() as kernel:
        bomb = kernel.run_cell("chunks = []\nwhile True:\n    chunks.append(bytearray(256 * 2**20))", 120)
        after = kernel.run_cell("print('alive')", 30)
    assert bomb.status in ("error", "died"), bomb
    if bomb.status == "error":  # the address-space limit refused it: the kernel survives
        assert bomb.ename == "MemoryError" and _out(after) == "alive"
    else:  # the sandbox's cgroup stopped it: said so in words
        assert "memory" in kernel.death
    with _kernel() as kernel:  # and the next kernel is unaffected
        assert _out(kernel.run_cell("print(1 + 1)", 30)) == "2"


def test_an_endless_loop_is_interrupted_by_message_and_the_next_cell_runs():
    with _kernel() as kernel:
        loop = kernel.run_cell("while True:\n    pass", 2)
        after = kernel.run_cell("print('next')", 30)
    assert loop.status == "timeout" and _out(after) == "next"


def test_no_silent_fallback_without_bubblewrap(monkeypatch):
    sandbox._probe.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "bwrap" else "/usr/bin/" + name)
    try:
        with pytest.raises(sandbox.ConfinementUnavailable, match="--trusted"):
            sandbox.confinement()
        trusted = sandbox.confinement(trusted=True)
        assert trusted.mode == sandbox.TRUSTED and "NOT confined" in trusted.how
    finally:
        sandbox._probe.cache_clear()


def test_the_command_line_refuses_without_confinement(monkeypatch, capsys, tmp_path: Path):
    from prenorm_course.exercises.__main__ import main

    sandbox._probe.cache_clear()
    monkeypatch.setattr(sandbox, "_probe", lambda: "bubblewrap is not installed")
    (tmp_path / "a.ipynb").write_text("{}")
    assert main(["grade", str(tmp_path)]) == 3
    assert "pass --trusted" in capsys.readouterr().err


def test_symlinks_are_not_collected_as_submissions(tmp_path: Path):
    solution = solution_notebooks(repo_root())[0]
    (tmp_path / "mallory").mkdir()
    (tmp_path / "mallory" / solution.name).symlink_to(solution)
    (tmp_path / "eve").symlink_to(solution.parent, target_is_directory=True)
    (tmp_path / "bob.ipynb").write_text("{}")
    assert [learner for learner, _ in learner_notebooks(tmp_path)] == ["bob"]


def test_learner_text_cannot_forge_rows_of_grades_md(tmp_path: Path):
    forged = "x |\n| mallory | pass | pass |\n<script>"
    table = ClassTable({"01_rmsnorm.ipynb": ["1.1"]}, "bubblewrap")
    table.record("mallory", Copy("mallory/01_rmsnorm.ipynb", "01_rmsnorm.ipynb", {"1.1": "hint"}, details=[forged]))
    table.note("mallory", forged)
    table.write(tmp_path)
    md = (tmp_path / "grades.md").read_text()
    rows = [line for line in md.split("\n\n")[1].splitlines() if line.startswith("|")]
    assert len(rows) == 3 and "<script>" not in md and md.startswith("Learner code ran bubblewrap.")
    assert "\n" not in inert.markdown("a\nb") and inert.markdown("a|b") == "a\\|b"
    rows = (tmp_path / "grades.csv").read_text().splitlines()
    assert len(rows) == 2


def test_as_a_normal_user(tmp_path: Path):
    """bubblewrap without root (a teacher's laptop): a user namespace; the same attacks fail."""
    if os.geteuid() != 0:  # the whole suite is the normal-user run: say so, and that it is confined
        if not REQUIRE_USER:
            pytest.skip("not root: every test here already runs as a normal user (making another needs root)")
        how = sandbox.confinement().how
        assert not sandbox._root() and "user namespace" in how, how
        return
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", shutil.which("bwrap"),
                            "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "true"], capture_output=True)
    if probe.returncode != 0:
        _skip_unless_required(f"unprivileged user namespaces are off here: {probe.stderr.decode().strip()}")
    box = Sandbox.create(CONFINED, CourseFiles({}))
    box.uid = None  # build the command as a normal user would: bubblewrap makes a user namespace
    if box.cgroup is not None:
        box.cgroup.remove()
        box.cgroup = None
    os.chown(box.stage, 65534, 65534)
    script = ("import os, socket; s = socket.socket(); "
              "print(s.connect_ex(('127.0.0.1', 22)) != 0, len([p for p in os.listdir('/proc') if p.isdigit()]), "
              f"os.path.exists({str(repo_root() / 'notebooks')!r}))")
    command = box.command([sys.executable, "-c", script])
    try:
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command],
                              capture_output=True, text=True, env=sandbox.kernel_env(box.workdir), timeout=60)
    finally:
        box.remove()
    if "Permission denied" in proc.stderr and "source path" in proc.stderr:
        _skip_unless_required(f"this Python ({sys.executable}) lives where a normal user cannot read it")
    assert proc.stdout.split() == ["True", "2", "False"], proc.stderr


@pytest.mark.slow
def test_grading_two_at_a_time_has_no_cross_talk(tmp_path: Path):
    """Two kernels at once: neither sees the other's processes or files, each gets its own user."""
    seen: dict[str, str] = {}

    def one(name: str) -> None:
        with _kernel() as kernel:
            _out(kernel.run_cell(f"open('/tmp/mark', 'w').write({name!r})", 30))
            time.sleep(1)
            seen[name] = _out(kernel.run_cell(
                "import os, glob\nprint(open('/tmp/mark').read(), len([p for p in os.listdir('/proc') "
                "if p.isdigit()]), len(glob.glob('/tmp/prenorm-kernel-*')), os.getuid())", 30))

    threads = [threading.Thread(target=one, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (mark_a, procs_a, stages_a, uid_a), (mark_b, procs_b, stages_b, uid_b) = seen["a"].split(), seen["b"].split()
    assert (mark_a, mark_b) == ("a", "b") and stages_a == stages_b == "1"
    assert int(procs_a) <= 3 and int(procs_b) <= 3
    if os.geteuid() == 0:
        assert uid_a != uid_b


# --- bounded in every mode (issue 31): user namespaces, the sandbox's /, process totals, TMPDIR, widgets ---

NESTED_USERNS = ("import subprocess\n"
                 "run = subprocess.run(['unshare', '--user', '--map-root-user', 'true'],\n"
                 "                     capture_output=True, text=True)\n"
                 "print(run.returncode != 0 and 'Operation not permitted' in run.stderr)")


def test_no_user_namespace_can_be_made_inside_the_sandbox():
    with _kernel() as kernel:
        assert _out(kernel.run_cell(NESTED_USERNS, 30)) == "True"
        assert _out(kernel.run_cell("import threading\nt = threading.Thread(target=print, args=('thread',))\n"
                                    "t.start(); t.join()", 30)) == "thread"  # threads still start (clone3 → clone)


SESSIONS = ("import os, subprocess, sys\n"
            "try:\n    os.setsid()\n    own = 'setsid allowed'\nexcept PermissionError:\n    own = 'setsid refused'\n"
            "try:\n    subprocess.run(['true'], start_new_session=True)\n    child = 'child allowed'\n"
            "except PermissionError:\n    child = 'child refused'\n"
            "print(own, child, os.getsid(0) == os.getsid(os.getppid()))")


def test_no_process_of_the_kernel_can_leave_its_session():
    """A new session is a CPU share of its own (the scheduler's autogroups): a learner's processes
    that setsid() got as many shares as they made, against the one of the kernel graded beside them."""
    with _kernel() as kernel:
        assert _out(kernel.run_cell(SESSIONS, 30)) == "setsid refused child refused True"


def test_the_kernel_starts_under_a_tmpdir_other_than_tmp(monkeypatch):
    parent = Path("/var/tmp")
    if not (parent.is_dir() and os.access(parent, os.W_OK)):
        pytest.skip("no writable /var/tmp here")
    top = Path(tempfile.mkdtemp(prefix="prenorm-tmpdir-", dir=parent))
    os.chmod(top, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(top))
    try:
        with _kernel() as kernel:
            assert str(kernel.sandbox.stage).startswith(str(top))
            assert _out(kernel.run_cell("print('started')", 30)) == "started"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_widget_messages_count_against_the_output_cap():
    flood = ("from comm import create_comm\n"
             "c = create_comm(target_name='prenorm-flood', data={})\n"
             "for _ in range(12):\n    c.send(data={'state': {'v': 'x' * 4 * 2**20}, 'buffer_paths': []})\n"
             "print('sent')")
    with _kernel() as kernel:
        run = kernel.run_cell(flood, 60)
        client = kernel.client
        kept = len(json.dumps(client.widget_state)) + len(json.dumps(client.widget_buffers, default=str))
        counted = client.chars.get(0, 0)
    assert run.status == "ok", run
    assert kept < LIMITS.output_chars and counted <= LIMITS.output_chars, (kept, counted)


def _as_a_normal_user(script: str, monkeypatch) -> subprocess.CompletedProcess:
    """``script`` (standard library only) in the sandbox a normal user gets: a user namespace, no cgroup.

    As a normal user, the grader's own sandbox. As root, the command a normal user's grader
    builds, run as nobody with the system's Python (the grader's may lie where nobody can read).
    """
    if os.geteuid() != 0:
        box = Sandbox.create(CONFINED, CourseFiles({}))
        try:
            return subprocess.run(box.command([sys.executable, "-c", script]), capture_output=True, text=True,
                                  env=sandbox.kernel_env(box.workdir), timeout=120)
        finally:
            box.remove()
    python = Path("/usr/bin/python3")
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", shutil.which("bwrap"),
                            "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "true"], capture_output=True)
    if probe.returncode != 0 or not python.exists():
        _skip_unless_required(f"unprivileged user namespaces or /usr/bin/python3 missing: {probe.stderr.decode()}")
    box = Sandbox.create(CONFINED, CourseFiles({}))
    box.uid = None
    if box.cgroup is not None:
        box.cgroup.remove()
        box.cgroup = None
    os.chown(box.stage, 65534, 65534)
    with monkeypatch.context() as patched:  # the command as nobody's grader would build it
        patched.setattr(sandbox, "_root", lambda: False)
        patched.setattr(os, "getuid", lambda: 65534)
        patched.setattr(sandbox, "interpreter_paths", lambda: [])
        command = box.command([str(python), "-c", script])
    try:
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command],
                              capture_output=True, text=True, env=sandbox.kernel_env(box.workdir), timeout=120)
    finally:
        box.remove()


def test_as_a_normal_user_the_sandbox_root_is_read_only_and_no_user_namespace_is_made(monkeypatch):
    script = ("import os\ntry:\n    open('/planted', 'w').write('x' * 2**20)\n    print('wrote')\n"
              "except OSError:\n    print('refused')\n" + NESTED_USERNS)
    proc = _as_a_normal_user(script, monkeypatch)
    assert proc.stdout.split() == ["refused", "True"], proc.stderr


def test_as_a_normal_user_processes_are_a_total(monkeypatch):
    """400 children at once: RLIMIT_NPROC stops them near MAX_PROCESSES (it counts all of the real user's)."""
    script = ("import subprocess\nchildren = []\ntry:\n    for _ in range(400):\n"
              "        children.append(subprocess.Popen(['sleep', '30']))\nexcept OSError:\n    pass\n"
              "print(len(children))\nfor child in children:\n    child.kill()\n    child.wait()")
    proc = _as_a_normal_user(script, monkeypatch)
    assert proc.stdout.strip() and int(proc.stdout.split()[0]) <= LIMITS.max_processes, (proc.stdout, proc.stderr)


def test_without_a_cgroup_the_sandbox_memory_is_a_total():
    """Three helpers of 400 MB each, under a 1 GiB total: each is within its own limit, together they are not."""
    helpers = ("import subprocess, sys, time\n"
               "hog = 'b = bytearray(400 * 2**20)\\nimport time\\ntime.sleep(60)'\n"
               "children = [subprocess.Popen([sys.executable, '-c', hog]) for _ in range(3)]\n"
               "time.sleep(30)\nprint('all held')")
    kernel = _kernel()
    if kernel.sandbox.cgroup is not None:  # as root here: take the path a normal user's grader takes
        kernel.sandbox.cgroup.remove()
        kernel.sandbox.cgroup = None
    kernel.memory_total = 2**30
    with kernel:
        run = kernel.run_cell(helpers, 60)
    assert run.status == "died" and "ran out of memory" in kernel.death, (run, kernel.death)


# --- what the kernel writes is a total (issue 31, item 5): many files each under the per-file limit ---

FILL = ("import errno, os\nwritten, failed = 0, 'none'\nchunk = b'x' * 2**20\n"
        "for n in range({files}):\n"
        "    folder = (os.getcwd(), os.environ['HOME'], os.environ['TMPDIR'])[n % 3]\n"
        "    try:\n"
        "        with open(os.path.join(folder, f'fill-{{n}}'), 'wb') as f:\n"
        "            for _ in range(16):\n"
        "                f.write(chunk)\n"
        "                written += len(chunk)\n"
        "    except OSError as exc:\n"
        "        failed = errno.errorcode.get(exc.errno, str(exc.errno))\n"
        "        break\n"
        "print(failed, written)\n")


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_the_kernels_folder_is_a_total_not_only_a_per_file_limit():
    """16 MiB files in the working folder, HOME and TMPDIR: past FOLDER_BYTES in all, "no space left"; no disk used."""
    files = 2 * LIMITS.folder_bytes // (16 * 2**20)  # twice the total, each file far under FILE_BYTES
    with _kernel() as kernel:
        failed, written = _out(kernel.run_cell(FILL.format(files=files), 120)).split()
        on_disk = _disk_bytes(kernel.sandbox.stage)  # the grader's side of the kernel's folder, while it runs
        after = _out(kernel.run_cell("print('alive')", 30))
    assert failed == "ENOSPC" and int(written) <= LIMITS.folder_bytes, (failed, written)
    assert on_disk < 2**20 * 16 and after == "alive", on_disk


def test_as_a_normal_user_the_kernels_folder_is_a_total(monkeypatch):
    files = 2 * LIMITS.folder_bytes // (16 * 2**20)
    proc = _as_a_normal_user(FILL.format(files=files), monkeypatch)
    failed, written = proc.stdout.split()
    assert failed == "ENOSPC" and int(written) <= LIMITS.folder_bytes, (proc.stdout, proc.stderr)


@pytest.mark.slow
def test_a_notebook_that_fills_its_folder_still_gets_its_row(tmp_path: Path):
    """Exercise 1.1's cell fills the folder: that exercise is an error naming "No space left"; the rest are graded."""
    from prenorm_course.exercises.build import read_notebook, write_notebook
    from prenorm_course.exercises.grade import grade_folder
    from prenorm_course.exercises.verify import filled_in

    root = repo_root()
    name = "01_rmsnorm.ipynb"
    learner = filled_in(read_notebook(root / "notebooks" / "exercises" / name),
                        read_notebook(solution_path(root, name)))
    cell = next(c for c in learner.cells if c.cell_type == "code" and c.source.startswith("# Exercise 1.1"))
    files = 2 * LIMITS.folder_bytes // 2**24
    cell.source += f"\nfor _n in range({files}):\n    open(f'fill-{{_n}}', 'wb').write(b'x' * 2**24)\n"
    write_notebook(learner, tmp_path / "filler" / name)
    grade_folder(tmp_path, root=root, progress=lambda _: None)
    rows = {row.split(",")[0]: row for row in (tmp_path / "grades.csv").read_text().splitlines()[1:]}
    md = (tmp_path / "grades.md").read_text()
    assert "No space left on device" in md and rows["filler"].count("pass") == 2, md  # 1.2 and 1.3 still pass


def test_the_kernel_imports_what_it_needs_and_not_transformers():
    """transformers (in the course's environment for the tests and the bench) holds RMSNorm, SiLU, rotary
    embeddings, attention and a decoder layer: a graded kernel must not reach them, by import or by path."""
    import sysconfig

    from prenorm_course.exercises.packages import site_dirs

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert (site / "transformers").is_dir(), "the environment should hold transformers (requirements.txt)"
    others = [str(d) for d in site_dirs() if d != site]
    probe = (
        "import importlib, os, sys\n"
        "needed = [m for m in ('torch', 'numpy', 'scipy.stats', 'matplotlib.pyplot', 'ipywidgets', 'tqdm', 'PIL')\n"
        "          if importlib.util.find_spec(m) is None]\n"
        "try:\n    import transformers\n    reached = 'transformers'\nexcept ImportError:\n    reached = ''\n"
        f"sys.path[:0] = {others!r}\n"
        "try:\n    import hypothesis\n    reached += ' hypothesis'\nexcept ImportError:\n    pass\n"
        f"listed = sorted(os.listdir({str(site)!r}))\n"
        f"shown = {{d: os.listdir(d) for d in {others!r} if os.path.isdir(d)}}\n"
        "print(needed, repr(reached), 'transformers' in listed, any(shown.values()), len(listed) > 20)\n"
    )
    with _kernel() as kernel:
        out = _out(kernel.run_cell(probe, 60))
    assert out == "[] '' False False True", out


def test_the_allow_list_holds_the_librarys_dependencies():
    """KERNEL_PACKAGES names pyproject.toml's dependencies: a dependency added there is shown to kernels."""
    import tomllib

    from prenorm_course.exercises.packages import LIBRARY_PACKAGES, kernel_distributions, normalised

    pyproject = tomllib.loads((repo_root() / "pyproject.toml").read_text())
    declared = {normalised(Requirement(text).name) for text in pyproject["project"]["dependencies"]}
    assert declared == {normalised(name) for name in LIBRARY_PACKAGES}
    import sysconfig

    needed = kernel_distributions(Path(sysconfig.get_paths()["purelib"]).resolve())
    assert {"torch", "ipykernel", "pyseccomp", "matplotlib-inline", "jupyter-client"} <= set(needed)
    assert not {"transformers", "hypothesis", "pytest", "jupyterlab", "playwright"} & set(needed)
