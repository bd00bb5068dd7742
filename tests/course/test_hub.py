"""A class on a real JupyterHub, on 127.0.0.1, driven as a teacher and three learners would.

The hub folder is made by ``prenorm_course.hub.environment.prepare`` (the course's pinned
venv, configurable-http-proxy from the npm registry, the course as a bare git repository
served over ``file://``); then the README's ``make hub HUB_DIR=… HUB_PORT=…`` runs the hub. Three learners
get Unix accounts; the teacher's service token starts each one's server through the REST
API; each pulls the course with the nbgitpuller link, runs exercise notebook 01 in a
kernel of their own server (over the kernel's websocket, as JupyterLab does) with a right,
a wrong or no answer, and saves it; the teacher collects the three notebooks and grades
them with ``prenorm_course.exercises grade``. Then the teacher pushes a commit, one
learner pulls again and keeps their answers, and the hub stops with no process left.

Needs root (Unix accounts, servers started as them), git, npm and a system Python >= 3.11.
CI sets PRENORM_REQUIRE_HUB=1, so a skip there is a failure. Prints the measured times and
memory (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
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
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from tornado import httpclient, websocket

from prenorm_course.exercises.build import read_notebook
from prenorm_course.exercises.paths import repo_root
from prenorm_course.exercises.verify import filled_in
from prenorm_course.hub import accounts
from prenorm_course.hub.collect import collect
from prenorm_course.hub.config import COURSE_FOLDER, pull_link
from prenorm_course.hub.environment import BRANCH, prepare, shared_python

REQUIRED = os.environ.get("PRENORM_REQUIRE_HUB") == "1"
NOTEBOOK = "01_rmsnorm.ipynb"
WRONG_1_3 = '# Exercise 1.3: predict fp16 overflow\nsquare_in_fp16 = "65504"\nnorm_without_upcast = "1"\n'
LEARNERS = {"pnhub-right": "right", "pnhub-wrong": "wrong", "pnhub-unfinished": "unfinished"}


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


def _session_processes(sid: int) -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            found.append(stat.parent.name)
    return found


def _uid_processes(uid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            line = next(x for x in status.read_text().splitlines() if x.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if int(line.split()[1]) == uid:
            found.append(int(status.parent.name))
    return found


def _pss_mb(pids: list[int]) -> float:
    """Proportional set size: shared pages (torch's libraries) counted once across processes."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class Api:
    def __init__(self, base: str, token: str):
        self.base, self.headers = base, {"Authorization": f"token {token}"}

    def call(self, method: str, path: str, **kwargs):
        response = requests.request(method, self.base + path, headers=self.headers, timeout=120, **kwargs)
        assert response.status_code < 400, (method, path, response.status_code, response.text[:500])
        return response


def _message(frame: str | bytes) -> dict:
    """One kernel message from the websocket: JSON text, or (a message with buffers, e.g. a widget's)
    jupyter_server's binary frame: a count, offsets, then the JSON message and its buffers."""
    if isinstance(frame, str):
        return json.loads(frame)
    count = int.from_bytes(frame[:4], "big")
    offsets = [int.from_bytes(frame[4 + 4 * i:8 + 4 * i], "big") for i in range(count)]
    return json.loads(frame[offsets[0]:offsets[1] if count > 1 else None])


async def _run_cells(ws_url: str, token: str, sources: list[str]) -> list[list[dict]]:
    """Run ``sources`` in the kernel behind ``ws_url`` as JupyterLab does; the outputs of each (nbformat)."""
    request = httpclient.HTTPRequest(ws_url, headers={"Authorization": f"token {token}"})
    conn = await websocket.websocket_connect(request, max_message_size=256 * 2**20)
    session, results = uuid.uuid4().hex, []
    try:
        for source in sources:
            msg_id = uuid.uuid4().hex
            conn.write_message(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session, "username": "",
                           "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            outputs, idle, replied = [], False, False
            while not (idle and replied):
                msg = _message(await asyncio.wait_for(conn.read_message(), 300))
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = msg["header"]["msg_type"], msg["content"]
                if msg["channel"] == "shell" and kind == "execute_reply":
                    replied = True
                elif kind == "status" and content["execution_state"] == "idle":
                    idle = True
                elif kind == "stream":
                    outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
                elif kind in ("display_data", "execute_result"):
                    output = {"output_type": kind, "data": content["data"], "metadata": content.get("metadata", {})}
                    if kind == "execute_result":
                        output["execution_count"] = content["execution_count"]
                    outputs.append(output)
                elif kind == "error":
                    outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                                    "traceback": content["traceback"]})
            results.append(outputs)
    finally:
        conn.close()
    return results


