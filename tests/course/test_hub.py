"""A class on a real JupyterHub, on 127.0.0.1, driven as the teacher's docs say and as learners' browsers do.

The teacher's commands are the docs' (docs/teaching.md, "Day one"), typed as written, as root,
from the checkout: ``make hub HUB_DIR=… HUB_PORT=…`` (the hub folder, then JupyterHub in the
background), ``.venv/bin/python -m prenorm_course.hub learners add …``, ``chpasswd``, ``… hub link``,
``… hub collect --due …``, ``make grade``, ``make hub-restart``, ``… hub learners remove``,
``make hub-stop``. Nothing is done for the teacher that no doc command does: no REST call adds
a user or starts a server. Three learners each open the link in a "browser"
(:class:`prenorm_course.hub.learner.Learner`: the login form with their Unix password and the
form's ``_xsrf`` cookie, the spawn page, nbgitpuller's pull, JupyterLab's kernel websocket and
contents API with the same cookies), find no solution in their home, run exercise notebook 01
with a right, a wrong or no answer, see their own checks' lines, and save. The teacher
collects and grades; one learner's memory bomb kills only that learner's kernel; a restart
of the hub keeps every server; removing a learner whose server runs stops it first; the hub
stops with no process left.

Needs root (Unix accounts, servers started as them, cgroups), git, npm and a system Python >= 3.11.
CI sets PRENORM_REQUIRE_HUB=1, so a skip there is a failure. Prints the measured times and
memory (run with -s to see them).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import nbformat
import psutil
import pytest
import requests

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.paths import exercise_notebooks, repo_root, solution_notebooks, solution_path
from prenorm_course.exercises.verify import filled_in
from prenorm_course.hub import accounts, distribution, service
from prenorm_course.hub.collect import collect, parse_due, return_feedback
from prenorm_course.hub.config import COURSE_FOLDER, Limits, config_text, pull_link
from prenorm_course.hub.environment import BRANCH, REPOSITORY, shared_python
from prenorm_course.hub.learner import Learner, LoginRefused
from prenorm_course.hub.spawner import cgroup_layout, cgroup_of

REQUIRED = os.environ.get("PRENORM_REQUIRE_HUB") == "1"
NOTEBOOK = "01_rmsnorm.ipynb"
IN_HOME = f"{COURSE_FOLDER}/notebooks/exercises/{NOTEBOOK}"
WRONG_1_3 = '# Exercise 1.3: predict fp16 overflow\nsquare_in_fp16 = "65504"\nnorm_without_upcast = "1"\n'
LEARNERS = {"pnhub-right": "right", "pnhub-wrong": "wrong", "pnhub-unfinished": "unfinished"}
TEACHER = "pnhub-teacher"
CHECK_LINES = {"right": ["passed", "passed", "passed"], "wrong": ["passed", "passed", "hint"],
               "unfinished": ["not done", "not done", "not done"]}
BOMB = "hog = bytearray(3 * 2**30)  # 3 GiB, every page written: past the learner's 2G limit"


def _skip(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (PRENORM_REQUIRE_HUB=1: CI must run the class on a real hub)")
    pytest.skip(reason)


def _free_port() -> int:
    """A port P with P + 1 (the proxy's API) and P + 81 (the hub itself) free as well."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            for other in (port + 1, port + 81):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", other))
        except OSError:
            continue
        return port


def _answers(root: Path, answer: str, notebook: dict) -> dict:
    """The learner's notebook with their answers typed into the exercise cells."""
    if answer == "unfinished":
        return notebook
    solution = read_notebook(solution_path(root, NOTEBOOK))
    filled = filled_in(nbformat.from_dict(notebook), solution)
    if answer == "wrong":
        for cell in filled.cells:
            if cell.source.startswith("# Exercise 1.3"):
                cell.source = WRONG_1_3
    return json.loads(nbformat.writes(filled))


def _check_lines(notebook: dict) -> list[str]:
    """What each check cell showed, as its verdict word: passed, hint or not done (a hint is a ``Hint``
    exception, which IPython shows as its one line)."""
    verdicts = []
    for cell in notebook["cells"]:
        text = "".join(o.get("text", "") if o["output_type"] == "stream" else f"{o.get('evalue', '')}\n"
                       for o in cell.get("outputs", []) if o["output_type"] in ("stream", "error"))
        for line in text.splitlines():
            if match := re.match(r"Exercise 1\.\d (passed|is not done yet)|Exercise 1\.\d: ", line):
                verdicts.append({"passed": "passed", "is not done yet": "not done"}.get(match.group(1), "hint"))
    return verdicts


def _home_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (as bytes), and every version git holds there, as text (``git log -p``)."""
    found = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    history = subprocess.run(["git", "-c", f"safe.directory={folder}", "-C", str(folder), "log", "--all", "-p"],
                             capture_output=True, check=True).stdout
    found["(git log --all -p)"] = history
    return found


def _teacher(command: list[str], root: Path, env: dict, timeout: float = 900) -> str:
    """A teacher's doc command, as typed, from the checkout; its output."""
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
                         start_new_session=True)
    assert run.returncode == 0, f"{' '.join(command)}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run.stdout + run.stderr


