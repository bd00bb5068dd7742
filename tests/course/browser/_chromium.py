"""Find the system Chromium and launch it headless for Playwright.

The course never downloads a browser: Playwright drives the distribution's
Chromium through `executable_path`. Without one, the browser tests skip, unless
PRENORM_REQUIRE_BROWSER=1 (set by CI) turns the skip into a failure.
"""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlparse

import pytest

CANDIDATE_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Headless, offline and quiet: no GPU, no QUIC, no background calls home.
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

VIEWPORT = {"width": 1280, "height": 900}


def browser_required() -> bool:
    """CI sets PRENORM_REQUIRE_BROWSER=1 so a missing browser fails instead of skipping."""
    return os.environ.get("PRENORM_REQUIRE_BROWSER", "") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip the test with `reason`, or fail with it when a browser is required."""
    if browser_required():
        pytest.fail(f"{reason} (PRENORM_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


def find_chromium() -> str | None:
    """PRENORM_CHROMIUM if set, else the first Chromium-like browser on PATH."""
    explicit = os.environ.get("PRENORM_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in CANDIDATE_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def block_external_requests(page) -> list[str]:
    """Abort every request that would leave 127.0.0.1; returns the list they are recorded in.

    The course must work without a network, so anything fetched from elsewhere
    is a bug to report, not something to wait for a DNS timeout on.
    """
    leaving: list[str] = []

    def keep_local(route) -> None:
        if urlparse(route.request.url).hostname in ("127.0.0.1", None):
            route.continue_()
        else:
            leaving.append(route.request.url)
            route.abort()

    page.route("**/*", keep_local)
    return leaving


# How far the page's largest scrolling box (the document or an inner panel) overflows.
HIDDEN_HEIGHT_JS = """
() => Math.max(0, ...[document.scrollingElement, ...document.querySelectorAll('*')]
  .filter((e) => e && e.scrollHeight > e.clientHeight + 1
    && (e === document.scrollingElement || /(auto|scroll)/.test(getComputedStyle(e).overflowY)))
  .map((e) => e.scrollHeight - e.clientHeight))
"""


def screenshot_whole_page(page, path, max_height: int = 16_000) -> None:
    """Screenshot everything, also when the app scrolls inside a panel of its own.

    `full_page=True` only unrolls the document; apps such as Voilà and Lab scroll
    an inner box, so the window is made tall enough for the shot, then restored.
    """
    viewport = page.viewport_size
    hidden = page.evaluate(HIDDEN_HEIGHT_JS)
    if hidden > 0 and viewport:
        page.set_viewport_size({"width": viewport["width"],
                                "height": min(viewport["height"] + hidden, max_height)})
        page.wait_for_timeout(400)  # let the app lay itself out again
    try:
        page.screenshot(path=path, full_page=True)
    finally:
        if viewport:
            page.set_viewport_size(viewport)
            page.wait_for_timeout(200)
