"""The static course site (`make site`), opened and clicked through in Chromium.

The site is built from the committed executed notebooks into a temporary
folder, served from a loopback HTTP server, and every link from the index is
followed: each page answers 200, has a title, logs no console error and shows
every image. Any request that would leave 127.0.0.1 (a CDN) fails the test.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import nbformat
import pytest

from prenorm_lib import site

from ._chromium import block_external_requests
from ._servers import static_site
from .conftest import REPO_ROOT, course_notebooks, notebook_folder

IMAGES_LOADED_JS = """
() => [...document.images].map((img) => ({ src: img.src.slice(0, 80), ok: img.complete && img.naturalWidth > 0 }))
"""


def widget_views(notebook: Path) -> int:
    """How many widget outputs the stored notebook has (each becomes a note on its page)."""
    node = nbformat.read(notebook, as_version=4)
    return sum(site.WIDGET_VIEW in output.get("data", {})
               for cell in node.cells if cell.cell_type == "code" for output in cell.outputs)


@pytest.fixture(scope="module")
def built_site(scratch: Path) -> Path:
    if not course_notebooks():
        pytest.skip(f"no [0-9][0-9]_*.ipynb notebooks in {notebook_folder()}")
    figures = Path(os.environ.get("PRENORM_FIGURES", REPO_ROOT / "figures"))
    out = scratch / "site"
    try:
        site.build(notebook_folder(), figures, out)
    except ValueError as error:
        pytest.fail(f"make site cannot build the course: {error}", pytrace=False)
    return out


def test_every_page_and_image_of_the_site_loads(page, built_site: Path, artifacts: Path,
                                                 timing_report) -> None:
    leaving = block_external_requests(page)
    with static_site(built_site) as base:
        queue, seen, pages, images, slowest = [f"{base}/index.html"], set(), 0, 0, 0.0
        while queue:
            url = queue.pop(0)
            if url in seen:
                continue
            seen.add(url)
            if not url.endswith(".html"):  # downloads and full-size figures: just reachable
                response = page.request.get(url)
                assert response.status == 200, f"{url}: HTTP {response.status}"
                continue
            started = time.monotonic()
            response = page.goto(url, wait_until="load")
            slowest = max(slowest, time.monotonic() - started)
            assert response is not None and response.status == 200, f"{url}: HTTP {response and response.status}"
            assert page.title().strip(), f"{url}: page has no title"
            broken = [image["src"] for image in page.evaluate(IMAGES_LOADED_JS) if not image["ok"]]
            assert not broken, f"{url}: images that did not load: {broken}"
            images += len(page.evaluate(IMAGES_LOADED_JS))
            pages += 1
            name = url.removeprefix(base + "/").replace("/", "_").removesuffix(".html")
            page.screenshot(path=artifacts / f"site_{name}.png", full_page=True)
            for href in page.eval_on_selector_all("a[href]", "(links) => links.map((a) => a.getAttribute('href'))"):
                target = urldefrag(urljoin(url, href)).url
                if target.startswith(base) and target not in seen:
                    queue.append(target)
        errors = [text for text in page.console_errors if "favicon" not in text]
        assert not errors, f"console errors: {errors}"
        assert not leaving, f"the site tried to load from outside: {leaving}"
        lessons = course_notebooks()
        assert pages >= len(lessons) + 1, f"only {pages} pages reached from the index"
        for notebook in lessons:
            expected = widget_views(notebook)
            page.goto(f"{base}/{notebook.stem}.html")
            notes = page.locator(".static-widget-note").count()
            assert notes == expected, f"{notebook.stem}: {notes} slider notes for {expected} widget outputs"
    timing_report.site = {"pages": pages, "images": images, "links": len(seen),
                          "slowest_load_ms": round(slowest * 1000, 1)}