def test_a_class_on_a_real_jupyterhub(tmp_path: Path):
    if sys.platform != "linux" or os.geteuid() != 0:
        _skip("needs root on Linux: learners are Unix accounts and their servers run as them")
    for tool in ("useradd", "userdel", "groupadd", "chpasswd", "git", "npm", "setpriv"):
        if shutil.which(tool) is None:
            _skip(f"needs {tool}")
    try:
        shared_python()
    except FileNotFoundError as exc:
        _skip(str(exc))
    root = repo_root()
    hub_dir = Path(tempfile.mkdtemp(prefix="prenorm-hub-", dir="/tmp"))
    hub_dir.chmod(0o755)
    record = root / service.RECORD
    recorded = record.read_text() if record.exists() else None
    port = _free_port()
    env = {**os.environ, "HUB_DIR": str(hub_dir)}
    python = [str(root / ".venv" / "bin" / "python"), "-m", "prenorm_course.hub"]
    figures: dict[str, float] = {}
    try:
        # Day one, step 1: the hub folder, then the hub in the background. make returns; the hub runs on.
        start = time.monotonic()
        out = _teacher(["make", "hub", f"HUB_DIR={hub_dir}", f"HUB_PORT={port}"], root, env)
        figures["make hub (folder + start)"] = time.monotonic() - start
        assert "the hub runs in the background" in out, out[-2000:]
        hub_pid = service.hub_pid(hub_dir)
        assert hub_pid and os.getsid(hub_pid) == hub_pid, "the hub must run in a session of its own"
        assert record.read_text().strip() == str(hub_dir)
        base = f"http://127.0.0.1:{port}"
        assert requests.get(f"{base}/hub/api/", timeout=10).status_code == 200
        status = _teacher(["make", "hub-status", f"HUB_DIR={hub_dir}"], root, env)
        assert "idle culler: running" in status and "memory 2G, 1 CPU" in status, status
        assert not (hub_dir / "course.git").exists()  # the whole course is not served

        # Step 2: learners, and a password each (passwd, or chpasswd for a class).
        passwords = {user: secrets.token_urlsafe(16) for user in [*LEARNERS, TEACHER]}
        _teacher([*python, "learners", "add", *LEARNERS], root, env)
        _teacher([*python, "teachers", "add", TEACHER], root, env)
        subprocess.run(["chpasswd"], input="".join(f"{u}:{p}\n" for u, p in passwords.items()), text=True,
                       check=True)
        homes = {user: Path(pwd.getpwnam(user).pw_dir) for user in LEARNERS}
        assert all(home.stat().st_mode & 0o777 == 0o700 for home in homes.values())

        # Step 3: the link (no --url: where this hub answers).
        link = _teacher([*python, "link", "--notebook", NOTEBOOK], root, env).strip().splitlines()[-1]
        assert parse_qs(urlparse(link).query)["repo"] == [f"file://{hub_dir / REPOSITORY}"]

        # A wrong password is refused at the form: the check below can fail.
        with pytest.raises(LoginRefused):
            Learner(base, "pnhub-right", "not-the-password").open_link(link)

        browsers = {}
        solution_lines = distribution.solution_lines(root)
        assert len(solution_lines) > 50  # the lines the check below looks for
        for user, answer in LEARNERS.items():
            browsers[user] = learner = Learner(base, user, passwords[user])
            start = time.monotonic()
            page = learner.open_link(link)
            figures.setdefault("login to server (first learner)", time.monotonic() - start)
            learner.pull(page)
            pulled = homes[user] / IN_HOME
            assert pulled.stat().st_uid == pwd.getpwnam(user).pw_uid
            # Nothing in the learner's home holds a solution: not a course notebook, a marker, a solution line.
            leaks = distribution.find_solutions(_home_files(homes[user] / COURSE_FOLDER), root)
            assert leaks == [], leaks
            notebook = _answers(root, answer, learner.read_notebook(IN_HOME))
            start = time.monotonic()
            notebook = learner.run(notebook)
            figures.setdefault("notebook 01 in a learner's kernel", time.monotonic() - start)
            assert _check_lines(notebook) == CHECK_LINES[answer], (user, _check_lines(notebook))
            learner.save(IN_HOME, notebook)
        memory = {user: accounts.pss_mb(user) for user in LEARNERS}
        figures["memory per learner (server + kernel, PSS MB)"] = max(memory.values())
        print("\n" + "\n".join(f"{name}: {value:.1f}" for name, value in figures.items()))
        print("memory per learner (PSS MB): " + ", ".join(f"{u} {m:.0f}" for u, m in memory.items()))

        # The teacher is the hub's admin; a learner is not (the admin page answers the teacher only).
        assert browsers["pnhub-right"].http.get(f"{base}/hub/admin", timeout=60).status_code == 403
        teacher = Learner(base, TEACHER, passwords[TEACHER])
        form = teacher.http.get(f"{base}/hub/login?next=%2Fhub%2Fadmin", timeout=60)  # no server of her own
        admin = teacher.http.post(form.url, timeout=60, data={
            "username": TEACHER, "password": passwords[TEACHER], "_xsrf": teacher.http.cookies.get("_xsrf")})
        admin = teacher.http.get(f"{base}/hub/admin", timeout=60)
        assert admin.status_code == 200 and "/hub/admin" in admin.url, (admin.status_code, admin.url)

        # One learner cannot read another's work.
        wrong = pwd.getpwnam("pnhub-wrong")
        other = subprocess.run(["setpriv", f"--reuid={wrong.pw_uid}", f"--regid={wrong.pw_gid}", "--clear-groups",
                                "cat", str(homes["pnhub-right"] / IN_HOME)], capture_output=True, text=True)
        assert other.returncode != 0 and "Permission denied" in other.stderr

        # After class: collect (with the deadline), then grade, as the docs type them.
        collected = tmp_path / "submissions"
        due = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat(timespec="seconds")
        _teacher([*python, "collect", str(collected), "--notebooks", NOTEBOOK, "--due", due], root, env)
        record_json = json.loads((collected / "collection.json").read_text())
        assert set(record_json) == {"collected_at", "due", "files"}
        assert set(record_json["files"]) == {f"{u}/{NOTEBOOK}" for u in LEARNERS}
        for user in LEARNERS:
            entry = record_json["files"][f"{user}/{NOTEBOOK}"]
            assert entry["late"] is False
            saved = dt.datetime.fromisoformat(entry["last_saved"]).timestamp()
            assert abs(saved - (homes[user] / IN_HOME).stat().st_mtime) < 1
        _teacher(["make", "grade", f"DIR={collected}"], root, env)
        with open(collected / "grades.csv", newline="") as f:
            rows = {row["learner"]: row for row in csv.DictReader(f)}
        assert [rows["pnhub-right"][e] for e in ("1.1", "1.2", "1.3")] == ["pass", "pass", "pass"]
        assert [rows["pnhub-wrong"][e] for e in ("1.1", "1.2", "1.3")] == ["pass", "pass", "hint"]
        assert [rows["pnhub-unfinished"][e] for e in ("1.1", "1.2", "1.3")] == ["not done"] * 3
        # The grader's feedback goes back as the docs type it, and each learner finds theirs at home.
        _teacher([*python, "feedback", str(collected)], root, env)
        for user in LEARNERS:
            returned = homes[user] / COURSE_FOLDER / "feedback" / f"{Path(NOTEBOOK).stem}-feedback.md"
            assert returned.stat().st_uid == pwd.getpwnam(user).pw_uid, returned
        hint = (homes["pnhub-wrong"] / COURSE_FOLDER / "feedback" / f"{Path(NOTEBOOK).stem}-feedback.md").read_text()
        assert "1.3" in hint and "hint" in hint.lower(), hint

        # One learner's memory bomb: their kernel dies in their own cgroup; everyone else's goes on.
        if cgroup_layout() is not None:
            bomber = browsers["pnhub-wrong"]
            with pytest.raises((ConnectionError, RuntimeError, TimeoutError)):
                outputs = bomber.run({"cells": [{"cell_type": "code", "source": BOMB}]}, timeout=120)["cells"][0]
                raise RuntimeError(f"the bomb's cell ended: {outputs['outputs']}")
            assert cgroup_of("pnhub-wrong").oom_kills() >= 1
            for user in ("pnhub-right", "pnhub-unfinished"):
                alive = browsers[user].run({"cells": [{"cell_type": "code", "source": "print(6 * 7)"}]})
                assert alive["cells"][0]["outputs"][0]["text"] == "42\n"
                assert cgroup_of(user).oom_kills() == 0
            assert browsers["pnhub-wrong"].api("GET", "status").status_code == 200  # the server itself survived
        else:
            print("no cgroup here: the memory limit's effect is not shown")

        # The teacher publishes a change (the distribution rebuilt); a second pull brings it, keeps the answers.
        changed = tmp_path / "checkout"
        shutil.copytree(root / "notebooks" / "exercises", changed / "notebooks" / "exercises")
        shutil.copytree(root / "figures", changed / "figures")
        for path in solution_notebooks(root):
            shutil.copy(path, changed / "notebooks" / path.name)
        fixed = read_notebook(changed / "notebooks" / "exercises" / "02_swiglu_silu_relu.ipynb")
        fixed.cells[0].source += "\n\nA note from the teacher."
        nbformat.write(fixed, changed / "notebooks" / "exercises" / "02_swiglu_silu_relu.ipynb")
        distribution.build(changed, hub_dir / REPOSITORY)
        mine = homes["pnhub-right"] / IN_HOME
        before = mine.read_bytes()
        browsers["pnhub-right"].pull(browsers["pnhub-right"].open_link(link))
        assert mine.read_bytes() == before
        assert "A note from the teacher." in (mine.parent / "02_swiglu_silu_relu.ipynb").read_text()

        # A restart of the hub (make hub-restart) keeps every learner's server and kernel.
        servers = {user: sorted(cgroup_of(user).pids()) for user in LEARNERS} if cgroup_layout() else {}
        _teacher(["make", "hub-restart", f"HUB_DIR={hub_dir}", f"HUB_PORT={port}"], root, env)
        assert service.hub_pid(hub_dir) != hub_pid
        for user in servers:
            assert sorted(cgroup_of(user).pids()) == servers[user], f"{user}'s processes changed over the restart"
        again = browsers["pnhub-right"].run({"cells": [{"cell_type": "code", "source": "print(6 * 7)"}]})
        assert again["cells"][0]["outputs"][0]["text"] == "42\n"

        # Removing a learner whose server runs: the server is stopped first, then the hub user and the account.
        out = _teacher([*python, "learners", "remove", "pnhub-unfinished"], root, env)
        assert "server stopped, hub user removed" in out and not accounts.exists("pnhub-unfinished"), out
        assert service.Api(hub_dir).user("pnhub-unfinished") is None

        # The end of the class: make hub-stop leaves no process behind.
        proxy_pid = int((hub_dir / "state" / "proxy.pid").read_text())
        hub_pid = service.hub_pid(hub_dir)
        children = [p.pid for p in psutil.Process(hub_pid).children(recursive=True)]
        _teacher(["make", "hub-stop", f"HUB_DIR={hub_dir}"], root, env)
        deadline = time.monotonic() + 30
        left = []
        while time.monotonic() < deadline:
            left = [pid for pid in [hub_pid, proxy_pid, *children] if psutil.pid_exists(pid)
                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
            left += [p for u in LEARNERS if accounts.exists(u) for p in accounts.processes(u)]
            if not left:
                break
            time.sleep(0.3)
        assert left == [], f"processes left after make hub-stop: {left}"
    finally:
        if (pid := service.hub_pid(hub_dir)) is not None:  # the hub, and what it started (proxy, idle culler)
            with contextlib.suppress(psutil.Error):
                for process in [*psutil.Process(pid).children(recursive=True), psutil.Process(pid)]:
                    process.kill()
        proxy_pid_file = hub_dir / "state" / "proxy.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(proxy_pid_file.read_text()), signal.SIGKILL)  # the proxy this hub started, if it is left
        for user in [*LEARNERS, TEACHER]:  # the servers this test's hub started, if any are left; then the accounts
            if accounts.exists(user):
                deadline = time.monotonic() + 20
                while accounts.processes(user) and time.monotonic() < deadline:
                    for pid in accounts.processes(user):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    time.sleep(0.2)
                with contextlib.suppress(subprocess.CalledProcessError):
                    accounts.remove(user)
            if (group := cgroup_of(user)) is not None:
                group.remove()
        shutil.rmtree(hub_dir, ignore_errors=True)
        if recorded is None:
            record.unlink(missing_ok=True)
        else:
            record.write_text(recorded)
        assert not [u for u in [*LEARNERS, TEACHER] if accounts.exists(u)], "an account could not be removed"


def test_a_learner_name_that_cannot_be_an_account_is_refused():
    for bad in ("Alice", "bob smith", "-x", "a" * 33, "../root"):
        with pytest.raises(ValueError, match=f"learner name {re.escape(repr(bad))}: expected 1-32 characters"):
            accounts.check_name(bad)
    assert accounts.check_name("alice_01") == "alice_01"


def test_the_link_pulls_the_learners_repository_and_opens_the_exercise():
    link = urlparse(pull_link("https://hub.example.org/", "file:///srv/prenorm-hub/class.git", BRANCH, NOTEBOOK))
    assert (link.scheme, link.netloc, link.path) == ("https", "hub.example.org", "/hub/user-redirect/git-pull")
    assert parse_qs(link.query) == {"repo": ["file:///srv/prenorm-hub/class.git"], "branch": ["main"],
                                    "targetpath": [COURSE_FOLDER],
                                    "urlpath": [f"lab/tree/{COURSE_FOLDER}/notebooks/exercises/{NOTEBOOK}"]}


def test_the_hub_admits_the_course_groups_starts_a_class_together_and_keeps_servers_over_a_restart():
    text = config_text(Path("/srv/prenorm-hub"), "127.0.0.1", 8000, Limits("1500M", 0.5, 600))
    assert 'c.PAMAuthenticator.allowed_groups = {' in text and "'prenorm-learners'" in text
    assert "c.PAMAuthenticator.admin_groups = {'prenorm-teachers'}" in text
    assert "c.Spawner.http_timeout = 600" in text and "c.Spawner.start_timeout = 600" in text
    assert "c.JupyterHub.cleanup_servers = False" in text
    assert "c.Spawner.mem_limit = '1500M'" in text and "c.Spawner.cpu_limit = 0.5" in text
    assert '"jupyterhub_idle_culler", "--timeout=600"' in text
    with pytest.raises(ValueError, match=r"memory limit '2 GB': expected bytes or a number with K, M, G or T"):
        Limits("2 GB")
    with pytest.raises(ValueError, match=r"CPU limit 0: expected a positive number of cores"):
        Limits(cpus=0)


def test_the_learners_repository_holds_no_solution_and_the_check_sees_one(tmp_path: Path):
    root = repo_root()
    given = distribution.files(root)
    assert distribution.find_solutions(given, root) == []
    assert {n for n in given if n.startswith("notebooks/")} == \
        {f"notebooks/exercises/{p.name}" for p in exercise_notebooks(root)}
    assert not [n for n in given if n.startswith(("prenorm_course/", "tests/", "prenorm_lib/"))]
    # The check fires: on the course notebooks, on one exercise answer left in, on an answer cell's output.
    solutions = {f"notebooks/{p.name}": p.read_bytes() for p in solution_notebooks(root)}
    found = distribution.find_solutions(solutions, root)
    assert any("a course (solution) notebook" in f for f in found) and any("a solution marker" in f for f in found)
    exercise = json.loads(given["notebooks/exercises/01_rmsnorm.ipynb"])
    line = sorted(distribution.solution_lines(root))[0]
    exercise["cells"][0]["source"] += ["\n", line]
    assert distribution.find_solutions({"x.ipynb": json.dumps(exercise, indent=1).encode()}, root) == \
        [f"x.ipynb: the solution line {line!r}"]
    unfolded = {f"notebooks/exercises/{p.name}": p.read_bytes()
                for p in (root / "notebooks" / "exercises").glob("05_*.ipynb")}
    assert distribution.find_solutions(unfolded, root), "05's answer cell shows the library's forward passes"
    # Built twice from the same checkout: one commit; no commit of the branch ever held a solution.
    bare = tmp_path / "class.git"
    first = distribution.build(root, bare, log=lambda _: None)
    assert distribution.build(root, bare, log=lambda _: None) == first
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(bare), str(clone)], check=True)
    assert distribution.find_solutions(_home_files(clone), root) == []