def _answers(root: Path, answer: str, notebook: dict) -> dict:
    """The learner's notebook with their answers typed into the exercise cells."""
    if answer == "unfinished":
        return notebook
    import nbformat

    solution = read_notebook(root / "notebooks" / NOTEBOOK)
    filled = filled_in(nbformat.from_dict(notebook), solution)
    if answer == "wrong":
        for cell in filled.cells:
            if cell.source.startswith("# Exercise 1.3"):
                cell.source = WRONG_1_3
    return json.loads(nbformat.writes(filled))


def _follow_link(link: str, user: str, password: str) -> tuple[requests.Session, requests.Response]:
    """A learner clicks the link: the hub asks them to log in (their Unix password), then nbgitpuller's page."""
    browser = requests.Session()
    login = browser.get(link, timeout=120)
    assert "/hub/login" in login.url, login.url
    form = {"username": user, "password": password, "_xsrf": browser.cookies.get("_xsrf", path="/hub/")}
    page = browser.post(login.url, data=form, timeout=300)
    assert page.status_code == 200, (page.status_code, page.url, page.text[:500])
    return browser, page


def _pull(browser: requests.Session, base: str, user: str, repo: str, branch: str) -> str:
    """nbgitpuller's own pull (the page the link opens streams this); returns its log."""
    query = {"repo": repo, "branch": branch, "targetpath": COURSE_FOLDER}
    response = browser.get(f"{base}/user/{user}/git-pull/api", params=query, stream=True, timeout=300)
    assert response.status_code == 200, (response.status_code, response.text[:500])
    log = []
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data:"):
            event = json.loads(line[5:])
            log.append(event.get("output", "") or event.get("message", ""))
            if event.get("phase") in ("finished", "error"):
                assert event["phase"] == "finished", "\n".join(log)
                break
    return "".join(log)


