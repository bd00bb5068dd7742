"""Classroom mode (`make demo NB=…`): every course notebook as a Voilà dashboard.

Each course notebook is opened the way docs/teaching.md says: `make demo NB=0N PORT=<free port>`,
run from the course's root in its own process (the way a teacher types it: a module run
with `python -m`, kernels started by Voilà in a temporary folder), in a 1366×768 window,
the size of a common projector. The page is first requested as soon as the server answers,
before its preheated kernel has run the notebook (a teacher who starts `make demo` late): the
stored pictures must be on screen before the first live one, with no spinner in front, and give
way to the live figures. Then, once the preheat is done, the test measures the time to first
paint and until every cell has run, and checks what a teacher would see: the notebook's
title, no code, no printed text but what the notebook keeps for the class, no traceback,
every figure large and centred and shown once, nothing fetched from outside the server,
no console error; then it moves every slider and times key press → new picture, and
leaves the page as a teacher reloading it would: its kernel must be shut down.

`test_each_check_fires_on_a_bad_page` shows every one of these checks failing on pages that
are bad on purpose (the fixture notebook, Voilà's plain template, a page that paints late).
They share one Voilà server serving a folder; each page runs its own kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from prenorm_course import classroom, stored_widgets

from . import _checks as checks
from ._chromium import block_external_requests, screenshot_whole_page
from ._fixtures import FIXTURE_NAME, RAISED_IN_CELL, RAISED_IN_UPDATE
from ._report import BENCHMARK, BENCHMARK_LIMIT
from ._servers import make_demo, static_site, wait_until_preheated
from ._widgets import KNOB, SLIDER, latency_summary, move_every_slider, over_budget

CLASSROOM_WINDOW = {"width": 1366, "height": 768}
LARGE_WINDOW = {"width": 1920, "height": 1080}
LAYOUT_SHIFT_LIMIT = 0.1  # "good" cumulative layout shift (web.dev's threshold)
FIRST_PAINT_LIMIT_MS = 10_000
# Live at once (issue 30): with the kernel preheated, the first live figure follows the page
# request within 2 s and every cell is done within 15 s; the preheat itself must end in time.
FIRST_FIGURE_LIMIT_MS = 2_000
ALL_CELLS_LIMIT_MS = 15_000
PREHEAT_TIMEOUT_S = 300
ALL_CELLS_TIMEOUT_MS = 600_000
STALL_MS = 300_000  # longer than any one cell takes on the loaded 2-core machine
# Guards against a hang, not limits: generous, so that a machine busy with other work (load 30) stays green.
HANG_MS = 300_000
SETTLE_MS = 1_000  # widget views are drawn after their cell's result arrives
KEPT = f".celltag_{classroom.KEEP_TAG}"


def open_classroom(page, server, name: str, artifacts: Path, query: str = "", path: str | None = None) -> dict:
    """Open a classroom page (`path` on the server, by default the folder server's page of
    notebook `name`), wait until every cell ran; returns the paint timings (ms), the layout
    shift and the page's kernel id."""
    page.set_viewport_size(CLASSROOM_WINDOW)
    page.goto(server.url(path or f"/voila/render/{quote(name)}{query}"), wait_until="commit")
    try:
        painted = checks.first_paint_ms(page, timeout_ms=HANG_MS)
        done = checks.wait_until_all_cells_ran(page, stall_ms=STALL_MS, timeout_ms=ALL_CELLS_TIMEOUT_MS)
    except (AssertionError, PlaywrightTimeoutError) as error:
        page.screenshot(path=artifacts / f"demo_{Path(name).stem}_timed_out.png")
        shutil.copy2(server.log_path, artifacts / f"demo_{Path(name).stem}_timed_out_voila.log")
        raise AssertionError(f"{name}: {error}\nVoilà's log:\n{server.log_tail(60)}") from None
    page.wait_for_timeout(SETTLE_MS)
    figure = page.evaluate("() => window.__prenormPaint.figure")
    preview = page.evaluate("() => window.__prenormPaint.preview")
    shift = page.evaluate("() => window.__prenormPaint.shift")
    kernel = json.loads(page.locator("#jupyter-config-data").text_content())["kernelId"]
    return {"first_paint_ms": round(painted), "first_figure_ms": figure and round(figure),
            "first_stored_figure_ms": preview and round(preview),
            "all_cells_ms": round(done), "layout_shift": round(shift, 3), "kernel": kernel}


