"""Every course notebook, as a learner meets it in JupyterLab.

For each notebook: open it, Run All from the Run menu, check every code cell
ran in this kernel without an error, then move every slider once with the
keyboard and once with the mouse and check that its output redrew. Run-All time
and input→redraw latencies go into test-artifacts/browser/report.{json,md}.
"""

from __future__ import annotations

from pathlib import Path

from ._lab import code_cell_counts, error_texts, open_notebook, run_all, screenshot_notebook, stderr_texts
from ._widgets import SLIDER, move_by_drag, move_by_keyboard, output_of, slider_label

RUN_ALL_TIMEOUT_MS = 180_000
ALL_SETTLED_MS = 1_000  # sliders are drawn by the kernel's last messages; let them land


def test_notebook_runs_and_sliders_redraw(lab_page, lab_server, course_notebook: Path,
                                          artifacts: Path, timing_report) -> None:
    page, name = lab_page, course_notebook.name
    open_notebook(page, lab_server, name)
    seconds = run_all(page, timeout_ms=RUN_ALL_TIMEOUT_MS)

    errors = error_texts(page)
    assert not errors, f"{name}: error output after Run All:\n" + "\n---\n".join(errors)
    counts = code_cell_counts(page)
    assert counts and all(count is not None for count in counts), f"{name}: cells not run: {counts}"
    page.wait_for_timeout(ALL_SETTLED_MS)
    screenshot_notebook(page, artifacts / f"{course_notebook.stem}_run_all.png")

    entry = {"notebook": course_notebook.stem, "run_all_s": round(seconds, 2),
             "code_cells": len(counts), "stderr": stderr_texts(page), "sliders": []}
    timing_report.notebooks.append(entry)
    sliders = page.locator(SLIDER)
    for index in range(sliders.count()):
        slider = sliders.nth(index)
        label = slider_label(slider, index)
        for how, move in (("key", move_by_keyboard), ("drag", move_by_drag)):
            result = move(page, slider, label, idle_selector=".jp-Notebook-ExecutionIndicator[data-status='idle']")
            entry["sliders"].append(result.as_dict())
            output_of(slider).screenshot(path=artifacts / f"{course_notebook.stem}_slider{index}_{how}.png")
    assert not error_texts(page), f"{name}: a slider callback raised:\n" + "\n".join(error_texts(page))
