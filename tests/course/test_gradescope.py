"""The Gradescope autograder, in Gradescope's layout: its zip, its setup and four submissions.

The zip is unpacked into a folder that bubblewrap binds at ``/autograder`` (the rest of
the system read-only but apt's lists, cache and state, so ``setup.sh`` can run apt as on the
image), all of it in a cgroup of Gradescope's default size, 768 MB of memory and half a CPU
(the test shows both limits bite first). ``setup.sh`` runs twice: with ``python3`` being
pyenv's 3.10.13, as on Gradescope's newest base image (Ubuntu 22.04), where it brings
Python 3.11 with apt, and with the system's 3.11. It installs the pinned requirements into a
fresh venv there, and ``run_autograder`` grades four submissions of notebook 01 -- honest, wrong,
unfinished, and a cheat that reads the solution notebook from ``/autograder/source``
-- twice: where bubblewrap can start inside (the course's confinement), and where it
cannot (the outer sandbox drops CAP_SYS_ADMIN, as Docker's default does):
there the container is the confinement, the kernel runs as an unprivileged user who
cannot read ``/autograder/source``, and every ``results.json`` says so. The cheat
scores 0/3 in both.

Each ``results.json`` is checked against the fields of Gradescope's specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/, "Output format").
The zip is the one ``make gradescope NB=01`` writes, the README's command as typed.
The slow part needs root and bubblewrap; CI sets PRENORM_REQUIRE_GRADESCOPE=1 so that a
skip there is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from prenorm_course.exercises.build import read_notebook, write_notebook
from prenorm_course.exercises.packages import GRADER_PACKAGES
from prenorm_course.exercises.paths import repo_root, solution_name, solution_path
from prenorm_course.exercises.verify import filled_in
from prenorm_course.gradescope import __main__ as cli
from prenorm_course.gradescope.autograder_zip import build_zip, grading_requirements
from prenorm_course.hub.class_bench import load_watch, publish
from prenorm_course.hub.spawner import LearnerCgroup

REQUIRED = os.environ.get("PRENORM_REQUIRE_GRADESCOPE") == "1"
# Gradescope's "Output format": the fields of results.json and of each test, and the visibilities.
TOP_FIELDS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
              "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
               "tags", "visibility", "extra_data"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
NOTEBOOK = "01_rmsnorm.ipynb"
CHEAT = '''# Exercise {id}: {title}
import glob, json
for _path in sorted(glob.glob("/autograder/source/**/*.ipynb", recursive=True)):
    try:
        _cells = ["".join(c["source"]) for c in json.load(open(_path))["cells"]]
    except (OSError, ValueError, KeyError):
        continue
    for _source in _cells:
        if _source.startswith("# Exercise {id}") and "BEGIN SOLUTION" in _source:
            exec(_source)
'''


def test_the_zip_has_gradescopes_layout_and_the_pinned_requirements(tmp_path: Path):
    root = repo_root()
    out = tmp_path / "autograder.zip"
    assert build_zip(root, out, ["01"]) == [NOTEBOOK]
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        config = json.loads(archive.read("gradescope.json"))
        requirements = archive.read("requirements.txt").decode()
    assert {"setup.sh", "run_autograder"} <= set(names)  # at the root of the archive, as Gradescope requires
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert config == {"notebooks": [NOTEBOOK]}
    assert f"notebooks/{solution_name(NOTEBOOK)}" in names and f"notebooks/exercises/{NOTEBOOK}" in names
    assert "prenorm_course/exercises/check.py" in names and "prenorm_lib/__init__.py" in names
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
    pins = {line.split("==")[0]: line for line in (root / "requirements.txt").read_text().splitlines() if "==" in line}
    assert requirements.splitlines() == grading_requirements(root).splitlines()
    assert sorted(requirements.splitlines()) == sorted(pins[name] for name in GRADER_PACKAGES)
    assert "transformers" not in requirements and "-e" not in requirements
    again = tmp_path / "again.zip"
    build_zip(root, again, ["01"])
    assert again.read_bytes() == out.read_bytes()  # the same course gives the same bytes


def test_an_unknown_notebook_number_is_named(tmp_path: Path, capsys):
    assert cli.main(["build", str(tmp_path / "a.zip"), "--notebooks", "09"]) == 2
    err = capsys.readouterr().err
    assert "'09'" in err and "expected the two-digit number of a course notebook" in err and "01" in err


def test_an_autograder_that_cannot_grade_still_writes_results_that_say_why(tmp_path: Path):
    results = tmp_path / "results" / "results.json"
    with pytest.raises(FileNotFoundError, match=r"gradescope\.json"):  # a checkout is not an unpacked zip
        cli.main(["run", "--root", str(repo_root()), "--submission", str(tmp_path), "--results", str(results)])
    written = json.loads(results.read_text())
    assert set(written) <= TOP_FIELDS and written["score"] == 0.0 and written["tests"] == []
    assert written["output"].startswith("The autograder could not grade this submission: FileNotFoundError")


def _skip(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (PRENORM_REQUIRE_GRADESCOPE=1: CI must run the autograder in its layout)")
    pytest.skip(reason)


PYTHON_310 = Path("/root/.pyenv/versions/3.10.13/bin/python3")  # Ubuntu 22.04's python3 is 3.10
IMAGES = {"python3.10": PYTHON_310, "python3.11": None}
MEMORY_BYTES, CPUS = 768 * 2**20, 0.5  # Gradescope's default container
TIMES: dict[str, dict[str, str]] = {}  # image -> what -> seconds, for docs/measurements.md#gradescope


@pytest.fixture(scope="module", autouse=True)
def _publish_times():
    """After the module: the times measured, as the measurements page's "gradescope" section."""
    with load_watch() as watch:
        yield
    if not TIMES:
        return
    rows = ["| image's python3 | setup.sh (s) | seconds per submission, bubblewrap | in the container mode |",
            "| --- | ---: | --- | --- |"]
    rows += [f"| {image} | {t.get('setup.sh', '–')} | {t.get('bubblewrap', '–')} | {t.get('container', '–')} |"
             for image, t in sorted(TIMES.items())]
    publish("gradescope", "Gradescope", "\n".join(rows) + "\n\nAll in one cgroup of 768 MB and half a CPU "
            "(Gradescope's default container); pip's cache warm; submissions: honest, wrong, unfinished, cheat.",
            ".venv/bin/pytest -s tests/course/test_gradescope.py (as root)", load=watch)