def test_a_class_on_a_real_jupyterhub(tmp_path: Path):
    if sys.platform != "linux" or os.geteuid() != 0:
        _skip("needs root on Linux: learners are Unix accounts and their servers run as them")
    for tool in ("useradd", "userdel", "git", "npm", "setpriv"):
        if shutil.which(tool) is None:
            _skip(f"needs {tool}")
    try:
        shared_python()
    except FileNotFoundError as exc:
        _skip(str(exc))
    root = repo_root()
    hub_dir = Path(tempfile.mkdtemp(prefix="prenorm-hub-", dir="/tmp"))
    hub_dir.chmod(0o755)
    figures, process, api = {}, None, None
    try:
        start = time.monotonic()
        prepare(root, hub_dir)
        figures["prepare (venv, proxy, repository)"] = time.monotonic() - start
        port = _free_port()
        log = open(tmp_path / "hub.log", "w")  # noqa: SIM115 -- open for the hub's whole life
        # The README's command as typed: make prepares again (up to date: quick) and runs the hub in the foreground.
        process = subprocess.Popen(["make", "hub", f"HUB_DIR={hub_dir}", f"HUB_PORT={port}"], cwd=root,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        api = Api(base, (hub_dir / "state" / "teacher_token").read_text().strip())
        pid_file, start = hub_dir / "state" / "jupyterhub.pid", time.monotonic()
        while not pid_file.exists():  # jupyterhub writes it as it starts: the hub's start is timed from here
            assert process.poll() is None, (tmp_path / "hub.log").read_text()[-3000:]
            assert time.monotonic() - start < 600, "make hub did not start jupyterhub within 600 s"
            time.sleep(0.1)
        start = time.monotonic()
        while True:
            assert process.poll() is None, (tmp_path / "hub.log").read_text()[-3000:]
            try:
                if requests.get(f"{base}/hub/api/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() - start < 120, "the hub did not answer within 120 s"
            time.sleep(0.1)
        figures["hub start"] = time.monotonic() - start
        proxy_pid = int((hub_dir / "state" / "proxy.pid").read_text())  # the proxy runs in a session of its own

        homes, tokens = {}, {}
        passwords = {user: secrets.token_urlsafe(16) for user in LEARNERS}
        for user in LEARNERS:
            homes[user] = accounts.add(user)
            subprocess.run(["chpasswd"], input=f"{user}:{passwords[user]}\n", text=True, check=True)
            assert homes[user].stat().st_mode & 0o777 == 0o700
            api.call("POST", f"/hub/api/users/{user}")
            start = time.monotonic()
            api.call("POST", f"/hub/api/users/{user}/server")
            while not api.call("GET", f"/hub/api/users/{user}").json()["servers"].get("", {}).get("ready"):
                assert time.monotonic() - start < 180, f"{user}'s server did not start"
                time.sleep(0.2)
            figures.setdefault("learner server start", time.monotonic() - start)
            tokens[user] = api.call("POST", f"/hub/api/users/{user}/tokens", json={"note": "test"}).json()["token"]

        repo, branch = f"file://{hub_dir / 'course.git'}", BRANCH
        link = pull_link(base, repo, branch, NOTEBOOK)
        kernels, browsers = {}, {}
        for user, answer in LEARNERS.items():
            learner = Api(base, tokens[user])
            browsers[user], page = _follow_link(link, user, passwords[user])
            assert urlparse(page.url).path == f"/user/{user}/git-pull", page.url
            query = parse_qs(urlparse(page.url).query)
            assert query["repo"] == [repo]
            assert query["urlpath"] == [f"lab/tree/{COURSE_FOLDER}/notebooks/exercises/{NOTEBOOK}"]
            _pull(browsers[user], base, user, query["repo"][0], query["branch"][0])
            pulled = homes[user] / COURSE_FOLDER / "notebooks" / "exercises" / NOTEBOOK
            assert pulled.stat().st_uid == pwd.getpwnam(user).pw_uid
            contents = f"/user/{user}/api/contents/{COURSE_FOLDER}/notebooks/exercises/{NOTEBOOK}"
            notebook = _answers(root, answer, learner.call("GET", contents).json()["content"])
            kernel = learner.call("POST", f"/user/{user}/api/kernels", json={"name": "python3"}).json()["id"]
            kernels[user] = kernel
            code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
            ws = f"ws://127.0.0.1:{port}/user/{user}/api/kernels/{kernel}/channels"
            start = time.monotonic()
            outputs = asyncio.run(_run_cells(ws, tokens[user], ["".join(c["source"]) for c in code]))
            figures.setdefault("notebook 01 in a learner's kernel", time.monotonic() - start)
            for cell, out in zip(code, outputs, strict=True):
                cell["outputs"] = out
            learner.call("PUT", contents, json={"type": "notebook", "format": "json", "content": notebook})
        memory = {user: _pss_mb(_uid_processes(pwd.getpwnam(user).pw_uid)) for user in LEARNERS}
        figures["memory per learner (server + kernel, PSS MB)"] = max(memory.values())

        print("\n" + "\n".join(f"{name}: {value:.1f}" for name, value in figures.items()))
        print("memory per learner (PSS MB): " + ", ".join(f"{u} {m:.0f}" for u, m in memory.items()))

        # One learner cannot read another's work.
        other = subprocess.run(["setpriv", f"--reuid={pwd.getpwnam('pnhub-wrong').pw_uid}",
                                f"--regid={pwd.getpwnam('pnhub-wrong').pw_gid}", "--clear-groups", "cat",
                                str(homes["pnhub-right"] / COURSE_FOLDER / "notebooks" / "exercises" / NOTEBOOK)],
                               capture_output=True, text=True)
        assert other.returncode != 0 and "Permission denied" in other.stderr

        # The teacher collects and grades.
        collected = tmp_path / "collected"
        assert collect(collected, list(LEARNERS), [NOTEBOOK]) == []
        grade = subprocess.run([sys.executable, "-m", "prenorm_course.exercises", "grade", str(collected)],
                               cwd=root, capture_output=True, text=True, timeout=900)
        assert grade.returncode == 0, grade.stdout + grade.stderr
        with open(collected / "grades.csv", newline="") as f:
            rows = {row["learner"]: row for row in csv.DictReader(f)}
        assert [rows["pnhub-right"][e] for e in ("1.1", "1.2", "1.3")] == ["pass", "pass", "pass"]
        assert [rows["pnhub-wrong"][e] for e in ("1.1", "1.2", "1.3")] == ["pass", "pass", "hint"]
        assert [rows["pnhub-unfinished"][e] for e in ("1.1", "1.2", "1.3")] == ["not done"] * 3
        assert [rows[u]["passed"] for u in LEARNERS] == ["3/3", "2/3", "0/3"]

        # The teacher pushes a change; a second pull brings it and keeps the learner's answers.
        work = tmp_path / "teacher"
        subprocess.run(["git", "clone", "--quiet", "--branch", branch, str(hub_dir / "course.git"), str(work)],
                       check=True)
        (work / "README.md").write_text((work / "README.md").read_text() + "\nA note from the teacher.\n")
        git = ["git", "-C", str(work), "-c", "user.name=teacher", "-c", "user.email=teacher@example.org"]
        subprocess.run([*git, "commit", "--quiet", "-am", "A note for the class"], check=True)
        subprocess.run([*git, "push", "--quiet", "origin", branch], check=True)
        mine = homes["pnhub-right"] / COURSE_FOLDER / "notebooks" / "exercises" / NOTEBOOK
        before = mine.read_bytes()
        _pull(browsers["pnhub-right"], base, "pnhub-right", repo, branch)
        assert mine.read_bytes() == before
        assert "A note from the teacher." in (homes["pnhub-right"] / COURSE_FOLDER / "README.md").read_text()

        # The hub stops with nothing left behind.
        for user in LEARNERS:
            api.call("DELETE", f"/hub/api/users/{user}/server")
        start = time.monotonic()
        while any(_uid_processes(pwd.getpwnam(u).pw_uid) for u in LEARNERS):
            assert time.monotonic() - start < 60, "learner processes still running 60 s after their servers stopped"
            time.sleep(0.2)
        hub_pid = int(pid_file.read_text())
        os.kill(hub_pid, signal.SIGTERM)  # jupyterhub stops its proxy; make, its parent, then exits
        process.wait(60)
        deadline = time.monotonic() + 10
        while _session_processes(process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _session_processes(process.pid) == [], "the hub left processes behind"
        assert not Path(f"/proc/{proxy_pid}").exists(), "the hub left its proxy running"
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        proxy_pid_file = hub_dir / "state" / "proxy.pid"
        if proxy_pid_file.exists() and Path(f"/proc/{int(proxy_pid_file.read_text())}").exists():
            os.kill(int(proxy_pid_file.read_text()), signal.SIGKILL)  # the proxy this hub started, if it is left
        for user in LEARNERS:  # the servers this test's hub started, if any are left; then the accounts
            if accounts.exists(user):
                uid, deadline = pwd.getpwnam(user).pw_uid, time.monotonic() + 20
                while _uid_processes(uid) and time.monotonic() < deadline:
                    for pid in _uid_processes(uid):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    time.sleep(0.2)
                with contextlib.suppress(subprocess.CalledProcessError):
                    accounts.remove(user)
        shutil.rmtree(hub_dir, ignore_errors=True)
        assert not [u for u in LEARNERS if accounts.exists(u)], "a learner's account could not be removed"


def test_a_learner_name_that_cannot_be_an_account_is_refused():
    for bad in ("Alice", "bob smith", "-x", "a" * 33, "../root"):
        with pytest.raises(ValueError, match=f"learner name {re.escape(repr(bad))}: expected 1-32 characters"):
            accounts.check_name(bad)
    assert accounts.check_name("alice_01") == "alice_01"


def test_the_link_pulls_the_hub_repository_and_opens_the_exercise():
    link = urlparse(pull_link("https://hub.example.org/", "file:///srv/prenorm-hub/course.git", BRANCH, NOTEBOOK))
    assert (link.scheme, link.netloc, link.path) == ("https", "hub.example.org", "/hub/user-redirect/git-pull")
    assert parse_qs(link.query) == {"repo": ["file:///srv/prenorm-hub/course.git"], "branch": ["main"],
                                    "targetpath": [COURSE_FOLDER],
                                    "urlpath": [f"lab/tree/{COURSE_FOLDER}/notebooks/exercises/{NOTEBOOK}"]}
