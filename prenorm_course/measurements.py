"""``docs/measurements.md``: every number the course measures, written by the command that measured it.

A number copied into prose goes stale the day the code or the machine changes. So each tool that
measures (``make bench``, ``make notebook-times``, the browser tests' benchmark, the class
benchmark) hands its table to :func:`write`, which replaces that tool's one section of the file
and stamps it with what a reader needs to weigh it: the date, the command, the machine (CPU
model, cores, memory) and the load average while it ran. Prose links to a section
(``docs/measurements.md#bench``) instead of repeating its numbers.

    from prenorm_course import measurements

    with measurements.LoadWatch() as load:          # samples the load while the run lasts
        table = run_the_benchmark()
    measurements.write("bench", table, command="make bench", load=load)

A section lies between two comment lines, ``<!-- measurements:begin NAME -->`` and
``<!-- measurements:end NAME -->``; everything outside the sections (the header) is rewritten
from :data:`HEADER`. Sections keep the order of :data:`ORDER`; a name not listed there goes last.
Two writers at once (two test processes) take turns through a lock file beside the document.

``python -m prenorm_course.measurements setup`` measures the one thing no other tool does: the
size of the course's ``.venv`` and which torch build it holds.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fcntl
import hashlib
import os
import platform
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from prenorm_course.exercises.paths import repo_root

DOCUMENT = Path("docs") / "measurements.md"
SECTION_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")
BEGIN, END = "<!-- measurements:begin {} -->", "<!-- measurements:end {} -->"
SECTION = re.compile(r"<!-- measurements:begin ([a-z][a-z0-9-]*) -->\n(.*?)<!-- measurements:end \1 -->\n",
                     re.DOTALL)
# Section name -> its heading. The heading's GitHub anchor is the name (docs link to #name).
ORDER = {
    "setup": "Setup",
    "notebook-times": "Notebook times",
    "bench": "Bench",
    "run-all": "Run all",
    "sliders": "Sliders",
    "classroom": "Classroom",
    "site": "Site",
    "class": "Class",
    "gradescope": "Gradescope",
    "false-hints": "False hints",
    "hostile-class": "Hostile class",
}
HEADER = """\
# Measurements

Generated: each section below is written by the command named in its stamp, through
`prenorm_course.measurements.write`; do not edit it by hand — run the command again. A stamp says
when, on which machine and under which load the section was measured: compare numbers only within
one section, and prefer the ratios measured in the same run. Prose elsewhere links here instead of
copying a number.
"""


@dataclass(frozen=True)
class Machine:
    """What a reader needs to know about the computer a number came from."""

    cpu: str
    cores: int  # logical CPUs the operating system offers
    memory_gib: float

    def describe(self) -> str:
        return f"{self.cpu}, {self.cores} cores, {self.memory_gib:.0f} GiB"


def machine() -> Machine:
    """This computer: CPU model (as the kernel names it), logical cores and memory (psutil)."""
    return Machine(_cpu_model(), psutil.cpu_count(logical=True) or 0, psutil.virtual_memory().total / 2**30)


def _cpu_model() -> str:
    """The CPU's marketing name; psutil has none, so Linux's /proc/cpuinfo, else platform's guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return " ".join(line.partition(":")[2].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


class LoadWatch:
    """The 1-minute load average while a block runs: sampled every ``every_s`` seconds in a thread.

    Used as a context manager; afterwards :meth:`describe` gives its range ("1.2–3.4"). A run
    shorter than one sample still has two samples, its start and its end.
    """

    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadWatch:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="load-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def __exit__(self, *_) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def describe(self) -> str:
        if not self.samples:
            raise ValueError("LoadWatch.describe: no load sampled yet; use it as `with LoadWatch() as load:`")
        low, high = min(self.samples), max(self.samples)
        return f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f}"


def stamp(command: str, load: LoadWatch | str | None = None, when: _dt.datetime | None = None,
          on: Machine | None = None) -> str:
    """The line under a section's heading: date, command, machine, load, and the niceness if not 0."""
    when = when or _dt.datetime.now().astimezone()
    if isinstance(load, LoadWatch):
        during = f"load average {load.describe()} during the run"
    elif isinstance(load, str):
        during = f"load average {load}"
    else:
        one, five, fifteen = os.getloadavg()
        during = f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min) at the end"
    niceness = os.nice(0)  # a run at lower priority (nice -n 10) yields the cores to other work: say so
    priority = f" · at niceness {niceness}" if niceness else ""
    return (f"*Written by `{command}` on {when:%Y-%m-%d %H:%M %Z} · {(on or machine()).describe()} · "
            f"{during}{priority}.*")