def kernel_running(server, kernel: str) -> bool:
    """Whether the Voilà server still runs the kernel `kernel`."""
    try:
        with urllib.request.urlopen(server.url(f"/api/kernels/{kernel}"), timeout=10):
            return True
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise


def leave(page, server, kernel: str, timeout_s: float = 60.0, keep_routes: bool = False) -> bool:
    """Leave the loaded page as a teacher would (reload, close); True if its kernel was shut down.

    (A page left while still loading runs no handler; Voilà culls that kernel later.)
    """
    page.wait_for_function("() => document.readyState === 'complete'", timeout=HANG_MS)
    if not keep_routes:
        page.unroute("**/*")  # a request routed through Playwright dies with the page it left
    page.goto("about:blank")
    deadline = time.monotonic() + timeout_s
    while kernel_running(server, kernel):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


def shut_down(server, kernel: str) -> None:
    """Shut a kernel down from here (a double-submitted XSRF token, as the page would send)."""
    request = urllib.request.Request(server.url(f"/api/kernels/{kernel}"), method="DELETE",
                                     headers={"Cookie": "_xsrf=00", "X-XSRFToken": "00"})
    urllib.request.urlopen(request, timeout=30).close()


def late(timings: dict, expects_figure: bool) -> list[str]:
    """The limits of "live at once" a page missed: its first live figure, and its last cell.

    Timing informs, tests decide: these limits hold only in the benchmark (`make bench-browser`,
    PRENORM_BENCHMARK=1, for a quiet machine); CI's run on a shared machine reports the times in
    test-artifacts/browser/report.md and is not failed by them."""
    found = []
    if expects_figure and (timings["first_figure_ms"] or float("inf")) > FIRST_FIGURE_LIMIT_MS:
        found.append(f"{BENCHMARK_LIMIT}: first live figure {timings['first_figure_ms']} ms after the request "
                     f"(limit {FIRST_FIGURE_LIMIT_MS})")
    if timings["all_cells_ms"] > ALL_CELLS_LIMIT_MS:
        found.append(f"{BENCHMARK_LIMIT}: all cells done {timings['all_cells_ms']} ms from the request "
                     f"(limit {ALL_CELLS_LIMIT_MS})")
    return found


def test_the_live_at_once_limits_fire_on_a_late_page():
    on_time = {"first_figure_ms": 1500, "all_cells_ms": 3000}
    assert late(on_time, expects_figure=True) == []
    assert len(late({"first_figure_ms": 2500, "all_cells_ms": 16000}, expects_figure=True)) == 2
    assert late({"first_figure_ms": None, "all_cells_ms": 3000}, expects_figure=True), "no figure at all went unseen"
    assert late({"first_figure_ms": None, "all_cells_ms": 3000}, expects_figure=False) == []


COLD_MARGIN_MS = 1_000  # the stored pictures must be up this long before the last cell: proof the page was cold


