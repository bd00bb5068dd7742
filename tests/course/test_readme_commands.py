"""Every command the README gives, run exactly as a person types it: through `make`, from the
root of a fresh checkout of the course.

A command that a test imports around (a module's function called directly) can break in the
way people meet it and no test notices: `make demo` once showed a page of errors while the
tests, which built the dashboard by importing its module, passed. So:

* :func:`test_every_readme_command_is_exercised` reads the README's commands and fails for
  one that no test here (or the CI step) runs as written;
* each test below runs one command with `make` in a copy of the checkout (tracked and
  untracked files, the `.venv` linked), with cheap arguments the Makefile documents, and
  checks what a person would look at: the exit status, the lines printed, the files written.

The copy keeps the real checkout untouched (`make figures`, `make site` and `make experiment`
write into the tree). Servers (`make lab`, `make demo`) run in their own session and are
stopped with their process group, by the id of the process started here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from prenorm_course.exercises.paths import SOLUTION_GLOB, exercise_name, solution_notebooks
from prenorm_course.site import page_stem

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"


def doc_files() -> list[Path]:
    """Every document a reader follows: the README, the docs folder, CONTRIBUTING, CHANGELOG, AGENTS."""
    docs = [README, *sorted((REPO_ROOT / "docs").glob("*.md")),
            *(REPO_ROOT / name for name in ("CONTRIBUTING.md", "CHANGELOG.md", "AGENTS.md"))]
    return [path for path in docs if path.exists()]


def all_docs_text() -> str:
    return "\n".join(path.read_text() for path in doc_files())
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
MAKE_COMMAND = re.compile(r"(?:^|[\s;&|(])make ([a-z][a-z0-9-]*)((?:\s+[A-Z_]+=\S+)*)")

# Each README command and what runs it as written (a test in this module unless a path is named).
EXERCISED = {
    "lab": "test_make_lab_opens_the_exercise_notebooks",
    "setup": "test_install_by_hand_then_make_setup",  # make setup and make setup TORCH_INDEX=, in a fresh clone
    "bench-browser": "test_make_bench_browser_runs_one_notebook",
    "agents": "test_make_agents_leaves_a_current_file_alone",
    "test": ".ci/run",  # CI runs `make test` on a fresh clone, nothing weaker
    "demo": "tests/course/browser/test_demo.py",  # make demo NB=0N PORT=… for every notebook, in Chromium
    "site": "test_make_site_builds_every_page",
    "check": "test_make_check_reports_each_exercise",
    "grade": "test_make_grade_writes_the_grade_book",
    "bench": "test_make_bench_prints_every_comparison",
    "notebook-times": "test_make_notebook_times_times_a_notebook",
    "figures": "test_make_figures_writes_every_library_figure",
    "experiment": "test_make_experiment_writes_a_current_record",
    "exercises": "test_make_exercises_rebuilds_the_stored_exercise_notebooks",
    "wheel": "test_make_wheel_builds_an_installable_wheel",
    "wheel-check": ".ci/run",  # CI builds the wheel, installs it in a fresh venv and runs nbval outside the checkout
    "nbval-cpus": ".ci/run",  # CI runs nbval under torch's and MKL's AVX2 code paths and ATen without SIMD
    "attacks-as-user": ".ci/run",  # CI runs the attacks, make check and make grade as a normal user
    # The two commands that remake everything (about 17 min of experiments; every notebook
    # re-executed and rewritten) are the loops over single commands exercised here and in CI:
    # `make experiment NAME=…` above, and nbval (part of `make test`) executing every notebook.
    "experiments": "test_make_experiment_writes_a_current_record",
    "notebooks": ".ci/run",
    "gradescope": "tests/course/test_gradescope.py",  # make gradescope NB=01; its zip graded in /autograder
    "hub": "tests/course/test_hub.py",  # make hub HUB_DIR=… HUB_PORT=…, as root on 127.0.0.1, three learners
    "hub-status": "tests/course/test_hub.py",  # make hub-status / hub-restart / hub-stop HUB_DIR=…, as typed
    "hub-restart": "tests/course/test_hub.py",
    "hub-stop": "tests/course/test_hub.py",
    # Runs of minutes at a class's size, by hand on a quiet machine (their figures: docs/measurements.md);
    # their tables are tested here, the learner they run is the hub test's.
    "class-bench": "tests/course/test_class_bench.py",
    "kernel-memory": "tests/course/test_class_bench.py",
    "nbgrader-export": "tests/course/test_nbgrader_export.py",  # make nbgrader-export, then nbgrader itself
    "handout": "tests/course/test_handout_export.py",  # make handout FROM=… OUT=…, its interface tests run
    # the grader's own runs of hours and minutes: a few draws of make false-hints as typed, and the class test
    # that make hostile-class runs at CI's size
    "false-hints": "tests/course/test_false_hints.py",
    "hostile-class": "tests/course/test_hostile_class.py",
}


def readme_commands(text: str) -> dict[str, list[str]]:
    """The `make` targets the README shows in code (inline or fenced), each with the command lines."""
    found: dict[str, list[str]] = {}
    code = [block for block in FENCE.findall(text)] + INLINE_CODE.findall(FENCE.sub("", text))
    for snippet in code:
        for match in MAKE_COMMAND.finditer(snippet):
            found.setdefault(match.group(1), []).append(f"make {match.group(1)}{match.group(2)}")
    return found


def test_readme_commands_are_found_in_code_only():
    text = "Run `make lab`, then\n```bash\nmake demo NB=03   # a dashboard\n```\nWe make a point of it."
    assert readme_commands(text) == {"lab": ["make lab"], "demo": ["make demo NB=03"]}


def test_every_readme_command_is_exercised():
    assert {"lab", "check"} <= set(readme_commands(README.read_text())), "the README lost a learner's command"
    commands = readme_commands(all_docs_text())
    assert {"lab", "test", "demo", "site", "check", "grade", "bench", "figures", "experiment"} <= set(commands)
    missing = sorted(set(commands) - set(EXERCISED))
    assert not missing, (f"the docs give {[commands[name][0] for name in missing]} but no test runs them as "
                         f"written: add a test to {Path(__file__).name} and name it in EXERCISED")
    module = globals()
    for name, where in EXERCISED.items():
        exists = callable(module.get(where)) if where.startswith("test_") else (REPO_ROOT / where).exists()
        assert exists, f"EXERCISED[{name!r}] names {where!r}, which does not exist"
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE))
    assert set(commands) <= targets, f"README names make targets the Makefile lacks: {set(commands) - targets}"
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text()


def test_a_new_readme_command_without_a_test_fails(monkeypatch):
    """The check above is seen to fire: a README with one more command fails it."""
    text = README.read_text() + "\nAlso `make teach NB=01`.\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text if self == README else _read(self))
    with pytest.raises(AssertionError, match="make teach NB=01"):
        test_every_readme_command_is_exercised()



# ---------------------------------------------------------------- what the README says, as typed

NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "eleven": 11, "twelve": 12}
NOTEBOOK_COUNT = re.compile(r"\b(?:in|all) (\w+) (?:Jupyter )?notebooks\b", re.IGNORECASE)
PYTHON_MODULE = re.compile(r"(?<![\w(])([\w./]*python[\d.]*) -m ([\w.]+)(?: ([a-z][a-z-]*))?")  # not "(python …)"


def course_notebooks() -> int:
    return len(solution_notebooks(REPO_ROOT))


def notebook_count_mismatches(text: str, actual: int) -> list[str]:
    """Phrases like "in four Jupyter notebooks" or "all five notebooks" whose number is not ``actual``."""
    return [match.group(0) for match in NOTEBOOK_COUNT.finditer(text)
            if NUMBER_WORDS.get(match.group(1).lower(), actual) != actual]


def test_the_readme_counts_the_notebooks_there_are():
    text = README.read_text()
    assert NOTEBOOK_COUNT.search(text), "the README no longer says how many notebooks there are"
    assert notebook_count_mismatches(text, course_notebooks()) == [], f"notebooks/ holds {course_notebooks()}"


def test_a_stale_notebook_count_is_found():
    text = "An open course in four Jupyter notebooks. nbval runs all five notebooks."
    assert notebook_count_mismatches(text, 5) == ["in four Jupyter notebooks"]
    assert notebook_count_mismatches(text, 6) == ["in four Jupyter notebooks", "all five notebooks"]


def readme_python_commands(text: str) -> list[tuple[str, str, str | None]]:
    """(interpreter, module, subcommand) of every `python -m …` the README shows in code."""
    code = FENCE.findall(text) + INLINE_CODE.findall(FENCE.sub("", text))
    return [match.groups() for snippet in code for match in PYTHON_MODULE.finditer(snippet)]


def test_every_python_command_of_the_readme_runs_as_typed_from_a_checkout():
    """A bare `python` is not the course's (it lacks torch); the venv's is. Each module and
    subcommand must exist: `--help` of each exits 0, as it does not for a name argparse refuses."""
    assert ("python3.11", "venv", None) in readme_python_commands(README.read_text())
    commands = readme_python_commands(all_docs_text())
    assert len(commands) > 3, commands
    for interpreter, module, subcommand in commands:
        if module == "venv":
            continue
        assert interpreter == ".venv/bin/python", f"`{interpreter} -m {module}`: type .venv/bin/python"
        result = subprocess.run([str(REPO_ROOT / interpreter), "-m", module, *filter(None, [subcommand]), "--help"],
                                cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"`{interpreter} -m {module} {subcommand or ''}`: {result.stderr[-500:]}"


def test_a_bare_python_in_the_readme_is_found():
    assert readme_python_commands("`python -m prenorm_lib.lab.experiments list`") == [
        ("python", "prenorm_lib.lab.experiments", "list")]


def test_the_jupyter_lab_line_says_what_root_needs():
    paragraphs = [paragraph for paragraph in re.split(r"\n\s*\n", all_docs_text()) if "jupyter lab " in paragraph]
    assert paragraphs and all("--allow-root" in paragraph for paragraph in paragraphs), paragraphs

_read = Path.read_text


# ---------------------------------------------------------------- running make in a fresh checkout

@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of the course as a fresh clone has it (tracked and untracked, not ignored, files),
    with the `.venv` linked so that `make` finds it installed and current."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO_ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    root = tmp_path_factory.mktemp("checkout")
    for relative in filter(None, listed):
        source = REPO_ROOT / relative
        if source.is_file():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / relative)
    venv = REPO_ROOT / ".venv"
    if not (venv / ".installed").exists():
        pytest.skip("the course's .venv is not set up (make setup)")
    (root / ".venv").symlink_to(venv)
    stamp = (venv / ".installed").stat().st_mtime
    for requirement in ("requirements.txt", "pyproject.toml"):  # not newer than the install: no reinstall
        os.utime(root / requirement, (stamp - 1, stamp - 1))
    return root


def jupyter_home(folder: Path) -> dict[str, str]:
    """This environment with Jupyter's, IPython's and matplotlib's folders in `folder`."""
    env = dict(os.environ)
    for variable in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR",
                     "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        (folder / variable.lower()).mkdir(parents=True, exist_ok=True)
        env[variable] = str(folder / variable.lower())
    env.pop("JUPYTER_PATH", None)
    env["BROWSER"] = "true"  # "open the page in the browser" does nothing here
    return env