def _outer_sandbox(autograder: Path, confined: bool) -> list[str]:
    """bubblewrap: the system read-only, ``autograder`` at /autograder, pip's cache and apt's state writable."""
    args = ["bwrap", "--die-with-parent", "--unshare-pid"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in {"proc", "dev", "tmp", "autograder"}:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            args += ["--ro-bind", str(entry), str(entry)]
    cache = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True).stdout
    args += ["--proc", "/proc", "--dev", "/dev", "--bind", "/tmp", "/tmp", "--bind", str(autograder), "/autograder"]
    if cache.strip() and Path(cache.strip()).is_dir():
        args += ["--bind", cache.strip(), cache.strip()]
    apt = autograder.parent / "apt"  # copies of apt's state: setup.sh runs apt-get update and install
    if not apt.exists():
        for folder in ("cache/archives/partial", "log"):
            (apt / folder).mkdir(parents=True)
        shutil.copytree("/var/lib/apt", apt / "lib", symlinks=True)
        shutil.copytree("/var/lib/dpkg", apt / "dpkg", symlinks=True)
    args += ["--bind", str(apt / "lib"), "/var/lib/apt", "--bind", str(apt / "cache"), "/var/cache/apt",
             "--bind", str(apt / "dpkg"), "/var/lib/dpkg", "--bind", str(apt / "log"), "/var/log/apt"]
    if not confined:  # as in a container without CAP_SYS_ADMIN (Docker's default): bubblewrap cannot start
        args += ["--cap-drop", "CAP_SYS_ADMIN"]
    return [*args, "--chdir", "/autograder", "--"]


def _image_path(autograder: Path, python: Path | None) -> str:
    """PATH as on the image: where its python3 is 3.10, a folder whose python3 is pyenv's 3.10.13 comes first."""
    path = "/usr/local/bin:/usr/bin:/bin"
    if python is None:
        return path
    image_bin = autograder.parent / "image-bin"
    image_bin.mkdir(exist_ok=True)
    with contextlib.suppress(FileExistsError):
        (image_bin / "python3").symlink_to(python)
    return f"{image_bin}:{path}"


def _in_container(cgroup: LearnerCgroup):
    """preexec_fn: the child enters the container's cgroup (memory and CPU) before it runs anything."""
    procs = [str(p) for p in cgroup.procs_files()]

    def enter():
        for path in procs:
            with open(path, "w") as f:
                f.write(str(os.getpid()))

    return enter