def cold_start_problems(timings: dict, spinner: bool, poster_left: int, expects_figure: bool) -> dict[str, list[str]]:
    """What a page requested before its kernel had run the notebook must not do (decided by order,
    not by time): show Voilà's spinner, show a live figure before any stored picture, show its
    stored pictures only once every cell had run, or keep the poster after the last cell. In the
    benchmark, the first stored picture must also come within the live-at-once limit."""
    stored, live, done = timings["first_stored_figure_ms"], timings["first_figure_ms"], timings["all_cells_ms"]
    problems = {"spinner in front of the page": ["Voilà's 'Executing N of M' spinner was on screen"] if spinner else [],
                "poster left after the last cell": [f"{poster_left} poster(s)"] if poster_left else []}
    if expects_figure:
        if stored is None:
            problems["no stored picture"] = ["no stored picture was drawn before the live ones"]
        else:
            problems["live before stored"] = ([f"a live figure at {live} ms, the first stored picture at {stored} ms"]
                                             if live is not None and live < stored else [])
            problems["stored pictures only at the end"] = (
                [f"first stored picture at {stored} ms, the last cell at {done} ms"]
                if stored > done - COLD_MARGIN_MS else [])
            slow = BENCHMARK and stored > FIRST_FIGURE_LIMIT_MS
            problems["slow stored picture"] = [f"{BENCHMARK_LIMIT}: first stored picture {stored} ms after the "
                                               f"request (limit {FIRST_FIGURE_LIMIT_MS})"] if slow else []
    return {name: found for name, found in problems.items() if found}


def test_the_cold_start_checks_fire(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "BENCHMARK", False)  # the order checks alone; the limit below
    good = {"first_stored_figure_ms": 700, "first_figure_ms": 6000, "all_cells_ms": 30000}
    assert cold_start_problems(good, spinner=False, poster_left=0, expects_figure=True) == {}
    assert set(cold_start_problems(good, spinner=True, poster_left=1, expects_figure=True)) == {
        "spinner in front of the page", "poster left after the last cell"}
    assert set(cold_start_problems({**good, "first_stored_figure_ms": None}, False, 0, True)) == {"no stored picture"}
    assert set(cold_start_problems({**good, "first_stored_figure_ms": 7000}, False, 0, True)) == {"live before stored"}
    assert set(cold_start_problems({**good, "first_stored_figure_ms": 29500, "first_figure_ms": 29600}, False, 0,
                                   True)) == {"stored pictures only at the end"}
    assert cold_start_problems({**good, "first_stored_figure_ms": None}, False, 0, expects_figure=False) == {}
    monkeypatch.setattr(sys.modules[__name__], "BENCHMARK", True)  # the benchmark's limit: 2 s to a stored picture
    assert cold_start_problems(good, False, 0, True) == {}
    slow = cold_start_problems({**good, "first_stored_figure_ms": 2500}, False, 0, True)
    assert set(slow) == {"slow stored picture"} and BENCHMARK_LIMIT in slow["slow stored picture"][0]


def check_cold_start(page, server, course_notebook: Path, artifacts: Path) -> tuple[dict, dict[str, list[str]]]:
    """Open the page before the preheat is done; returns its timings (ms) as "cold_…" entries, and what
    it found wrong (asserted with the preheated page's findings, once every timing is in the report)."""
    leaving = block_external_requests(page)
    timings = open_classroom(page, server, course_notebook.name, artifacts, path="/")
    kernel, stem = timings.pop("kernel"), course_notebook.stem
    page.screenshot(path=artifacts / f"demo_{stem}_cold.png")
    problems = cold_start_problems(timings, page.evaluate("() => window.__prenormPaint.spinner"),
                                   page.locator("#classroom-poster").count(),
                                   figures_expected(nbformat.read(course_notebook, as_version=4)))
    problems.update({name: found for name, found in {
        "errors": checks.error_outputs(page), "requests leaving 127.0.0.1": leaving,
        "console": checks.unexpected_console(page.console),
        "kernel left running": [] if leave(page, server, kernel) else [kernel]}.items() if found})
    page.console.clear()
    return {f"cold_{name}": value for name, value in timings.items()}, {
        f"opened before the preheat was done: {name}": found for name, found in problems.items()}


def figures_expected(notebook: nbformat.NotebookNode) -> bool:
    return any(classroom.shows_picture_or_widget(cell) for cell in notebook.cells if cell.cell_type == "code")


