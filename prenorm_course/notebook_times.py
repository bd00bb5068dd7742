"""``python -m prenorm_course.notebook_times``: how long each notebook takes, top to bottom.

What a learner waits for after "Restart Kernel and Run All Cells": the kernel's start, then
every cell in order. Each notebook runs in a fresh kernel through nbclient (the executor
nbval and ``make notebooks`` use), one after the other, so two never share the cores. The
budget (30 s by default) is for Run All with the kernel started, as JupyterLab has it ready
when a notebook opens; the kernel's start is reported beside it.

Absolute seconds depend on the machine and on what else it runs, so the load average at the
start of each notebook is printed too: a row measured on a busy machine says so. Timing every
course notebook (no notebook named) also writes the table to docs/measurements.md
(:mod:`prenorm_course.measurements`, section "notebook-times"), with the machine and the load
during the whole run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from prenorm_course import measurements
from prenorm_course.exercises.paths import SOLUTION_GLOB, solution_notebooks

BUDGET_SECONDS = 30.0
NOTEBOOK_PATTERN = SOLUTION_GLOB


@dataclass
class NotebookTime:
    """One notebook, run top to bottom in a fresh kernel."""

    name: str
    kernel_start: float  # seconds from asking for a kernel to its first cell
    run_all: float  # seconds from the first cell's start to the last cell's end
    load: float  # 1-minute load average when the notebook started
    slowest: list[tuple[float, int]] = field(default_factory=list)  # (seconds, cell index), slowest first


def time_notebook(path: Path, timeout: float = 600.0) -> NotebookTime:
    """Run ``path`` top to bottom in a fresh kernel (its outputs are not written back)."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    load = os.getloadavg()[0]
    asked = time.perf_counter()
    cells = []
    with client.setup_kernel():
        first = time.perf_counter()
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            start = time.perf_counter()
            client.execute_cell(cell, index)
            cells.append((time.perf_counter() - start, index))
        last = time.perf_counter()
    return NotebookTime(path.name, first - asked, last - first, load, sorted(cells, reverse=True)[:3])


def report(times: list[NotebookTime], budget: float) -> str:
    """A plain-text table, one row per notebook, marking the ones over ``budget``."""
    lines = [f"{'notebook':40} {'kernel start':>12} {'Run All':>8} {'load':>5}  verdict      slowest cells (s)",
             "-" * 100]
    for t in times:
        verdict = "within" if t.run_all <= budget else "OVER"
        slowest = ", ".join(f"[{index}] {seconds:.1f}" for seconds, index in t.slowest)
        lines.append(f"{t.name:40} {t.kernel_start:11.1f}s {t.run_all:7.1f}s {t.load:5.1f}  {verdict:11}  {slowest}")
    lines.append(f"budget: Run All ≤ {budget:g} s per notebook (the kernel already started)")
    return "\n".join(lines)


def markdown(times: list[NotebookTime], budget: float) -> str:
    """The table for docs/measurements.md."""
    rows = ["| notebook | Run All | kernel start | load at its start | slowest cells (s) |", "|---|---:|---:|---:|---|"]
    rows += [f"| {t.name} | {t.run_all:.1f} s | {t.kernel_start:.1f} s | {t.load:.1f} | "
             + ", ".join(f"[{index}] {seconds:.1f}" for seconds, index in t.slowest) + " |" for t in times]
    return "\n".join([*rows, "", f"Run All: every cell in order in a kernel already started (as JupyterLab has it "
                       f"when a notebook opens), through nbclient; the course's budget is {budget:g} s a notebook."])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.notebook_times", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help=f"notebooks to time (default: notebooks/{NOTEBOOK_PATTERN})")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS, help="seconds allowed for Run All")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a notebook is over budget")
    args = parser.parse_args(argv)
    paths = args.notebooks or solution_notebooks(Path.cwd())
    missing = [str(path) for path in paths if not path.is_file()]
    if not paths or missing:
        parser.error(f"notebooks must be existing .ipynb files, got {missing or 'none'} "
                     "(run from the course root, or name the notebooks)")
    times = []
    with measurements.LoadWatch() as load:
        for path in paths:
            times.append(time_notebook(path))
            print(f"timed {path.name}: Run All {times[-1].run_all:.1f} s", file=sys.stderr, flush=True)
    print(report(times, args.budget))
    if not args.notebooks:
        written = measurements.write("notebook-times", markdown(times, args.budget), command="make notebook-times",
                                     load=load)
        print(f"wrote {written}")
    else:
        print("(some notebooks named: docs/measurements.md keeps the run of them all, `make notebook-times`)")
    over = [t.name for t in times if t.run_all > args.budget]
    return 1 if args.strict and over else 0


if __name__ == "__main__":
    raise SystemExit(main())