def make(checkout: Path, *arguments: str, timeout_s: float = 600,
         env: dict | None = None) -> subprocess.CompletedProcess:
    """`make ARGUMENTS` in the checkout's root, as typed; output captured as text."""
    return subprocess.run(["make", *arguments], cwd=checkout, capture_output=True, text=True,
                          timeout=timeout_s, env=env)


def said(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"


class Server:
    """`make …` running a server in its own session (process group), stopped with that group."""

    def __init__(self, checkout: Path, arguments: list[str], env: dict[str, str], log: Path):
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(["make", *arguments], cwd=checkout, env=env, stdout=out,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def wait_for(self, pattern: str, timeout_s: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log.read_text(errors="replace"))
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.25)
        raise AssertionError(f"{pattern!r} never appeared; the server said:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # Ctrl+C, as a person stops it
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def answers(url: str, timeout_s: float = 120) -> dict:
    """Poll `url` until it answers with JSON."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            last = error
        time.sleep(0.25)
    raise AssertionError(f"{url} did not answer in {timeout_s} s: {last}")


def responds(url: str, timeout_s: float = 120) -> int:
    """Poll `url` until the server answers; its HTTP status."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            last = error
        time.sleep(0.25)
    raise AssertionError(f"{url} did not answer in {timeout_s} s: {last}")


@pytest.mark.slow
def test_make_lab_opens_the_exercise_notebooks(checkout: Path, tmp_path: Path):
    """`make lab` prints (and opens) the exercise folder; the server's front page leads there; the
    solutions are one folder up, where a learner finds them after the exercises."""
    server = Server(checkout, ["lab"], jupyter_home(tmp_path), tmp_path / "lab.log")
    try:
        found = server.wait_for(r"http://(?:localhost|127\.0\.0\.1):(\d+)/lab(/tree/exercises)?\?token=([0-9a-f]+)")
        assert found.group(2) == "/tree/exercises", f"make lab opens {found.group(0)}, not the exercise notebooks"
        base, token = f"http://127.0.0.1:{found.group(1)}", found.group(3)
        assert "started" in answers(f"{base}/api/status?token={token}")
        front = urllib.request.urlopen(f"{base}/?token={token}", timeout=30)
        assert "/lab/tree/exercises" in front.url, f"the front page leads to {front.url}"
        exercises = {item["name"] for item in answers(f"{base}/api/contents/exercises?token={token}")["content"]}
        solutions = {item["name"] for item in answers(f"{base}/api/contents?token={token}")["content"]}
        course = {path.name for path in solution_notebooks(checkout)}
        assert course and {exercise_name(name) for name in course} <= exercises, \
            f"the exercise folder holds {sorted(exercises)}, not the exercises of {course}"
        assert course <= solutions, f"the solutions are not one folder up: {sorted(solutions)}"
    finally:
        server.stop()
    assert server.process.returncode is not None


def test_make_demo_names_the_notebooks_when_nb_matches_none(checkout: Path):
    result = make(checkout, "demo", "NB=99")
    assert result.returncode != 0 and "matches no notebook" in result.stderr, said(result)
    assert "01" in result.stderr and "Traceback" not in result.stderr, said(result)


@pytest.mark.slow
def test_make_demo_serves_the_dashboard_on_the_port_asked_for(checkout: Path, tmp_path: Path):
    """The quick half of the browser test (which opens every notebook in Chromium)."""
    port = _free_port()
    server = Server(checkout, ["demo", "NB=01", f"PORT={port}"], jupyter_home(tmp_path), tmp_path / "demo.log")
    try:
        server.wait_for(r"classroom view of 01_")
        assert responds(f"http://127.0.0.1:{port}/voila/static/voila.js") == 200
    finally:
        server.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_make_site_builds_every_page(checkout: Path):
    result = make(checkout, "site")
    assert result.returncode == 0, said(result)
    site = checkout / "_site"
    assert "wrote " in result.stdout and (site / "index.html").exists(), said(result)
    for notebook in solution_notebooks(checkout):
        page = (site / f"{page_stem(notebook)}.html").read_text()
        assert "No description has been provided" not in page, f"{notebook.stem}: a figure without a description"
        notes = re.findall(r'class="static-widget-note">(.*?)</div>', page, re.DOTALL)
        assert not [note for note in notes if "= None" in note], f"{notebook.stem}: a slider note says None"
        assert "### BEGIN SOLUTION" not in page and "### END SOLUTION" not in page, notebook.stem


@pytest.mark.slow
def test_make_check_reports_each_exercise(checkout: Path):
    result = make(checkout, "check", "NB=01")
    # The stored exercise notebook is as a learner first runs it: every exercise not done yet.
    assert "Exercise 1.1" in result.stdout and "not done" in result.stdout, said(result)
    assert "Traceback" not in result.stdout + result.stderr, said(result)
    assert result.returncode != 0, "an unfinished notebook passed `make check`"
    last = result.stderr.strip().splitlines()[-1]
    assert "not-every-exercise-passed-yet" in last, f"make's last line does not read as the verdict: {last!r}"


@pytest.mark.slow
def test_make_grade_writes_the_grade_book(checkout: Path, tmp_path: Path):
    submissions = tmp_path / "submissions"
    (submissions / "ada").mkdir(parents=True)
    shutil.copy2(checkout / "notebooks" / "exercises" / "01_rmsnorm.ipynb", submissions / "ada" / "01_rmsnorm.ipynb")
    (submissions / "bob.ipynb").write_text("not a notebook")
    result = make(checkout, "grade", f"DIR={submissions}")
    assert result.returncode == 0, said(result)
    grades = (submissions / "grades.md").read_text()
    assert "ada" in grades and "bob" in grades, grades
    assert (submissions / "grades.csv").exists()


@pytest.mark.slow
def test_make_bench_prints_every_comparison(checkout: Path):
    result = make(checkout, "bench", "REPEATS=2")
    assert result.returncode == 0, said(result)
    assert "2 interleaved repeats" in result.stdout, said(result)
    for row in ("TransformerBlock fwd+bwd", "RoPE", "rms_norm", "RMSNorm / LayerNorm", "compiled HF Llama"):
        assert row in result.stdout, said(result)
    from prenorm_course import measurements

    section = measurements.read_sections((checkout / measurements.DOCUMENT).read_text())["bench"]
    assert "*Written by `make bench REPEATS=2` on " in section and "compiled HF Llama" in section, section


@pytest.mark.slow
def test_make_notebook_times_times_a_notebook(checkout: Path):
    result = make(checkout, "notebook-times", "NB=01")
    assert result.returncode == 0, said(result)
    assert "01_rmsnorm_solutions.ipynb" in result.stdout and "Run All" in result.stdout, said(result)
    assert "02_swiglu" not in result.stdout, said(result)


@pytest.mark.slow
def test_make_figures_writes_every_library_figure(checkout: Path):
    from prenorm_lib.lab.figures import registry

    for png in (checkout / "figures").glob("*.png"):
        png.unlink()
    result = make(checkout, "figures")
    assert result.returncode == 0, said(result)
    written = {png.stem for png in (checkout / "figures").glob("*.png")}
    assert set(registry()) <= written, f"missing: {sorted(set(registry()) - written)}\n{said(result)}"


@pytest.mark.slow
def test_make_experiment_writes_a_current_record(checkout: Path):
    """The quickest record (by its own wall time), remade as the README says; it must then be current."""
    results = checkout / "prenorm_lib" / "lab" / "experiments" / "results"  # experiments.RESULTS_DIR in the copy
    timed = sorted((json.loads(path.read_text()).get("wall_seconds", float("inf")), path.stem)
                   for path in results.glob("*.json"))
    assert timed, f"no experiment records in {results.relative_to(checkout)}"
    name = min(timed)[1]
    record = results / f"{name}.json"
    before = record.stat().st_mtime
    result = make(checkout, "experiment", f"NAME={name}", timeout_s=900)
    assert result.returncode == 0 and "left as it is" in result.stdout, said(result)
    assert record.stat().st_mtime == before, f"make experiment NAME={name} rewrote a current {record.name}"
    result = make(checkout, "experiment", f"NAME={name}", "FORCE=1", timeout_s=900)
    assert result.returncode == 0, said(result)
    assert record.stat().st_mtime > before, f"make experiment NAME={name} FORCE=1 did not rewrite {record.name}"
    state = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c",
                            f"from prenorm_lib.lab.experiments import staleness; print(staleness({name!r}))"],
                           cwd=checkout, capture_output=True, text=True, check=True)
    assert state.stdout.strip() == "None", state.stdout + state.stderr


