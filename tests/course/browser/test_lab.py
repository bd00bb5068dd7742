"""Every course notebook, as a learner meets it in JupyterLab.

For each notebook: open it, Run All from the Run menu, check every code cell ran in this
kernel without a traceback or a warning, then move every slider (three arrow-key presses
and one drag) and time key press → new picture. Run-All time and the latencies go into
test-artifacts/browser/report.{json,md} (and, in the benchmark, docs/measurements.md).
PRENORM_SLIDER_BUDGET_MS, if set (for a quiet machine), fails a slider whose 95th-percentile
key-press latency is above it.

`test_error_checks_fire_on_the_fixture` runs the fixture notebook (bad on purpose): a cell
that raises, and a LiveFigure whose update raises; each must be seen.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import _checks as checks
from ._fixtures import FIXTURE_NAME, RAISED_IN_CELL, RAISED_IN_UPDATE
from ._lab import KERNEL_IDLE, code_cell_counts, open_notebook, run_all, screenshot_notebook
from ._report import BENCHMARK_LIMIT
from ._widgets import KNOB, SLIDER, latency_summary, move_every_slider, over_budget

RUN_ALL_TIMEOUT_MS = 600_000  # a guard against a hang, not a limit
ALL_SETTLED_MS = 1_000  # sliders are drawn by the kernel's last messages; let them land


def run_notebook(page, server, name: str) -> tuple[float, list]:
    open_notebook(page, server, name)
    seconds = run_all(page, timeout_ms=RUN_ALL_TIMEOUT_MS)
    counts = code_cell_counts(page)
    assert counts and all(count is not None for count in counts), f"{name}: cells not run: {counts}"
    page.wait_for_timeout(ALL_SETTLED_MS)
    return seconds, counts


def test_notebook_runs_and_sliders_redraw(lab_page, lab_server, course_notebook: Path,
                                          artifacts: Path, timing_report) -> None:
    page, name, stem = lab_page, course_notebook.name, course_notebook.stem
    seconds, counts = run_notebook(page, lab_server, name)
    errors = checks.error_outputs(page)
    assert not errors, f"{name}: traceback or warning after Run All:\n" + "\n---\n".join(errors)
    screenshot_notebook(page, artifacts / f"{stem}_run_all.png")

    moves = move_every_slider(
        page, idle_selector=KERNEL_IDLE,
        after_each=lambda index, scope: scope.screenshot(path=artifacts / f"{stem}_slider{index}.png"),
    )
    timing_report.notebooks.append({
        "notebook": stem, "run_all_s": round(seconds, 2), "code_cells": len(counts),
        "sliders": [move.as_dict() for move in moves], "slider_summary": latency_summary(moves),
    })
    errors = checks.error_outputs(page)
    assert not errors, f"{name}: a slider's update raised or warned:\n" + "\n".join(errors)
    budget = os.environ.get("PRENORM_SLIDER_BUDGET_MS")
    if budget:
        slow = over_budget(moves, float(budget))
        assert not slow, f"{name}: {BENCHMARK_LIMIT}: sliders slower than PRENORM_SLIDER_BUDGET_MS:\n" + "\n".join(slow)


def test_error_checks_fire_on_the_fixture(lab_page, lab_server, artifacts: Path, timing_report) -> None:
    page = lab_page
    seconds, counts = run_notebook(page, lab_server, f"fixtures/{FIXTURE_NAME}")
    errors = checks.error_outputs(page)
    assert len(errors) == 1 and RAISED_IN_CELL in errors[0], f"the raising cell went unseen: {errors}"

    sliders = page.locator(SLIDER)
    labels = [sliders.nth(i).locator(".widget-label").inner_text() for i in range(sliders.count())]
    moves = move_every_slider(page, idle_selector=KERNEL_IDLE, only=[i for i, x in enumerate(labels) if x != "fail"])
    assert {move.slider.split()[-1] for move in moves} == {"amplitude", "harmonic"}, moves
    timing_report.notebooks.append({
        "notebook": "fixture (LiveFigure)", "run_all_s": round(seconds, 2), "code_cells": len(counts),
        "sliders": [move.as_dict() for move in moves], "slider_summary": latency_summary(moves),
    })
    assert over_budget(moves, budget_ms=0.0), "the slider budget check cannot fail"

    fail = sliders.nth(labels.index("fail"))
    fail.locator(KNOB).press("ArrowRight")
    page.locator(checks.STDERR_OUTPUT, has_text=RAISED_IN_UPDATE).wait_for(timeout=60_000)
    scope = fail.evaluate_handle("(s) => window.__prenorm.scopeOf(s)").as_element()
    under_figure = [e.inner_text() for e in scope.query_selector_all(checks.STDERR_OUTPUT)]
    assert any(RAISED_IN_UPDATE in text for text in under_figure), "the LiveFigure's traceback is not under it"
    assert len(checks.error_outputs(page)) == 2, checks.error_outputs(page)
    scope.screenshot(path=artifacts / "fixture_raising_livefigure.png")