def stored_sliders(notebook: nbformat.NotebookNode) -> int:
    """How many sliders the notebook stored with its outputs (its widget state)."""
    return sum(model.get("model_name", "").endswith("SliderModel")
               for model in stored_widgets.widget_models(notebook).values())


def test_classroom_view(page, course_notebook: Path, scratch: Path, artifacts: Path, timing_report) -> None:
    number = course_notebook.name[:2]
    with make_demo(number, scratch / f"demo-{number}") as server:
        # A teacher who starts `make demo` late: the page is asked for before the preheat is done.
        cold, cold_problems = check_cold_start(page, server, course_notebook, artifacts)
        # The teacher who starts it before class: Voilà has run the notebook in its pool kernel
        # (refilled after the cold page took the first one).
        preheated_s = wait_until_preheated(server, timeout_s=PREHEAT_TIMEOUT_S)
        check_classroom_view(page, server, course_notebook, artifacts, timing_report, preheated_s, cold,
                             cold_problems)


def check_classroom_view(page, server, course_notebook: Path, artifacts: Path, timing_report,
                         preheated_s: float, cold: dict | None = None,
                         cold_problems: dict[str, list[str]] | None = None) -> None:
    leaving = block_external_requests(page)
    timings = open_classroom(page, server, course_notebook.name, artifacts, path="/")
    timings["refill_wait_s"] = round(preheated_s, 1)  # after the cold page: its pool kernel's refill
    kernel = timings.pop("kernel")
    stem = course_notebook.stem
    source = nbformat.read(course_notebook, as_version=4)
    if stored_sliders(source):  # widgets are drawn by the page's script after the last cell: wait for them
        with contextlib.suppress(PlaywrightTimeoutError):  # (none is counted as missing below)
            page.locator(SLIDER).first.wait_for(timeout=HANG_MS)
    sliders = page.locator(SLIDER).count()
    page.screenshot(path=artifacts / f"demo_{stem}_1366x768.png")
    screenshot_whole_page(page, artifacts / f"demo_{stem}_whole.png")

    expected_title = classroom.title(source)
    problems = {
        "page title": [] if page.title().strip() == expected_title else [f"{page.title()!r}, not {expected_title!r}"],
        "code shown": [f"{n} code cells"] if (n := page.locator(".jp-CodeCell .jp-InputArea").count()) else [],
        "errors": checks.error_outputs(page),
        "printed text": checks.printed_text(page, kept=KEPT),
        "no figure": [] if (figures := len(checks.figures(page))) else ["the classroom view shows no figure"],
        "no slider": ([f"the notebook stores {stored_sliders(source)} sliders, the classroom view shows none"]
                      if stored_sliders(source) and not sliders else []),
        "small or off-centre figures": checks.small_or_off_centre(page),
        "duplicate figures": checks.duplicate_figures(page),
        "slow first paint": ([f"{BENCHMARK_LIMIT}: {timings['first_paint_ms']} ms (limit {FIRST_PAINT_LIMIT_MS})"]
                             if BENCHMARK and timings["first_paint_ms"] > FIRST_PAINT_LIMIT_MS else []),
        "live too late": late(timings, figures_expected(source)) if BENCHMARK else [],
        "poster left": [] if not page.locator("#classroom-poster").count() else ["the stored poster is still there"],
        "tables too small or too wide (1366x768)": checks.small_or_wide_tables(page),
        "slider labels cut (1366x768)": checks.cut_labels(page),
    }
    problems["layout shift"] = [f"{timings['layout_shift']} (limit {LAYOUT_SHIFT_LIMIT})"] if (
        timings["layout_shift"] is None or timings["layout_shift"] > LAYOUT_SHIFT_LIMIT) else []
    problems["slider and figure off the screen (1366x768)"] = checks.sliders_taller_than_the_screen(page)
    problems["sliders without words"] = checks.sliders_without_words(page)
    problems["printed lines that do not fit"] = checks.overflowing_text(page)
    moves = move_every_slider(
        page, idle_selector=None,
        after_each=lambda index, scope: scope.screenshot(path=artifacts / f"demo_{stem}_slider{index}.png"),
    )
    problems["sliders without words after moving"] = checks.sliders_without_words(page)
    page.set_viewport_size(LARGE_WINDOW)
    page.wait_for_timeout(SETTLE_MS)
    page.screenshot(path=artifacts / f"demo_{stem}_1920x1080.png")
    problems["slider and figure off the screen (1920x1080)"] = checks.sliders_taller_than_the_screen(page)
    problems["printed lines that do not fit (1920x1080)"] = checks.overflowing_text(page)
    problems["tables too small or too wide (1920x1080)"] = checks.small_or_wide_tables(page)
    problems["slider labels cut (1920x1080)"] = checks.cut_labels(page)
    problems["errors after moving sliders"] = checks.error_outputs(page)
    budget = os.environ.get("PRENORM_SLIDER_BUDGET_MS")
    problems[f"slow sliders ({BENCHMARK_LIMIT}: PRENORM_SLIDER_BUDGET_MS)"] = (
        over_budget(moves, float(budget)) if budget else [])
    problems["requests leaving 127.0.0.1"] = leaving
    problems["console"] = checks.unexpected_console(page.console)
    problems["kernel left running"] = [] if leave(page, server, kernel) else [kernel]

    timing_report.demo.append({
        "notebook": stem, **timings, **(cold or {}), "figures": figures,
        "sliders": [move.as_dict() for move in moves], "slider_summary": latency_summary(moves),
    })
    found = {**(cold_problems or {}), **{name: found for name, found in problems.items() if found}}
    assert not found, f"{stem} in classroom mode:\n" + "\n".join(f"- {k}: {v}" for k, v in found.items())