def write(section: str, markdown_body: str, *, command: str, load: LoadWatch | str | None = None,
          path: Path | None = None, when: _dt.datetime | None = None) -> Path:
    """Replace ``section`` of docs/measurements.md by ``markdown_body`` under a fresh stamp.

    ``command`` is what a reader runs to measure it again, as typed (``make bench``). ``load`` is a
    :class:`LoadWatch` that ran beside the measurement, or a range already measured ("1.2–3.4");
    without it the stamp gives the load averages at the time of writing. Returns the file written.
    """
    if not isinstance(section, str) or not SECTION_NAME.match(section):
        raise ValueError(f"section must be a lowercase name like 'bench' or 'notebook-times', got {section!r}")
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"command must be the command that measured the section, as typed, got {command!r}")
    if not isinstance(markdown_body, str) or not markdown_body.strip():
        raise ValueError(f"markdown_body must be the section's Markdown, got {markdown_body!r}")
    if "<!-- measurements:" in markdown_body:
        raise ValueError("markdown_body must not hold the section markers (<!-- measurements: … -->)")
    target = Path(path) if path is not None else repo_root() / DOCUMENT
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (f"## {ORDER.get(section, section.replace('-', ' ').capitalize())}\n\n"
            f"{stamp(command, load, when)}\n\n{markdown_body.strip()}\n\n")
    with _locked(target):
        sections = read_sections(target.read_text(encoding="utf-8")) if target.exists() else {}
        sections[section] = text
        target.write_text(render(sections), encoding="utf-8")
    return target


def read_sections(document: str) -> dict[str, str]:
    """Section name -> its text (heading, stamp and body), as stored."""
    return {name: body for name, body in SECTION.findall(document)}


def render(sections: dict[str, str]) -> str:
    ordered = sorted(sections, key=lambda name: (list(ORDER).index(name) if name in ORDER else len(ORDER), name))
    parts = [HEADER]
    for name in ordered:
        parts.append(f"\n{BEGIN.format(name)}\n{sections[name].rstrip()}\n\n{END.format(name)}\n")
    return "".join(parts)


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    name = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"prenorm-measurements-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# ---------------------------------------------------------------- python -m prenorm_course.measurements setup

def folder_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` take on disk (each file once, links not followed), as ``du`` counts."""
    seen, total = set(), 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            info = os.lstat(os.path.join(root, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def torch_build(python: Path) -> str:
    """torch's version string in the venv of ``python`` ("2.13.0+cpu" for the CPU build)."""
    result = subprocess.run([str(python), "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
                            capture_output=True, text=True, check=True)
    version, cuda = result.stdout.split()
    return version if cuda == "None" else f"{version} (CUDA {cuda})"


def venv_row(venv: Path) -> str:
    """One table row: the venv's Python, its torch build and its size on disk."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise ValueError(f"--venv must be a virtual environment (with bin/python), got {venv}; run `make setup`")
    version = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return f"| {version} | {torch_build(python)} | {folder_bytes(venv) / 2**30:.1f} GiB |"


def setup_section(venvs: list[Path]) -> str:
    rows = [venv_row(venv) for venv in venvs]
    return "| Python | torch | the venv on disk |\n|---|---|---:|\n" + "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.measurements",
                                     description="Measure what no other tool measures, into docs/measurements.md.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    setup = commands.add_parser("setup", help="the size of the course's venv and which torch build it holds")
    setup.add_argument("--venv", type=Path, action="append",
                       help="a venv to measure (default .venv; give it again for more rows)")
    args = parser.parse_args(argv)
    venvs = args.venv or [Path(".venv")]
    try:
        body = setup_section(venvs)
    except ValueError as exc:
        parser.error(str(exc))
    command = ".venv/bin/python -m prenorm_course.measurements setup" + "".join(
        f" --venv {venv if not venv.is_absolute() else '…/' + venv.name}" for venv in args.venv or [])
    print(body)
    print(f"wrote {write('setup', body, command=command)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
