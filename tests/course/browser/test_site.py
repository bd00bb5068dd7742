"""The static course site (`make site`), opened and clicked through in Chromium.

The site is built from the committed executed notebooks into a temporary
folder, served from a loopback HTTP server, and every link from the index is
followed: each page answers 200, has a title, logs no console error or warning,
shows every image, and leaves no formula as TeX source once MathJax (served by
the site itself) has typeset it. Any request that would leave 127.0.0.1 (a CDN)
fails the test. Each slider appears as a note followed by a picture.

`test_the_raw_tex_check_fires` shows the formula check failing on a page without
MathJax and on a formula MathJax cannot typeset. `test_no_code_is_cut_off` opens every
notebook page at a phone's 390 px and a laptop's 1366 px and counts the code cells with a
line that can be neither seen nor scrolled to: there must be none (the check is seen to fire
on a page given nbconvert's overflow back).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import nbformat
import pytest

from prenorm_course import site, stored_widgets

from . import _checks as checks
from ._chromium import block_external_requests
from ._servers import static_site
from .conftest import REPO_ROOT, course_notebooks, notebook_folder

IMAGES_LOADED_JS = """
() => [...document.images].map((img) => ({ src: img.src.slice(0, 80), ok: img.complete && img.naturalWidth > 0 }))
"""


def widget_views(notebook: Path) -> int:
    """How many widget outputs the stored notebook has (each becomes a note on its page)."""
    node = nbformat.read(notebook, as_version=4)
    return sum(stored_widgets.WIDGET_VIEW in output.get("data", {})
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
        formulas: dict[str, dict[str, int]] = {}
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
            checks.wait_for_mathjax(page)
            slowest = max(slowest, time.monotonic() - started)
            assert response is not None and response.status == 200, f"{url}: HTTP {response and response.status}"
            assert page.title().strip(), f"{url}: page has no title"
            name = url.removeprefix(base + "/")
            raw = checks.raw_tex(page)
            formulas[name] = {"typeset": page.evaluate(checks.RAW_TEX_JS)["typeset"], "raw_tex": len(raw)}
            assert not raw, f"{url}: {len(raw)} formulas left as TeX source: {raw[:5]}"
            broken = [image["src"] for image in page.evaluate(IMAGES_LOADED_JS) if not image["ok"]]
            assert not broken, f"{url}: images that did not load: {broken}"
            images += len(page.evaluate(IMAGES_LOADED_JS))
            pages += 1
            page.screenshot(path=artifacts / f"site_{name.replace('/', '_').removesuffix('.html')}.png",
                            full_page=True)
            for href in page.eval_on_selector_all("a[href]", "(links) => links.map((a) => a.getAttribute('href'))"):
                target = urldefrag(urljoin(url, href)).url
                if target.startswith(base) and target not in seen:
                    queue.append(target)
        errors = checks.unexpected_console(page.console)
        assert not errors, f"console errors or warnings: {errors}; failed requests: {page.failed_requests}"
        assert not leaving, f"the site tried to load from outside: {leaving}"
        lessons = course_notebooks()
        assert pages >= len(lessons) + 1, f"only {pages} pages reached from the index"
        for notebook in lessons:
            expected = widget_views(notebook)
            page.goto(f"{base}/{site.page_stem(notebook)}.html")
            notes = page.locator(".static-widget-note").count()
            assert notes == expected, f"{notebook.stem}: {notes} slider notes for {expected} widget outputs"
            pictures = page.locator(".jp-OutputArea:has(.static-widget-note) img").count()
            assert pictures >= expected, f"{notebook.stem}: {pictures} pictures for {expected} slider notes"
    timing_report.site.update({"pages": pages, "images": images, "links": len(seen),
                               "slowest_load_ms": round(slowest * 1000, 1), "formulas": formulas})


def test_the_raw_tex_check_fires(page, built_site: Path, scratch: Path) -> None:
    # Formulas on a page that loads no MathJax stay TeX: inline, display, \( \), environments.
    page.set_content("<p>The norm $\\sqrt{x}$ of <em>a</em> and</p><p>$$\\frac{a}{b}$$</p>"
                     "<ul><li>\\(x\\) and \\begin{aligned} x \\end{aligned}</li></ul>"
                     "<pre>$not a formula$</pre><code>$nor this$</code>")
    assert len(checks.raw_tex(page)) == 4, checks.raw_tex(page)
    # A formula MathJax cannot typeset, on a page of the site (MathJax served by the site).
    bad = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# Bad maths\n\nFine: $x^2$. Unknown macro: $\\notamacro{x}$. Unbalanced: $\\frac{a}{b$.")])
    nbformat.write(bad, scratch / "bad_maths.ipynb")
    builder = site.SiteBuilder(scratch, scratch, built_site)
    builder.render_notebook(scratch / "bad_maths.ipynb", built_site / "bad_maths.html",
                            {"root": "", "title": "Bad maths", "exercise": True, "download": None,
                             "previous": None, "next": None}, executed=False)
    with static_site(built_site) as base:
        page.goto(f"{base}/bad_maths.html")
        checks.wait_for_mathjax(page)
        found = checks.raw_tex(page)
    assert found == ["MathJax error: \\notamacro{x}", "MathJax error: \\frac{a}{b"], found


SITE_WIDTHS = (390, 1366)


def test_no_code_is_cut_off(page, built_site: Path, timing_report) -> None:
    lessons = [site.page_stem(notebook) for notebook in course_notebooks()]
    pages = [*lessons, *(f"exercises/{stem}" for stem in lessons)]
    clipped: dict[str, list[str]] = {}
    with static_site(built_site) as base:
        for width in SITE_WIDTHS:
            page.set_viewport_size({"width": width, "height": 800})
            for name in pages:
                page.goto(f"{base}/{name}.html", wait_until="load")
                assert page.locator(".jp-CodeCell").count(), f"{name}: no code cells to check"
                if found := checks.clipped_code(page):
                    clipped[f"{name} at {width} px"] = found
        # The check fires: nbconvert's own rule (the editor hides what does not fit) put back on one page.
        page.set_viewport_size({"width": SITE_WIDTHS[0], "height": 800})
        page.goto(f"{base}/{lessons[0]}.html", wait_until="load")
        page.add_style_tag(content="body .jp-InputArea-editor { overflow: hidden !important; }")
        cut = checks.clipped_code(page)
    timing_report.site["clipped_code_cells"] = {width: sum(key.endswith(f" {width} px") for key in clipped)
                                                for width in SITE_WIDTHS}
    assert cut and all("hidden by .jp-CodeMirrorEditor" in found for found in cut), cut
    assert not clipped, "code cut off on the site:\n" + "\n".join(f"- {k}: {v[:3]}" for k, v in clipped.items())
