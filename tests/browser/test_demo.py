"""Classroom mode (`make demo NB=03`): the notebook as a Voilà dashboard.

Voilà runs the classroom view of notebooks/03_*.ipynb (PRENORM_DEMO picks another
number; :func:`prenorm_lib.classroom.write_dashboard` derives it) on 127.0.0.1 with
isolated Jupyter folders. The test waits for the page, checks that no code and no
printed text is shown and no cell failed, then moves every slider with the keyboard
and the mouse and checks that what it draws changes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from prenorm_lib.classroom import write_dashboard

from ._chromium import block_external_requests, screenshot_whole_page
from ._servers import voila
from ._widgets import SLIDER, move_by_drag, move_by_keyboard, output_of, slider_label
from .conftest import notebook_folder

PAGE_TIMEOUT_MS = 180_000
# Voilà 0.5's own "lab" template links Font Awesome's stylesheets from a CDN. They
# only style widget icons (the course's sliders have none), so offline they may
# fail; anything else fetched from outside would be a real dependency.
TOLERATED_EXTERNAL = ("cdn.jsdelivr.net/npm/@fortawesome/fontawesome-free",)
ERROR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']"
TEXT_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']"


def demo_notebook() -> Path:
    number = os.environ.get("PRENORM_DEMO", "03")
    found = sorted(notebook_folder().glob(f"{number}_*.ipynb"))
    if not found:
        pytest.skip(f"no {number}_*.ipynb notebook in {notebook_folder()} for the classroom demo")
    return found[0]


def widget_views(notebook: Path) -> int:
    node = nbformat.read(notebook, as_version=4)
    return sum("application/vnd.jupyter.widget-view+json" in output.get("data", {})
               for cell in node.cells if cell.cell_type == "code" for output in cell.outputs)


def test_voila_hides_code_and_sliders_redraw(page, scratch: Path,
                                             artifacts: Path, timing_report) -> None:
    notebook = demo_notebook()
    folder = scratch / "voila-notebooks"
    folder.mkdir(parents=True, exist_ok=True)
    with voila(write_dashboard(notebook, folder), scratch / "voila-home") as server:
        leaving = block_external_requests(page)
        started = time.monotonic()
        page.goto(server.url("/"), wait_until="load", timeout=PAGE_TIMEOUT_MS)
        if widget_views(notebook):
            page.locator(SLIDER).first.wait_for(timeout=PAGE_TIMEOUT_MS)
        else:
            page.locator(".jp-Cell").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        ready_s = time.monotonic() - started

        assert page.locator(".jp-CodeCell .jp-InputArea").count() == 0, "Voilà shows code cells"
        assert page.locator(".jp-Cell").count() > 0, "Voilà rendered no cells"
        assert page.locator(TEXT_OUTPUT).count() == 0, "the classroom view shows printed text"
        assert page.locator(".jp-OutputArea-output img").count() > 0, "the classroom view shows no plot"
        errors = page.locator(ERROR_OUTPUT).all_inner_texts()
        assert not errors, f"{notebook.name}: cells failed under Voilà:\n" + "\n---\n".join(errors)
        screenshot_whole_page(page, artifacts / f"demo_{notebook.stem}.png")

        moves = []
        sliders = page.locator(SLIDER)
        for index in range(sliders.count()):
            slider = sliders.nth(index)
            label = slider_label(slider, index)
            for how, move in (("key", move_by_keyboard), ("drag", move_by_drag)):
                moves.append(move(page, slider, label, idle_selector=None).as_dict())
                output_of(slider).screenshot(path=artifacts / f"demo_{notebook.stem}_slider{index}_{how}.png")
        assert not page.locator(ERROR_OUTPUT).count(), "a slider callback raised under Voilà"
        unexpected = [url for url in leaving if not url.split("//", 1)[-1].startswith(TOLERATED_EXTERNAL)]
        assert not unexpected, f"Voilà page loads from outside 127.0.0.1: {unexpected}"
        # An aborted request logs "Failed to load resource: net::ERR_FAILED" without its address.
        errors = [text for text in page.console_errors
                  if "favicon" not in text and not (leaving and "net::ERR_FAILED" in text)]
        assert not errors, f"console errors under Voilà: {errors}; failed requests: {page.failed_requests}"
    timing_report.demo = {"notebook": notebook.stem, "ready_s": round(ready_s, 2), "sliders": moves,
                          "blocked_external": leaving}