def test_collect_keeps_the_last_save_and_flags_late_work(tmp_path: Path, monkeypatch):
    home = tmp_path / "home"
    (home / COURSE_FOLDER / "notebooks" / "exercises").mkdir(parents=True)
    notebook = home / COURSE_FOLDER / "notebooks" / "exercises" / NOTEBOOK
    notebook.write_text("{}")
    saved = dt.datetime(2026, 5, 4, 17, 30, tzinfo=dt.UTC)
    os.utime(notebook, (saved.timestamp(), saved.timestamp()))
    (home / COURSE_FOLDER / "notebooks" / "exercises" / "02_swiglu_silu_relu.ipynb").symlink_to(notebook)
    entry = list(pwd.getpwuid(os.getuid()))
    entry[5] = str(home)  # pw_dir: alice's home is this folder
    monkeypatch.setattr(pwd, "getpwnam", lambda name: pwd.struct_passwd(entry))
    out = tmp_path / "submissions"
    now = dt.datetime(2026, 5, 5, 9, 0, tzinfo=dt.UTC)
    missing = collect(out, ["alice"], [NOTEBOOK, "02_swiglu_silu_relu.ipynb"], parse_due("2026-05-04T17:00+00:00"),
                      now=now)
    assert missing and "alice: 02_swiglu_silu_relu.ipynb" in missing[0]  # a symbolic link is not followed
    assert json.loads((out / "collection.json").read_text()) == {
        "collected_at": "2026-05-05T09:00:00+00:00", "due": "2026-05-04T17:00:00+00:00",
        "files": {f"alice/{NOTEBOOK}": {"last_saved": "2026-05-04T17:30:00+00:00", "late": True}}}
    assert (out / "alice" / NOTEBOOK).stat().st_mtime == saved.timestamp()
    collect(out, ["alice"], [NOTEBOOK], parse_due("2026-05-04T18:00+00:00"), now=now)
    assert json.loads((out / "collection.json").read_text())["files"][f"alice/{NOTEBOOK}"]["late"] is False
    collect(out, ["alice"], [NOTEBOOK], None, now=now)
    assert json.loads((out / "collection.json").read_text())["due"] is None
    with pytest.raises(ValueError, match=r"--due 'friday': expected a date and time in ISO-8601"):
        parse_due("friday")