LATE_PAGE = """<!DOCTYPE html><html><head><title>late</title></head><body data-voila="voila">
<div id="rendered_cells"></div>
<script>setTimeout(() => { document.getElementById('rendered_cells').innerHTML =
  '<div class="jp-Cell"><div class="jp-RenderedMarkdown"><h1>Painted late</h1></div></div>'
  + '<div cell-index="1"><div class="voila-skeleton-container"></div></div>'; }, 1500);</script>
</body></html>"""


def test_each_check_fires_on_a_bad_page(page, voila_server, scratch: Path, artifacts: Path, timing_report) -> None:
    # The fixture in the classroom view: a cell raises, a figure is shown three times,
    # a kept cell prints, and one LiveFigure raises when its slider moves.
    kernel = open_classroom(page, voila_server, FIXTURE_NAME, artifacts)["kernel"]
    screenshot_whole_page(page, artifacts / "demo_fixture.png")
    assert any(RAISED_IN_CELL in text for text in checks.error_outputs(page)), "a raising cell went unseen"
    assert len(checks.duplicate_figures(page)) == 2, checks.duplicate_figures(page)
    assert checks.printed_text(page, kept=KEPT) == [], "printed text of a kept cell counted as a leak"
    assert checks.printed_text(page, kept=".no-such-tag"), "printed text went unseen"

    sliders = page.locator(SLIDER)
    labels = [sliders.nth(i).locator(".widget-label").inner_text() for i in range(sliders.count())]
    wave = [i for i, label in enumerate(labels) if label != "fail"]
    moves = move_every_slider(page, idle_selector=None, only=wave)
    assert len({move.slider for move in moves}) == 2, moves
    timing_report.demo.append({"notebook": "fixture (LiveFigure)", "sliders": [m.as_dict() for m in moves],
                               "slider_summary": latency_summary(moves)})
    assert over_budget(moves, budget_ms=0.0), "the slider budget check cannot fail"

    fail = sliders.nth(labels.index("fail"))
    fail.locator(KNOB).press("ArrowRight")
    page.locator(checks.STDERR_OUTPUT, has_text=RAISED_IN_UPDATE).wait_for(timeout=60_000)
    assert fail.evaluate("(s) => !!window.__prenorm.scopeOf(s).querySelector"
                         f"(\"{checks.STDERR_OUTPUT}\")"), "the LiveFigure's traceback is not under its figure"

    # A verdict table at JupyterLab's 13 px, one wider than the window, and a cut slider label.
    assert checks.small_or_wide_tables(page) == [] and checks.cut_labels(page) == []
    page.evaluate("""() => { const cell = [...document.querySelectorAll('.jp-Cell .jp-RenderedMarkdown')]
        .find((e) => e.offsetParent);
      cell.insertAdjacentHTML('beforeend', '<table style="font-size:13px"><tr><td>13 px</td></tr></table>'
        + '<table style="width:4000px;max-width:none"><tr><td>wide</td></tr></table>');
      const label = document.querySelector('.widget-slider .widget-label');
      label.style.setProperty('width', '20px', 'important'); label.style.setProperty('min-width', '0', 'important');
      label.style.overflow = 'hidden'; label.textContent = 'position m'; }""")
    small = checks.small_or_wide_tables(page)
    assert any("13 px" in found for found in small) and any("wide" in found for found in small), small
    assert checks.cut_labels(page), "a cut slider label went unseen"

    assert leave(page, voila_server, kernel), "leaving the classroom page left its kernel running"

    # The same notebook in Voilà's plain template: small figures and Font Awesome asked
    # from a CDN; then a page whose kernel outlives it (its shutdown request blocked).
    leaving = block_external_requests(page)
    kernel = open_classroom(page, voila_server, FIXTURE_NAME, artifacts, query="?template=lab")["kernel"]
    page.screenshot(path=artifacts / "demo_fixture_plain_template.png")
    # Voilà's own template, run from the page: its spinner stands in front until the last cell, and it has
    # no stored pictures; the cold-start checks see both.
    plain = {"first_stored_figure_ms": page.evaluate("() => window.__prenormPaint.preview"),
             "first_figure_ms": 1, "all_cells_ms": 2}
    assert set(cold_start_problems(plain, page.evaluate("() => window.__prenormPaint.spinner"), 0, True)) == {
        "spinner in front of the page", "no stored picture"}, "Voilà's spinner or the missing pictures went unseen"
    # (The classroom kernel draws figures at 200 dpi, large even in the plain template: one is made small here.)
    page.evaluate("() => { const img = document.querySelector('.jp-OutputArea-output img');"
                  " img.style.width = '300px'; img.style.height = 'auto'; img.style.maxWidth = '300px'; }")
    assert checks.small_or_off_centre(page), "small figures went unseen"
    assert leaving, "requests to a CDN went unseen"
    page.route("**/voila/api/shutdown/**", lambda route: route.abort())
    assert not leave(page, voila_server, kernel, timeout_s=5, keep_routes=True), "a kernel left running went unseen"
    shut_down(voila_server, kernel)
    assert not kernel_running(voila_server, kernel)

    # A page that draws its first content after 1.5 s …
    (scratch / "late").mkdir(exist_ok=True)
    (scratch / "late" / "index.html").write_text(LATE_PAGE)
    with static_site(scratch / "late") as base:
        page.goto(f"{base}/index.html")
        assert checks.first_paint_ms(page, timeout_ms=10_000) >= 1_500
        # … and whose cells never finish: the wait gives up once nothing moves.
        with pytest.raises(AssertionError, match="no cell finished for"):
            checks.wait_until_all_cells_ran(page, stall_ms=1_000, timeout_ms=5_000)

    # Voilà's known version warnings pass; any other warning or error does not.
    known = ("warning", "Unsatisfied version 4.2.5 from _JUPYTERLAB.CORE_OUTPUT of shared singleton module "
             "@jupyterlab/console (required ^4.6.2)")
    assert checks.unexpected_console([known]) == []
    assert checks.unexpected_console([known, ("warning", "something else"), ("error", "x")]) == [
        "warning: something else", "error: x"]
