"""Drive a notebook in JupyterLab: open it, Run All from the menu, wait, inspect."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from ._servers import ServerProcess

KERNEL_IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"

# Execution counts of the code cells that Run All must execute. Lab leaves empty
# code cells unexecuted, so they are left out. "[*]:" (queued/running) and "[ ]:"
# give null.
PROMPT_COUNTS_JS = """
() => [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell')]
  .filter((cell) => (cell.querySelector('.cm-content')?.textContent ?? 'x').trim() !== '')
  .map((cell) => {
    const match = /^\\[(\\d+)\\]:$/.exec(cell.querySelector('.jp-InputPrompt')?.textContent.trim() ?? '');
    return match ? Number(match[1]) : null;
  })
"""

KERNEL_READY_JS = """
(idle) => {
  const name = document.querySelector('.jp-NotebookPanel .jp-KernelName')?.textContent.trim() ?? '';
  return name !== '' && name !== 'No Kernel' && document.querySelector(idle) !== null
    && document.querySelector('.jp-Dialog') === null;
}
"""

FINISHED_JS = (
    "([before, idle]) => {\n"
    f"  const counts = ({PROMPT_COUNTS_JS.strip()})();\n"
    "  return counts.length > 0 && counts.every((n) => n !== null && n > before)\n"
    "    && document.querySelector(idle) !== null;\n"
    "}"
)


def open_notebook(page: Page, server: ServerProcess, name: str, timeout_ms: float = 300_000) -> None:
    """Open `name` with a fresh layout and wait until its own kernel runs and is idle.

    The status bar reads idle even before a kernel exists, so readiness is the
    kernel name in the toolbar plus the idle indicator. A "Select Kernel" dialog
    (should the settings not prevent it) is answered with the default choice.
    """
    page.goto(server.url(f"/lab/tree/{quote(name)}?reset"))
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count():
            dialog.first.click()
        if page.evaluate(KERNEL_READY_JS, KERNEL_IDLE):
            return
        page.wait_for_timeout(200)
    raise TimeoutError(f"{name}: no idle kernel after {timeout_ms / 1000:.0f} s")


def code_cell_counts(page: Page) -> list[int | None]:
    """Execution counts shown in the prompts of the non-empty code cells."""
    return page.evaluate(PROMPT_COUNTS_JS)


def run_all(page: Page, timeout_ms: float) -> float:
    """Run every cell through the Run menu; returns seconds until all ran and the kernel idles."""
    before = max((n for n in code_cell_counts(page) if n is not None), default=0)
    started = time.monotonic()
    page.locator("#jp-MainMenu .lm-MenuBar-item").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
    try:
        page.wait_for_function(FINISHED_JS, arg=[before, KERNEL_IDLE], polling=100, timeout=timeout_ms)
    except PlaywrightTimeoutError:
        raise AssertionError(
            f"Run All did not finish within {timeout_ms / 1000:.0f} s; execution counts "
            f"(must all exceed {before}): {code_cell_counts(page)}"
        ) from None
    return time.monotonic() - started


def screenshot_notebook(page: Page, path: Path, max_height: int = 16_000) -> None:
    """Screenshot the whole notebook, not only the part Lab scrolls into view.

    Lab scrolls inside its own panel, so the window is made as tall as the
    notebook for the shot and restored afterwards.
    """
    viewport = page.viewport_size
    hidden = page.evaluate(
        "() => { const o = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');"
        " return o ? o.scrollHeight - o.clientHeight : 0; }"
    )
    if hidden > 0 and viewport:
        height = min(viewport["height"] + hidden + 40, max_height)
        page.set_viewport_size({"width": viewport["width"], "height": height})
        page.wait_for_timeout(400)  # let Lab lay the panels out again
    try:
        page.locator(".jp-NotebookPanel").first.screenshot(path=path)
    finally:
        if viewport:
            page.set_viewport_size(viewport)
            page.wait_for_timeout(200)