def test_feedback_goes_back_into_the_learners_home_as_the_learner(tmp_path: Path):
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("setpriv") is None:
        _skip("needs root and setpriv: the feedback is written as the learner")
    name = "pnhub-feedback"
    try:
        home = accounts.add(name)
        (home / COURSE_FOLDER).mkdir()
        shutil.chown(home / COURSE_FOLDER, name, name)
        out = tmp_path / "graded"
        (out / "feedback" / name).mkdir(parents=True)
        (out / "feedback" / name / "01_rmsnorm-feedback.md").write_text("Exercise 1.3: a hint\n")
        # A learner's symbolic link cannot send the teacher's write elsewhere: it is written as the learner.
        os.symlink("/etc", home / COURSE_FOLDER / "feedback")
        with pytest.raises(subprocess.CalledProcessError):
            return_feedback(out, [name])
        assert not Path("/etc/01_rmsnorm-feedback.md").exists()
        (home / COURSE_FOLDER / "feedback").unlink()
        assert return_feedback(out, None) == {name: ["01_rmsnorm-feedback.md"]}
        returned = home / COURSE_FOLDER / "feedback" / "01_rmsnorm-feedback.md"
        assert returned.read_text() == "Exercise 1.3: a hint\n" and returned.stat().st_uid == pwd.getpwnam(name).pw_uid
        # The hub test's ownership check, failing on purpose: the same file copied by the teacher (root) is not theirs.
        by_teacher = returned.with_name("copied-by-root.md")
        shutil.copyfile(returned, by_teacher)
        assert by_teacher.stat().st_uid != pwd.getpwnam(name).pw_uid
    finally:
        accounts.remove(name)


def test_the_teachers_commands_find_the_hub_folder_the_hub_uses(tmp_path: Path, monkeypatch):
    warnings = []
    monkeypatch.delenv("HUB_DIR", raising=False)
    assert service.find_hub(None, tmp_path, warnings.append) == service.DEFAULT_HUB
    assert warnings and "which may not be the hub your learners use" in warnings[0]
    (tmp_path / service.RECORD).write_text("/srv/class-b\n")
    assert service.find_hub(None, tmp_path, warnings.append) == Path("/srv/class-b")
    monkeypatch.setenv("HUB_DIR", str(tmp_path / "hub-c"))
    assert service.find_hub(None, tmp_path, warnings.append) == tmp_path / "hub-c"
    assert service.find_hub(tmp_path / "d", tmp_path, warnings.append) == tmp_path / "d"
    assert len(warnings) == 1
