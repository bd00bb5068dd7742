"""Fixtures for the browser tests: the system Chromium, JupyterLab, and the report.

The course notebooks are notebooks/[0-9][0-9]_*_solutions.ipynb; PRENORM_NOTEBOOKS points
the tests at another folder of the same shape (used while developing them).
Screenshots and the timing report go to test-artifacts/browser/ (git-ignored).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from prenorm_course.classroom import write_dashboard
from prenorm_course.exercises.paths import SOLUTION_GLOB
from prenorm_course.measurements import LoadWatch

from ._checks import PAINT_SCRIPT
from ._chromium import LAUNCH_ARGS, VIEWPORT, find_chromium, skip_or_fail
from ._fixtures import write_fixture
from ._report import TimingReport
from ._servers import copy_notebooks, jupyter_lab, remove_tree, shutdown_kernels, voila
from ._widgets import WATCH_SCRIPT

REPO_ROOT = Path(__file__).resolve().parents[3]


def notebook_folder() -> Path:
    """The folder holding the course notebooks (PRENORM_NOTEBOOKS overrides)."""
    return Path(os.environ.get("PRENORM_NOTEBOOKS", REPO_ROOT / "notebooks")).resolve()


def course_notebooks() -> list[Path]:
    """The numbered course notebooks, in course order."""
    return sorted(notebook_folder().glob(SOLUTION_GLOB))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per course notebook, named after it; a clear skip while there are none."""
    if "course_notebook" not in metafunc.fixturenames:
        return
    found = course_notebooks()
    if found:
        metafunc.parametrize("course_notebook", found, ids=[p.stem for p in found])
    else:
        reason = f"no {SOLUTION_GLOB} notebooks in {notebook_folder()}"
        metafunc.parametrize("course_notebook", [pytest.param(None, marks=pytest.mark.skip(reason=reason))])


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/browser/, emptied at the start of the session."""
    folder = Path(os.environ.get("PRENORM_ARTIFACTS", REPO_ROOT / "test-artifacts" / "browser"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="session")
def timing_report(artifacts: Path) -> Iterator[TimingReport]:
    with LoadWatch() as load:
        report = TimingReport(artifacts, load=load)
        yield report
    report.write(course=[path.stem for path in course_notebooks()])


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    """A temporary folder for the whole session, removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="prenorm-browser-"))
    yield folder
    remove_tree(folder)


@pytest.fixture(scope="session")
def browser_context(scratch: Path):
    """One headless Chromium (the system's, never a downloaded one) for the session."""
    chromium = find_chromium()
    if chromium is None:
        skip_or_fail("no Chromium found (apt-get install chromium, or set PRENORM_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Python Playwright is not installed")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(scratch / "chromium-profile"), executable_path=chromium, headless=True,
            args=LAUNCH_ARGS, viewport=VIEWPORT,
        )
        context.add_init_script(WATCH_SCRIPT)
        context.add_init_script(PAINT_SCRIPT)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context):
    """A fresh tab; console errors and warnings, uncaught page errors and failed requests
    are collected on it (`tab.console` holds (kind, text) pairs)."""
    tab = browser_context.new_page()
    tab.console = []
    tab.failed_requests = []
    tab.on("requestfailed", lambda request: tab.failed_requests.append(f"{request.url} ({request.failure})"))
    tab.on("console", lambda message: message.type in ("error", "warning")
           and tab.console.append((message.type, message.text)))
    tab.on("pageerror", lambda error: tab.console.append(("error", str(error))))
    yield tab
    tab.close()


@pytest.fixture(scope="session")
def lab_server(browser_context, scratch: Path):
    """JupyterLab on 127.0.0.1 serving a cleared COPY of the course notebooks, and the
    fixture notebook (bad on purpose) under fixtures/."""
    served = copy_notebooks(notebook_folder(), scratch / "lab-notebooks", clear_outputs=True)
    write_fixture(served / "fixtures")
    with jupyter_lab(served, scratch / "lab-home") as server:
        yield server


@pytest.fixture(scope="session")
def voila_server(browser_context, scratch: Path):
    """One Voilà (the classroom view's template and options) serving the classroom view of
    the fixture notebook (bad on purpose); the course notebooks go through `make demo`."""
    folder = scratch / "classroom"
    folder.mkdir(parents=True, exist_ok=True)
    write_dashboard(write_fixture(scratch / "fixture-source"), folder)
    with voila(folder, scratch / "voila-home") as server:
        yield server


@pytest.fixture
def lab_page(page, lab_server):
    """A tab for one notebook; its kernel is shut down afterwards to free memory."""
    yield page
    page.goto("about:blank")
    shutdown_kernels(lab_server)