def test_make_experiment_with_the_readme_placeholder_names_the_records(checkout: Path):
    result = make(checkout, "experiment", "NAME=…")
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr, said(result)
    assert "NAME must be one of the records" in result.stderr and "ffn_ablation" in result.stderr, said(result)


@pytest.mark.slow
def test_make_figures_leaves_an_unchanged_tree_alone(checkout: Path):
    make(checkout, "figures")
    before = {png.name: png.stat().st_mtime_ns for png in (checkout / "figures").glob("*.png")}
    result = make(checkout, "figures")
    assert result.returncode == 0, said(result)
    assert {png.name: png.stat().st_mtime_ns for png in (checkout / "figures").glob("*.png")} == before


@pytest.mark.slow
def test_make_exercises_rebuilds_the_stored_exercise_notebooks(checkout: Path):
    stored = {path.name: path.read_bytes() for path in (checkout / "notebooks" / "exercises").glob("*.ipynb")}
    result = make(checkout, "exercises")
    assert result.returncode == 0, said(result)
    rebuilt = {path.name: path.read_bytes() for path in (checkout / "notebooks" / "exercises").glob("*.ipynb")}
    assert rebuilt == stored, "make exercises changed the stored exercise notebooks: they were stale"


def test_make_wheel_builds_an_installable_wheel(checkout: Path):
    """`make wheel` leaves one wheel in dist/ that carries the library, its records and corpora, not the tools."""
    result = make(checkout, "wheel", timeout_s=600)
    assert result.returncode == 0, said(result)
    wheels = sorted((checkout / "dist").glob("prenorm_lib-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
    assert "prenorm_lib/lab/experiments/results/ffn_ablation.json" in names
    assert any(name.startswith("prenorm_lib/lab/corpora/") for name in names)
    assert not any(name.startswith("prenorm_course/") for name in names)


# ---------------------------------------------------------------- a learner's page

README_MAX_LINES = 150
FIRST_EXERCISE_WITHIN = 60


def learner_page_problems(text: str) -> list[str]:
    """What keeps the README from being a learner's five-minute page."""
    lines = text.splitlines()
    problems = [f"{len(lines)} lines, more than {README_MAX_LINES}"] if len(lines) > README_MAX_LINES else []
    first = next((number for number, line in enumerate(lines, 1) if "make check NB=" in line), None)
    if first is None or first > FIRST_EXERCISE_WITHIN:
        problems.append(f"the first exercise command (make check NB=…) is on line {first}, "
                        f"not within the first {FIRST_EXERCISE_WITHIN}")
    return problems


def test_the_readme_is_a_learners_page():
    assert learner_page_problems(README.read_text()) == []


def test_a_long_readme_or_a_late_first_exercise_is_found():
    late = "\n".join(["prose"] * 70 + ["make check NB=01"] + ["more"] * 100)
    assert learner_page_problems(late) == ["171 lines, more than 150",
                                           "the first exercise command (make check NB=…) is on line 71, "
                                           "not within the first 60"]


# ---------------------------------------------------------------- one fact in one place, linked

LINK = re.compile(r"\]\((?!https?://|mailto:)([^)#\s]*)(?:#([^)\s]+))?\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text."""
    headings = HEADING.findall(FENCE.sub("", text))
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def broken_links(path: Path) -> list[str]:
    """Relative links of ``path`` whose file or heading does not exist."""
    broken = []
    for target, anchor in LINK.findall(FENCE.sub("", path.read_text())):
        linked = (path.parent / target).resolve() if target else path
        if not linked.exists():
            broken.append(f"{path.name}: {target} does not exist")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
            broken.append(f"{path.name}: {target}#{anchor} names no heading there")
    return broken


def test_every_link_between_the_docs_resolves():
    assert [problem for path in doc_files() for problem in broken_links(path)] == []


def test_a_link_to_a_missing_heading_is_found(tmp_path: Path):
    (tmp_path / "a.md").write_text("# A\n\n## Notebook times\n")
    (tmp_path / "b.md").write_text("[ok](a.md#notebook-times), [no](a.md#bench), [gone](c.md), [self](#b)\n\n# B\n")
    assert broken_links(tmp_path / "b.md") == ["b.md: a.md#bench names no heading there", "b.md: c.md does not exist"]


# ---------------------------------------------------------------- every other command, as typed

FENCE_WITH_LANGUAGE = re.compile(r"```([a-z]*)[ \t]*\n(.*?)```", re.DOTALL)  # fences in order, each with its language
SHELL = ("bash", "sh", "shell")
ANY_FENCE = re.compile(r"```.*?```", re.DOTALL)
PROGRAM = re.compile(r"^(?:make|\.venv/bin/\S+|python3?(?:\.\d+)?|pip|%pip|git|apt-get|passwd|jupyter-repo2docker)"
                     r"\s+\S")  # a program with its arguments: `python3.11` alone names the interpreter
# Generated (each stamp names the command that wrote it) or not instructions: no commands read there.
NOT_INSTRUCTIONS = ("measurements.md",)
# Every command the docs give that is not `make …`, exactly as typed, and what runs it so: a test in this
# module, or another file (its docstring says which command it runs). CI's `.ci/run` runs `make test`, whose
# recipes are these commands (checked against the Makefile below).
COMMANDS = {
    "python3.11 -m venv .venv": "test_install_by_hand_then_make_setup",
    ".venv/bin/pip install -r requirements.txt": "test_install_by_hand_then_make_setup",
    ".venv/bin/jupyter lab notebooks/exercises/": "test_install_by_hand_then_make_setup",  # + --allow-root as root
    "pip install .": "test_install_by_hand_then_make_setup",
    "%pip install prenorm_lib-0.1.0-py3-none-any.whl": "test_install_by_hand_then_make_setup",
    'git add notebooks/exercises && git commit -m "my answers"': "test_git_pull_keeps_your_answers",
    "git pull --no-rebase -X ours": "test_git_pull_keeps_your_answers",
    "apt-get install bubblewrap": ".ci/run",  # with -y -qq, where bubblewrap is missing
    ".venv/bin/python -m prenorm_course.exercises grade submissions --trusted": "test_trusted_grading_says_so",
    # Unix accounts and the hub's folder, as root: the hub test makes learners pnhub-* through these commands'
    # functions, logs them in through the login form, collects and grades.
    ".venv/bin/python -m prenorm_course.hub learners add alice bob": "tests/course/test_hub.py",
    "passwd alice": "tests/course/test_hub.py",  # the hub test sets passwords with chpasswd, passwd's batch form
    "passwd carol": "tests/course/test_hub.py",  # a teacher's, the same way (hub teachers add)
    ".venv/bin/python -m prenorm_course.hub link --notebook 01_rmsnorm.ipynb": "tests/course/test_hub.py",
    ".venv/bin/python -m prenorm_course.hub collect submissions --notebooks 01_rmsnorm.ipynb --due 2026-05-04T17:00":
        "tests/course/test_hub.py",  # with a deadline an hour ahead, into the test's submissions folder
    ".venv/bin/python -m prenorm_course.hub feedback submissions": "tests/course/test_hub.py",
    # setup.sh's apt route on Gradescope's 3.10 image, run for real by the Gradescope test (against apt's copies)
    "apt-get update": "tests/course/test_gradescope.py",
    "apt-get install python3.11 python3.11-venv": "tests/course/test_gradescope.py",
    ".venv/bin/python -m prenorm_course.exercises.limits": "test_the_limits_table_as_typed",
    ".venv/bin/python -m prenorm_course.hub prepare": "tests/course/test_hub.py",
    ".venv/bin/jupyter nbconvert --to notebook --execute --inplace notebooks/01_rmsnorm_solutions.ipynb":
        "test_reexecuting_a_notebook_as_typed",
    ".venv/bin/python -m prenorm_lib.lab.experiments list": "test_experiments_list_as_typed",
    ".venv/bin/ruff check .": ".ci/run",
    ".venv/bin/pytest -q -n 2 tests --ignore=tests/course/browser -p no:cacheprovider": ".ci/run",
    ".venv/bin/pytest -q --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg "
    "-p no:cacheprovider -n 2 --dist loadfile notebooks/[0-9][0-9]_*_solutions.ipynb "
    "notebooks/exercises/[0-9][0-9]_*.ipynb":
        ".ci/run",
    ".venv/bin/python -m prenorm_course.exercises verify": ".ci/run",
    ".venv/bin/pytest -q tests/course/browser -p no:cacheprovider": ".ci/run",
    # Not run: no container engine on the course's machines can pull a base image. tests/course/test_binder.py
    # runs `jupyter-repo2docker --no-build` on binder/ instead, and the doc says this was not done.
    "jupyter-repo2docker --no-run --image-name REGISTRY/prenorm:TAG .": "not run here: needs a container engine",
}


def doc_commands(text: str) -> list[str]:
    """Every command a doc gives (other than `make …`): the lines of bash fences (and of plain fences that
    start with a program), and inline code that starts with one; comments dropped, continuations joined."""
    found = []
    for language, block in FENCE_WITH_LANGUAGE.findall(text):
        if language and language not in SHELL:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            command = " ".join(re.split(r"\s#\s", line.strip(), maxsplit=1)[0].split())
            if command and (language or PROGRAM.match(command)):
                found.append(command)
    found += [" ".join(code.split()) for code in INLINE_CODE.findall(ANY_FENCE.sub("", text)) if PROGRAM.match(code)]
    return [command for command in found if not command.startswith("make ") and command != "make"]


def all_doc_commands() -> dict[str, list[str]]:
    """Command -> the doc files that give it."""
    found: dict[str, list[str]] = {}
    for path in doc_files():
        if path.name not in NOT_INSTRUCTIONS:
            for command in doc_commands(path.read_text()):
                found.setdefault(command, []).append(path.name)
    return found


def makefile_recipes() -> str:
    """The Makefile's recipes with its variables written out as the shell sees them."""
    text = (REPO_ROOT / "Makefile").read_text()
    nbval = re.search(r"^NBVAL\s*:=\s*(.+)$", text, re.MULTILINE).group(1).strip()
    for variable, value in (("NBVAL", nbval), ("SOLUTION_NOTEBOOKS", f"notebooks/{SOLUTION_GLOB}"),
                            ("EXERCISE_NOTEBOOKS", "notebooks/exercises/[0-9][0-9]_*.ipynb"),
                            ("PY", ".venv/bin/python"), ("BIN", ".venv/bin")):
        text = text.replace(f"$({variable})", value)
    return text


def test_every_doc_command_is_run_as_typed():
    commands = all_doc_commands()
    assert "git pull --no-rebase -X ours" in commands and "pip install ." in commands, sorted(commands)
    missing = {command: where for command, where in commands.items() if command not in COMMANDS}
    assert not missing, (f"the docs give commands no test runs as typed: {missing}; run each in a test of "
                         f"{Path(__file__).name} and name it in COMMANDS")
    module, recipes = globals(), makefile_recipes()
    for command, where in COMMANDS.items():
        if where.startswith("test_"):
            assert callable(module.get(where)), f"COMMANDS[{command!r}] names {where!r}, which does not exist"
        elif where == ".ci/run" and command.startswith(".venv/bin/"):
            assert command in recipes, f"{command!r} is not what `make test` runs (its Makefile recipe differs)"
        elif not where.startswith("not run here:"):
            assert (REPO_ROOT / where).exists(), f"COMMANDS[{command!r}] names {where!r}, which does not exist"
    stale = sorted(set(COMMANDS) - set(commands))
    assert not stale, f"COMMANDS lists commands no doc gives any more: {stale}"


def test_a_command_without_a_test_is_found():
    text = ("Run `git stash` first.\n\n```bash\n.venv/bin/python -m prenorm_course.exercises grade x \\\n"
            "  --trusted   # for notebooks you trust\nmake lab\n```\n\n```yaml\ncommand: [gitpuller]\n```\n"
            "Not a command: `prenorm_lib.lab.stats`.\n")
    assert doc_commands(text) == [".venv/bin/python -m prenorm_course.exercises grade x --trusted", "git stash"]
    assert ".venv/bin/pytest -q tests/course/browser -p no:cacheprovider" in makefile_recipes()
    assert ".venv/bin/pytest -q tests/course/browser" + " -x" not in makefile_recipes()


def test_the_limits_table_as_typed(checkout: Path):
    """grader.md's table of limits is what the command it names prints."""
    result = subprocess.run(".venv/bin/python -m prenorm_course.exercises.limits", shell=True, cwd=checkout,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip(), said(result)
    assert result.stdout.strip() in (checkout / "docs" / "grader.md").read_text(encoding="utf-8"), said(result)


def test_experiments_list_as_typed(checkout: Path):
    result = subprocess.run(".venv/bin/python -m prenorm_lib.lab.experiments list", shell=True, cwd=checkout,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "ffn_ablation" in result.stdout, said(result)


@pytest.mark.slow
def test_trusted_grading_says_so(checkout: Path):
    """`grade … --trusted` runs without bubblewrap and the grade book's first line says how the code ran."""
    (checkout / "submissions" / "ada").mkdir(parents=True)
    shutil.copy2(checkout / "notebooks" / "exercises" / "01_rmsnorm.ipynb", checkout / "submissions" / "ada")
    result = subprocess.run(".venv/bin/python -m prenorm_course.exercises grade submissions --trusted", shell=True,
                            cwd=checkout, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, said(result)
    first = (checkout / "submissions" / "grades.md").read_text().splitlines()[0]
    assert "trusted" in first.lower() or "without" in first.lower(), first
    shutil.rmtree(checkout / "submissions")


@pytest.mark.slow
def test_reexecuting_a_notebook_as_typed(checkout: Path, tmp_path: Path):
    notebook = checkout / "notebooks" / "01_rmsnorm_solutions.ipynb"
    before = notebook.stat().st_mtime
    result = subprocess.run(".venv/bin/jupyter nbconvert --to notebook --execute --inplace "
                            "notebooks/01_rmsnorm_solutions.ipynb",
                            shell=True, cwd=checkout, capture_output=True, text=True, timeout=900,
                            env=jupyter_home(tmp_path))
    assert result.returncode == 0, said(result)
    assert notebook.stat().st_mtime > before and "Writing" in result.stderr, said(result)
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    assert all(cell.execution_count for cell in cells if cell.cell_type == "code" and cell.source.strip())
    shutil.copy2(REPO_ROOT / "notebooks" / notebook.name, notebook)  # the copy as it was, for later tests


GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org",
                "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org"}


def _git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=folder, capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_IDENTITY}).stdout


def test_git_pull_keeps_your_answers(tmp_path: Path):
    """The README's two commands: a learner's answer and the course's later change to the same notebook both
    survive, and where both changed the same cell the learner's side wins; the notebook stays a notebook."""
    import nbformat

    upstream = tmp_path / "course"
    (upstream / "notebooks" / "exercises").mkdir(parents=True)
    name = "notebooks/exercises/01_rmsnorm.ipynb"
    shutil.copy2(REPO_ROOT / name, upstream / name)
    _git(upstream, "init", "-q", "-b", "main")
    _git(upstream, "add", ".")
    _git(upstream, "commit", "-q", "-m", "the course")
    learner = tmp_path / "learner"
    _git(tmp_path, "clone", "-q", str(upstream), str(learner))

    def edit(folder: Path, change) -> None:
        notebook = nbformat.read(folder / name, as_version=4)
        change(notebook.cells)
        nbformat.write(notebook, folder / name)

    exercise = next(i for i, cell in enumerate(nbformat.read(upstream / name, as_version=4).cells)
                    if cell.source.startswith("# Exercise 1.1"))
    answer = "# Exercise 1.1: my answer\ndef my_rms_norm(x, weight, eps=1e-5):\n    return x  # mine\n"
    edit(learner, lambda cells: setattr(cells[exercise], "source", answer))
    edit(upstream, lambda cells: setattr(cells[0], "source", cells[0].source + "\n\nA note from the teacher."))
    edit(upstream, lambda cells: setattr(cells[exercise], "source", cells[exercise].source + "\n# a teacher's hint"))
    _git(upstream, "commit", "-q", "-am", "a fix")
    env = {**os.environ, **GIT_IDENTITY}
    for command in ('git add notebooks/exercises && git commit -m "my answers"', "git pull --no-rebase -X ours"):
        result = subprocess.run(command, shell=True, cwd=learner, capture_output=True, text=True, env=env, timeout=60)
        assert result.returncode == 0, said(result)
    cells = nbformat.read(learner / name, as_version=4).cells
    assert cells[exercise].source == answer, "the learner's answer was lost"
    assert cells[0].source.endswith("A note from the teacher."), "the course's change did not arrive"


def test_setup_chooses_torchs_cpu_build_without_an_nvidia_gpu(checkout: Path, tmp_path: Path):
    """What `make setup` would run (make -n): PyTorch's CPU index on Linux without nvidia-smi, pip's default
    with one (a stand-in nvidia-smi on PATH) or with TORCH_INDEX= given empty."""
    def planned(*arguments: str, path: str = os.environ["PATH"]) -> str:
        result = subprocess.run(["make", "-n", "-W", "requirements.txt", "setup", *arguments], cwd=checkout,
                                capture_output=True, text=True, env={**os.environ, "PATH": path}, timeout=60)
        assert result.returncode == 0, said(result)
        return result.stdout

    cpu_index = 'index="https://download.pytorch.org/whl/cpu"'
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    (gpu / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (gpu / "nvidia-smi").chmod(0o755)
    if shutil.which("nvidia-smi") is None and os.uname().sysname == "Linux":
        assert cpu_index in planned()
    assert cpu_index not in planned(path=f"{gpu}:{os.environ['PATH']}") and 'index=""' in planned(
        path=f"{gpu}:{os.environ['PATH']}")
    assert 'index=""' in planned("TORCH_INDEX=")


@pytest.fixture(scope="module")
def bare_checkout(tmp_path_factory) -> Path:
    """A copy of the course as a fresh clone has it, with no .venv."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO_ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    root = tmp_path_factory.mktemp("bare")
    for relative in filter(None, listed):
        if (REPO_ROOT / relative).is_file():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / relative, root / relative)
    return root


@pytest.mark.slow
def test_install_by_hand_then_make_setup(bare_checkout: Path, tmp_path: Path):
    """The README's set-up without make, as typed, in a fresh clone: a venv, the pins, JupyterLab at the
    exercises; then `make setup` says what it does about torch's CPU build; `pip install .` and Colab's
    `%pip install` of the wheel install the library itself."""
    root, env = bare_checkout, jupyter_home(tmp_path)
    run = lambda command, **kw: subprocess.run(command, shell=True, cwd=kw.pop("cwd", root), capture_output=True,
                                               text=True, env=env, timeout=kw.pop("timeout", 1800))
    for command in ("python3.11 -m venv .venv", ".venv/bin/pip install -r requirements.txt"):
        result = run(command)
        assert result.returncode == 0, f"{command}\n{said(result)}"
    lab = "(.venv/bin/jupyter lab notebooks/exercises/" + (" --allow-root" if os.geteuid() == 0 else "") + ")"
    server = subprocess.Popen(lab, shell=True, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        found = None
        deadline = time.monotonic() + 180
        while found is None and time.monotonic() < deadline and server.poll() is None:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]+)", server.stdout.readline())
        assert found, "jupyter lab printed no address"
        listing = answers(f"http://127.0.0.1:{found.group(1)}/api/contents?token={found.group(2)}")
        assert "01_rmsnorm.ipynb" in {item["name"] for item in listing["content"]}, listing
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    torch_build = ".venv/bin/python -c 'import torch; print(torch.__version__)'"
    result = make(root, "setup", env=env, timeout_s=1800)
    assert result.returncode == 0, said(result)
    reachable = subprocess.run([str(root / ".venv" / "bin" / "python"), "-c", "import urllib.request; "
                                "urllib.request.urlopen('https://download.pytorch.org/whl/cpu/torch/', timeout=10)"],
                               capture_output=True).returncode == 0
    said_unreachable = re.compile(r"^setup: PyTorch's CPU index \S+ cannot be reached", re.MULTILINE)
    unreachable_said = bool(said_unreachable.search(result.stdout))
    assert unreachable_said != reachable, said(result)
    if shutil.which("nvidia-smi") is None:
        assert run(torch_build).stdout.strip().endswith("+cpu"), "no NVIDIA GPU here, yet torch is not the CPU build"
    (root / ".venv" / ".installed").unlink()
    result = make(root, "setup", "TORCH_INDEX=", env=env, timeout_s=1800)
    assert result.returncode == 0 and not said_unreachable.search(result.stdout), said(result)
    assert "--extra-index-url" not in result.stdout.replace('${index:+--extra-index-url "$index"}', ""), said(result)

    env["PATH"] = f"{root / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"  # an activated venv: `pip` is its pip
    result = run("pip install .")
    assert result.returncode == 0, said(result)
    where = run(f"{root / '.venv' / 'bin' / 'python'} -c 'import prenorm_lib; print(prenorm_lib.__file__)'",
                cwd=tmp_path)
    assert "site-packages" in where.stdout, where.stdout + where.stderr
    assert make(root, "wheel", env=env, timeout_s=600).returncode == 0
    assert run("pip uninstall -y prenorm-lib").returncode == 0  # Colab has no prenorm_lib before the cell
    result = run(f"{root / '.venv' / 'bin' / 'python'} -m IPython -c '%pip install prenorm_lib-0.1.0-py3-none-any.whl'",
                 cwd=root / "dist")
    assert result.returncode == 0 and "Successfully installed prenorm-lib" in result.stdout, said(result)


@pytest.mark.slow
def test_make_bench_browser_runs_one_notebook(checkout: Path, tmp_path: Path):
    """`make bench-browser NB=01` runs notebook 01's browser tests as the benchmark. On a busy machine its
    limits may fail it: then every failure must be one of them (said so), never anything else; and a
    run of one notebook leaves docs/measurements.md alone."""
    if shutil.which("chromium") is None and not os.environ.get("PRENORM_CHROMIUM"):
        pytest.skip("no Chromium (apt-get install chromium)")
    before = (checkout / "docs" / "measurements.md").read_text()
    result = make(checkout, "bench-browser", "NB=01", env={**jupyter_home(tmp_path), "BROWSER": "true"},
                  timeout_s=1800)
    # make prints "make[1]: Leaving directory …" after it when run under another make (CI's): pytest's line is last
    summary = [line for line in result.stdout.strip().splitlines() if not line.startswith("make[")][-1]
    assert "passed" in summary and "error" not in summary, said(result)
    if result.returncode != 0:
        failures = re.findall(r"^FAILED (\S+) - (.*)$", result.stdout, re.MULTILINE)
        assert failures and all("benchmark limit" in reason for _, reason in failures), said(result)
    assert (checkout / "test-artifacts" / "browser" / "report.md").exists(), said(result)
    assert "Benchmark: the classroom's limits decided" in (checkout / "test-artifacts" / "browser" / "report.md"
                                                            ).read_text()
    assert (checkout / "docs" / "measurements.md").read_text() == before


def test_make_agents_leaves_a_current_file_alone(checkout: Path):
    """`make agents` writes AGENTS.md; run on the committed (current) one, it writes the same bytes."""
    before = (checkout / "AGENTS.md").read_bytes()
    (checkout / "AGENTS.md").unlink()
    result = make(checkout, "agents")
    assert result.returncode == 0 and "wrote " in result.stdout, said(result)
    assert (checkout / "AGENTS.md").read_bytes() == before


# ---------------------------------------------------------------- the README's times follow the measurements

README_RUN_ALL = re.compile(r"^\| \[\d\d · [^\]]+\]\(notebooks/exercises/(\d\d_\w+\.ipynb)\) \|.*\| ≈ (\d+) s \|$",
                            re.MULTILINE)
MEASURED_RUN_ALL = re.compile(r"^\| (\d\d_\w+\.ipynb) \| (\d+(?:\.\d+)?) s \|", re.MULTILINE)
RUN_ALL_TOLERANCE = 1.5  # each notebook's measured / stated time within ×1.5 of the others' common factor


def run_all_mismatches(readme: str, measured_section: str) -> list[str]:
    """Notebooks whose README time is off from docs/measurements.md by more than the machine explains.

    A measurement on a busier or slower machine scales every notebook alike, so the README's rounded times
    are compared up to one common factor (the median ratio), never as absolute seconds."""
    stated = {name: float(seconds) for name, seconds in README_RUN_ALL.findall(readme)}
    measured = {exercise_name(name): float(seconds)  # timed: the solution notebook; the README links the exercise
                for name, seconds in MEASURED_RUN_ALL.findall(measured_section)}
    if set(stated) != set(measured) or not stated:
        return [f"the README times {sorted(stated)}, docs/measurements.md {sorted(measured)}"]
    ratios = {name: measured[name] / stated[name] for name in stated}
    common = sorted(ratios.values())[len(ratios) // 2]
    return [f"{name}: README ≈ {stated[name]:.0f} s, measured {measured[name]} s (the others ×{common:.2f})"
            for name, ratio in ratios.items() if not 1 / RUN_ALL_TOLERANCE <= ratio / common <= RUN_ALL_TOLERANCE]


def test_the_readme_times_follow_the_measurements():
    from prenorm_course import measurements

    section = measurements.read_sections((REPO_ROOT / measurements.DOCUMENT).read_text())["notebook-times"]
    assert run_all_mismatches(README.read_text(), section) == []


def test_a_stale_readme_time_is_found():
    readme = "\n".join(f"| [0{i} · X](notebooks/exercises/0{i}_x.ipynb) | a | b | 3 | ≈ {s} s |"
                       for i, s in ((1, 7), (2, 8), (3, 16)))
    loaded = "| 01_x.ipynb | 21.0 s |\n| 02_x.ipynb | 24.0 s |\n| 03_x.ipynb | 47.0 s |"  # all ×3: a busy machine
    assert run_all_mismatches(readme, loaded) == []
    slower = "| 01_x.ipynb | 7.0 s |\n| 02_x.ipynb | 8.0 s |\n| 03_x.ipynb | 40.0 s |"  # 03 grew
    assert run_all_mismatches(readme, slower) == ["03_x.ipynb: README ≈ 16 s, measured 40.0 s (the others ×1.00)"]
    assert run_all_mismatches(readme, slower.rsplit("\n", 1)[0])[0].startswith("the README times")