def _limits_bite(cgroup: LearnerCgroup) -> None:
    """The container's limits are in force: 1 GiB cannot be held, 300 MB can; two busy loops get half a CPU."""
    hog = "bytearray({} * 2**20)"
    held = subprocess.run([sys.executable, "-c", hog.format(300)], preexec_fn=_in_container(cgroup))
    killed = subprocess.run([sys.executable, "-c", hog.format(1024)], preexec_fn=_in_container(cgroup))
    assert held.returncode == 0 and killed.returncode == -signal.SIGKILL, (held.returncode, killed.returncode)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(["sh", "-c", "timeout 3 sh -c 'while :; do :; done' & timeout 3 sh -c 'while :; do :; done'; wait"],
                   preexec_fn=_in_container(cgroup))
    wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < (CPUS + 0.15) * wall, f"two busy loops got {cpu:.1f} s of CPU in {wall:.1f} s: no CPU limit"


@pytest.fixture(scope="module", params=sorted(IMAGES))
def autograder(request, tmp_path_factory):
    """(the /autograder folder after setup.sh, the container's cgroup), for an image whose python3 is the param."""
    if sys.platform != "linux" or shutil.which("bwrap") is None:
        _skip("needs Linux and bubblewrap (apt-get install bubblewrap) to lay out /autograder")
    if os.geteuid() != 0:
        _skip("needs root: Gradescope runs setup.sh and run_autograder as root")
    python = IMAGES[request.param]
    if python is not None and not python.exists():
        _skip(f"needs pyenv's Python 3.10.13 ({python}) as the image's python3")
    cgroup = LearnerCgroup.make(f"gradescope-{os.getpid()}-{request.param}", MEMORY_BYTES, CPUS)
    if cgroup is None:
        _skip("needs a writable cgroup file system (as root) for the container's 768 MB and half a CPU")
    request.addfinalizer(cgroup.remove)
    _limits_bite(cgroup)
    folder = tmp_path_factory.mktemp("gradescope") / "autograder"
    make = subprocess.run(["make", "gradescope", "NB=01"], cwd=repo_root(), capture_output=True, text=True)
    assert make.returncode == 0 and "grades 01_rmsnorm.ipynb)" in make.stdout, make.stdout + make.stderr
    zip_path = repo_root() / "dist" / "gradescope-autograder.zip"  # as the README's `make gradescope NB=01` writes it
    (folder / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(folder / "source")
    for name in ("setup.sh", "run_autograder"):
        (folder / "source" / name).chmod(0o755)
    shutil.copy(folder / "source" / "run_autograder", folder / "run_autograder")  # as Gradescope's image build does
    start = time.monotonic()
    # the system's Python, as on Gradescope's image (one under root's home would be out of the kernel user's reach)
    setup = subprocess.run([*_outer_sandbox(folder, True), "env", f"PATH={_image_path(folder, python)}", "bash",
                            "/autograder/source/setup.sh"], capture_output=True, text=True, timeout=1800,
                           preexec_fn=_in_container(cgroup))
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    assert "grading runs on Python 3.11" in setup.stdout and "torch 2.13.0" in setup.stdout, setup.stdout
    assert ("installing python3.11 and python3.11-venv with apt" in setup.stdout) == (python is not None)
    assert "(CPU)" in setup.stdout, setup.stdout  # PyTorch's CPU wheel, not PyPI's CUDA build
    seconds = time.monotonic() - start
    TIMES.setdefault(request.param, {})["setup.sh"] = f"{seconds:.0f}"
    print(f"\nsetup.sh ({request.param} image, 768 MB, half a CPU): {seconds:.0f} s")
    return folder, cgroup, request.param


def _submissions(root: Path) -> dict[str, object]:
    scaffold = read_notebook(root / "notebooks" / "exercises" / NOTEBOOK)
    honest = filled_in(scaffold, read_notebook(solution_path(root, NOTEBOOK)))
    wrong = filled_in(scaffold, read_notebook(solution_path(root, NOTEBOOK)))
    cheat = read_notebook(root / "notebooks" / "exercises" / NOTEBOOK)
    for cell in wrong.cells:
        if cell.source.startswith("# Exercise 1.3"):
            cell.source = '# Exercise 1.3: predict fp16 overflow\nsquare_in_fp16 = "65504"\nnorm_without_upcast = "1"\n'
    for cell in cheat.cells:
        for exercise, title in (("1.1", "rms_norm kernel"), ("1.2", "RMSNorm module")):
            if cell.source.startswith(f"# Exercise {exercise}:"):
                cell.source = CHEAT.format(id=exercise, title=title)
    return {"honest": honest, "wrong": wrong, "unfinished": scaffold, "cheat": cheat}


def _grade(autograder, notebook, confined: bool) -> tuple[dict, float]:
    autograder, cgroup, _ = autograder
    for sub in ("submission", "results"):
        shutil.rmtree(autograder / sub, ignore_errors=True)
        (autograder / sub).mkdir()
    write_notebook(notebook, autograder / "submission" / NOTEBOOK)
    start = time.monotonic()
    run = subprocess.run([*_outer_sandbox(autograder, confined), "/autograder/run_autograder"],
                         capture_output=True, text=True, timeout=900, preexec_fn=_in_container(cgroup))
    seconds = time.monotonic() - start
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((autograder / "results" / "results.json").read_text()), seconds


def _valid(results: dict) -> None:
    """results.json as Gradescope's specification lays it out."""
    assert set(results) <= TOP_FIELDS, set(results) - TOP_FIELDS
    assert isinstance(results["score"], float) and isinstance(results["output"], str)
    assert results["stdout_visibility"] in VISIBILITIES
    for test in results["tests"]:
        assert set(test) <= TEST_FIELDS, set(test) - TEST_FIELDS
        assert {"name", "score", "max_score", "output", "visibility"} <= set(test)
        assert test["visibility"] in VISIBILITIES and test["status"] in {"passed", "failed"}
        assert 0 <= test["score"] <= test["max_score"] == 1.0
    assert results["score"] == sum(t["score"] for t in results["tests"])


EXPECTED = {  # (with bubblewrap, in the container only): the cheat finds no solution in either
    "honest": ([1, 1, 1], [1, 1, 1]),
    "wrong": ([1, 1, 0], [1, 1, 0]),
    "unfinished": ([0, 0, 0], [0, 0, 0]),
    "cheat": ([0, 0, 0], [0, 0, 0]),
}


@pytest.mark.slow
@pytest.mark.parametrize("confined", [True, False], ids=["bubblewrap", "container"])
def test_four_submissions_get_their_scores_and_a_valid_results_json(autograder, confined: bool):
    if not confined and autograder[2] == "python3.10":
        pytest.skip("the container mode is the same code on either image: run once, on python3.11's")
    timings = {}
    for who, notebook in _submissions(repo_root()).items():
        results, timings[who] = _grade(autograder, notebook, confined)
        _valid(results)
        scores = [t["score"] for t in results["tests"]]
        assert scores == EXPECTED[who][0 if confined else 1], (who, [t["output"] for t in results["tests"]])
        assert [t["name"].split(": ", 1)[1].split(" (")[0] for t in results["tests"]] == \
            ["Exercise 1.1", "Exercise 1.2", "Exercise 1.3"]
        mode = results["extra_data"]["confinement"]
        assert mode == ("bubblewrap" if confined else "container")
        first = results["output"].splitlines()[0]
        if confined:
            assert first.startswith("Learner code ran bubblewrap: no network")
        else:  # never silent: the overall output and every test say the container was the only confinement
            assert "NOT in bubblewrap" in first and "who cannot read the grader's files (/autograder/source)" in first
            assert all("NOT in bubblewrap" in t["output"] for t in results["tests"])
        if who == "wrong":
            assert results["tests"][2]["output"].startswith("Exercise 1.3 (predict fp16 overflow): hint")
        if who == "unfinished":
            assert all(t["output"].startswith(f"Exercise 1.{i + 1} ") and "not done yet" in t["output"]
                       for i, t in enumerate(results["tests"]))
    TIMES.setdefault(autograder[2], {})["bubblewrap" if confined else "container"] = \
        ", ".join(f"{who} {s:.1f}" for who, s in timings.items())
    print(f"\nseconds per submission ({autograder[2]} image, 768 MB, half a CPU, "
          + ("bubblewrap" if confined else "container") + "): "
          + ", ".join(f"{who} {s:.1f}" for who, s in timings.items()))


@pytest.mark.slow
def test_a_submission_without_a_notebook_scores_zero_and_says_why(autograder):
    if autograder[2] != "python3.11":
        pytest.skip("run once")
    autograder, cgroup, _ = autograder
    for sub in ("submission", "results"):
        shutil.rmtree(autograder / sub, ignore_errors=True)
        (autograder / sub).mkdir()
    (autograder / "submission" / "answers.txt").write_text("my_rms_norm = ...\n")
    run = subprocess.run([*_outer_sandbox(autograder, True), "/autograder/run_autograder"],
                         capture_output=True, text=True, timeout=300, preexec_fn=_in_container(cgroup))
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((autograder / "results" / "results.json").read_text())
    _valid(results)
    assert results["score"] == 0.0
    assert all("not submitted (no notebook of 01_rmsnorm.ipynb)" in t["output"] for t in results["tests"])
