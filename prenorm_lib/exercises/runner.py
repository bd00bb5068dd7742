"""Run one notebook under nbval in a fresh kernel and collect a result per cell."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from prenorm_lib.exercises._report_plugin import REPORT_ENV

PLUGIN = Path(__file__).with_name("_report_plugin.py")
DEFAULT_TIMEOUT = 60.0
# Added to the sum of cell timeouts: kernel start-up, collection and teardown.
STARTUP_ALLOWANCE_S = 120.0


@dataclass
class CellResult:
    """What happened in one code cell; ``kind`` says how it went wrong."""

    cell_id: str
    outcome: str  # pytest's: passed, failed, skipped
    kind: str  # ok, exception, timeout, output, skipped, other
    ename: str = ""
    evalue: str = ""
    message: str = ""
    details: str = ""


@dataclass
class RunResult:
    """One nbval run: pytest's exit code, the per-cell results and pytest's text output."""

    returncode: int
    cells: dict[str, CellResult] = field(default_factory=dict)
    log: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.returncode == 0


def _classify(record: dict) -> CellResult:
    errors = record["errors"]
    error = errors[-1] if errors else {"ename": "", "evalue": ""}
    message = record["message"]
    if record["outcome"] == "passed":
        kind = "ok"
    elif record["outcome"] == "skipped" and not record["xfail"]:
        kind = "skipped"
    elif "Timeout" in message or (record["xfail"] and error["ename"] == "KeyboardInterrupt"):
        kind = "timeout"
    elif errors:
        kind = "exception"
    elif "outputs differ" in message:
        kind = "output"
    else:
        kind = "other"
    return CellResult(
        cell_id=record["cell_id"],
        outcome=record["outcome"],
        kind=kind,
        ename=error["ename"],
        evalue=error["evalue"],
        message=message,
        details=record["details"],
    )


def nbval_command(notebook: Path, sanitize: Path | None, timeout: float, stop_first: bool) -> list[str]:
    command = [
        sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
        f"--nbval-cell-timeout={timeout:g}", "-p", "no:cacheprovider", "-p", "no:xdist",
        "-q", "--color=no",
    ]
    if sanitize is not None:
        command += ["--nbval-sanitize-with", str(sanitize)]
    if stop_first:
        command.append("-x")
    return [*command, notebook.name]


def run_nbval(
    notebook: Path,
    sanitize: Path | None,
    timeout: float = DEFAULT_TIMEOUT,
    stop_first: bool = False,
    n_cells: int = 0,
) -> RunResult:
    """Run ``notebook`` (alone in a folder the caller owns) under nbval.

    The folder gets a ``pytest.ini`` (so no config from an enclosing folder
    applies) and the report plugin as ``conftest.py``. ``n_cells`` bounds the
    wall time of the whole run as a last resort behind nbval's per-cell timeout.
    """
    folder = notebook.parent
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    shutil.copyfile(PLUGIN, folder / "conftest.py")
    report = folder / "cells.jsonl"
    report.unlink(missing_ok=True)
    env = {**os.environ, REPORT_ENV: str(report), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            nbval_command(notebook, sanitize, timeout, stop_first),
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout * max(n_cells, 1) + STARTUP_ALLOWANCE_S,
        )
        returncode, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, log = -1, f"nbval did not finish within {exc.timeout:g} s"
    result = RunResult(returncode, log=log, seconds=time.perf_counter() - start)
    if report.is_file():
        for line in report.read_text(encoding="utf-8").splitlines():
            cell = _classify(json.loads(line))
            result.cells[cell.cell_id] = cell
    return result
