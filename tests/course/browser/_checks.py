"""What a course page must not show, measured in the page itself.

Each check returns what it found (an empty list means the page passes), so a test can
assert on it and another test can prove, on a page that is bad on purpose, that it fires.
Shared by the static site, JupyterLab and Voilà tests.
"""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page

# In JupyterLab 4 and Voilà 0.5 a traceback renders as a stderr output, like a warning;
# `…/vnd.jupyter.error` matches nothing there. Either one in a course notebook is a bug.
STDERR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
# Printed text as the page renders it (JupyterLab's output area), and as the server renders it
# for a cell a preheated kernel has already run (nbconvert's lab template: plain text).
STDOUT_OUTPUT = (".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout'], "
                 ".jp-OutputArea-output.jp-RenderedText[data-mime-type='text/plain']")
# Pictures in output areas: inline plots, an interact's plot, a LiveFigure's ipywidgets Image.
FIGURE = ".jp-OutputArea-output img"

# Formulas left as TeX on a page: $…$, $$…$$, \(…\), \[…\] and \begin{…} in text outside
# code, plus formulas MathJax typeset as an error (unknown macro, bad syntax). Text is
# joined per block element, so a formula split by Markdown emphasis is still found.
RAW_TEX_JS = r"""
() => {
  const SKIP = 'script, style, pre, code, textarea, math, [class*="MathJax"], [class*="MJX"], mjx-container';
  const BLOCK = 'p, li, td, th, h1, h2, h3, h4, h5, h6, dt, dd, blockquote, figcaption, div, section, main, body';
  const parts = [];
  let lastBlock = null;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement && node.parentElement.closest(SKIP)
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const block = node.parentElement.closest(BLOCK);
    if (block !== lastBlock) { parts.push('\u0000'); lastBlock = block; }
    parts.push(node.nodeValue);
  }
  const patterns = [/\$\$[^\u0000]*?\$\$/g, /\$[^$\u0000]+?\$/g, /\\\([^\u0000]*?\\\)/g,
                    /\\\[[^\u0000]*?\\\]/g, /\\begin\{[a-zA-Z*]+\}/g];
  const raw = [];
  let text = parts.join('');
  for (const pattern of patterns) {
    text = text.replace(pattern, (match) => { raw.push(match.replace(/\s+/g, ' ').slice(0, 80)); return ' '; });
  }
  const failed = (node) => !!node && (node.type === 'merror' || (node.type === 'mtext' && node.mathcolor === 'red')
    || (node.data || []).some(failed));
  const jaxes = window.MathJax && MathJax.Hub && MathJax.Hub.getAllJax ? MathJax.Hub.getAllJax() : [];
  const errors = jaxes.filter((jax) => failed(jax.root)).map((jax) => jax.originalText.trim().slice(0, 80));
  return { raw, errors, typeset: jaxes.length };
}
"""

# Where each figure is drawn, in CSS pixels: the picture itself, not its box (with
# `object-fit: contain` a box wider than the picture leaves margins inside it).
FIGURES_JS = """
(selector) => [...document.querySelectorAll(selector)].filter((img) => img.naturalWidth > 0).map((img) => {
  const box = img.getBoundingClientRect();
  const contain = getComputedStyle(img).objectFit === 'contain';
  const scale = contain ? Math.min(box.width / img.naturalWidth, box.height / img.naturalHeight) : null;
  const width = contain ? img.naturalWidth * scale : box.width;
  const height = contain ? img.naturalHeight * scale : box.height;
  return { src: (img.getAttribute('src') || '').slice(0, 40), width, height,
           centre: box.left + box.width / 2, natural: [img.naturalWidth, img.naturalHeight] };
})
"""

# A hash of each figure's pixels: the same picture shown twice hashes the same, whatever
# its encoding (an inline PNG and a widget's blob carry different bytes).
FIGURE_HASHES_JS = """
(selector) => [...document.querySelectorAll(selector)].filter((img) => img.naturalWidth > 0).map((img) => {
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext('2d');
  context.drawImage(img, 0, 0);
  const pixels = new Uint32Array(context.getImageData(0, 0, canvas.width, canvas.height).data.buffer);
  let hash = 2166136261;
  for (let i = 0; i < pixels.length; i++) { hash = Math.imul(hash ^ pixels[i], 16777619); }
  return `${canvas.width}x${canvas.height}:${(hash >>> 0).toString(16)}`;
})
"""

# Voilà's page and its widgets are built against different @jupyterlab versions. Voilà
# 0.5.13 bundles @jupyterlab/* 4.2.5 in its own app, while the widget extensions it loads
# were built later: its own widgets-manager8 against 4.5.10 and ipywidgets 8.1.9's
# jupyterlab_widgets 3.0.17 against 4.6.2. Module federation then warns for every shared
# module ("Unsatisfied version 4.2.5 … (required ^4.6.2)"). These are not strict
# requirements: Voilà's copy is used and the widgets work, as the slider tests show. No
# release of either package pairs up (Voilà 0.5.13 is the newest; ipywidgets 8.1.9 needs
# jupyterlab_widgets 3.0.17), so exactly these warnings are known; any other fails.
KNOWN_VOILA_WARNING = re.compile(
    r"^(Unsatisfied version \d+\.\d+\.\d+ from _JUPYTERLAB\.CORE_OUTPUT of shared singleton module "
    r"@jupyterlab/[a-z-]+ \(required \^\d+\.\d+\.\d+\)"
    r"|No satisfying version \(\^\d+\.\d+\.\d+\) of shared module @jupyterlab/[a-z-]+ found in shared scope "
    r"default\.\nAvailable versions: \d+\.\d+\.\d+ from _JUPYTERLAB\.CORE_OUTPUT)$"
)


# Installed into every page (BrowserContext.add_init_script); active on Voilà pages only.
# Records, on the browser's clock (ms since navigation started), when the first notebook
# content (a heading, an output), the first live figure and the first stored picture (the
# classroom's poster or preview) were drawn, whether Voilà's per-cell placeholders have
# appeared yet (before they do, "none pending" means nothing), and whether Voilà's
# "Executing N of M" spinner was ever on screen.
PAINT_SCRIPT = """
window.__prenormPaint = (() => {
  const marks = { content: null, figure: null, preview: null, placeholders: false, shift: 0, spinner: false };
  const watchSpinner = () => {
    const loading = document.getElementById('loading');
    if (loading && getComputedStyle(loading).display !== 'none' && loading.getBoundingClientRect().height > 0) {
      marks.spinner = true;
    }
    if (document.readyState !== 'complete' && !marks.spinner) requestAnimationFrame(watchSpinner);
  };
  requestAnimationFrame(watchSpinner);
  // Cumulative layout shift: every unexpected move of content already on screen, summed
  // (Chromium's Layout Instability API; shifts right after an input do not count).
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) if (!entry.hadRecentInput) marks.shift += entry.value;
    }).observe({ type: 'layout-shift', buffered: true });
  } catch (error) { marks.shift = null; }
  const drawn = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const onScreen = (e) => drawn(e) && e.getBoundingClientRect().top < window.innerHeight;
  const look = () => {
    if (document.body && !document.body.hasAttribute('data-voila')) return;
    const now = performance.now();
    if (marks.content === null && [...document.querySelectorAll(
        '.jp-Cell .jp-RenderedMarkdown, .jp-Cell .jp-OutputArea-output')].some(onScreen)) marks.content = now;
    if (marks.figure === null && [...document.querySelectorAll('.jp-OutputArea-output img')]
        .some((img) => img.complete && img.naturalWidth > 0 && drawn(img))) marks.figure = now;
    if (marks.preview === null && [...document.querySelectorAll('.classroom-preview img')]
        .some((img) => img.complete && img.naturalWidth > 0 && drawn(img))) marks.preview = now;
    marks.placeholders = marks.placeholders || document.querySelector('.voila-skeleton-container') !== null;
    if (marks.content === null || marks.figure === null || !marks.placeholders) requestAnimationFrame(look);
    else if (marks.preview === null && document.querySelector('.classroom-preview img')) requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
  new MutationObserver((records, observer) => {
    if (document.body && !document.body.hasAttribute('data-voila')) observer.disconnect();
    else if (document.querySelector('.voila-skeleton-container')) { marks.placeholders = true; observer.disconnect(); }
  }).observe(document, { childList: true, subtree: true });
  return marks;
})();
"""
# Voilà's progressive rendering (cells run from the page) puts a placeholder in every cell until its result arrives.
PENDING_CELL = ".voila-skeleton-container"


def first_paint_ms(page: Page, timeout_ms: float) -> float:
    """Milliseconds from navigation to the first notebook content drawn on screen."""
    page.wait_for_function("() => window.__prenormPaint.content !== null", polling=100, timeout=timeout_ms)
    return page.evaluate("() => window.__prenormPaint.content")


def wait_until_all_cells_ran(page: Page, stall_ms: float, timeout_ms: float) -> float:
    """Wait until no Voilà cell is pending; returns ms since navigation.

    Fails when no cell finished for `stall_ms` (a stuck page), or after `timeout_ms`.
    """
    # With placeholders (cells run from the page) a pending cell shows one; with a preheated
    # kernel the server sends the cells as they are done, and the page is complete after the last.
    pending_js = ("(pending) => (window.__prenormPaint.placeholders || document.readyState === 'complete')"
                  " ? [...document.querySelectorAll(pending)]"
                  ".map((e) => e.closest('[cell-index]')?.getAttribute('cell-index')) : null")
    started = last_change = time.monotonic()
    last = None
    while True:
        pending = page.evaluate(pending_js, PENDING_CELL)
        now = time.monotonic()
        if pending == []:
            return page.evaluate("() => performance.now()")
        if pending != last:
            last, last_change = pending, now
        if now - last_change > stall_ms / 1000 or now - started > timeout_ms / 1000:
            raise AssertionError(f"no cell finished for {now - last_change:.0f} s ({now - started:.0f} s in all); "
                                 f"pending (cell-index): {pending}")
        page.wait_for_timeout(250)


def wait_for_mathjax(page: Page, timeout_ms: float = 180_000) -> None:
    """Wait until MathJax has typeset the page, if the page loads MathJax at all."""
    if page.evaluate("() => !!window.MathJax"):
        page.wait_for_selector("html[data-mathjax='typeset']", state="attached", timeout=timeout_ms)


def raw_tex(page: Page) -> list[str]:
    """Formulas left as TeX source on the page, and formulas MathJax could not typeset."""
    found = page.evaluate(RAW_TEX_JS)
    return found["raw"] + [f"MathJax error: {text}" for text in found["errors"]]


def error_outputs(page: Page, scope: str = "") -> list[str]:
    """Text of every traceback or stderr output on the page (under `scope`, a selector)."""
    return page.locator(f"{scope} {STDERR_OUTPUT}".strip()).all_inner_texts()


def printed_text(page: Page, kept: str) -> list[str]:
    """Printed (stdout) outputs outside the cells matching `kept`, a selector."""
    return page.evaluate(
        "([selector, kept]) => [...document.querySelectorAll(selector)]"
        ".filter((e) => !e.closest(kept)).map((e) => e.innerText.slice(0, 80))",
        [STDOUT_OUTPUT, kept],
    )


def figures(page: Page) -> list[dict]:
    """Size and position of every figure on the page."""
    return page.evaluate(FIGURES_JS, FIGURE)


def small_or_off_centre(page: Page, min_fraction: float = 0.6, centre_tolerance: float = 0.03) -> list[str]:
    """Figures narrower than `min_fraction` of the window (and shorter than that fraction
    of its height), or whose centre is off the window's centre by more than `centre_tolerance`."""
    width, height = page.evaluate("() => [document.documentElement.clientWidth, window.innerHeight]")
    problems = []
    for figure in figures(page):
        if figure["width"] < min_fraction * width and figure["height"] < min_fraction * height:
            problems.append(f"{figure['src']}…: {figure['width']:.0f}×{figure['height']:.0f} px in a "
                            f"{width}×{height} window (natural {figure['natural'][0]}×{figure['natural'][1]})")
        if abs(figure["centre"] - width / 2) > centre_tolerance * width:
            problems.append(f"{figure['src']}…: centred at x = {figure['centre']:.0f}, the window's centre is "
                            f"{width / 2:.0f}")
    return problems


def duplicate_figures(page: Page) -> list[str]:
    """Figures whose pixels are identical to an earlier figure's on the same page."""
    seen: dict[str, int] = {}
    duplicates = []
    for index, digest in enumerate(page.evaluate(FIGURE_HASHES_JS, FIGURE)):
        if digest in seen:
            duplicates.append(f"figure {index + 1} repeats figure {seen[digest] + 1} ({digest})")
        seen.setdefault(digest, index)
    return duplicates


def unexpected_console(messages: list[tuple[str, str]]) -> list[str]:
    """Console errors, and warnings other than Voilà's known version warnings."""
    return [f"{kind}: {text}" for kind, text in messages
            if kind == "error" or (kind == "warning" and not KNOWN_VOILA_WARNING.match(text))]


# Each slider with the figure it moves: the nearest box around the slider that holds a picture.
SLIDER_SCOPES_JS = """
() => [...document.querySelectorAll('.widget-slider')].map((slider) => {
  let scope = slider.parentElement;
  while (scope && !scope.querySelector('img')) scope = scope.parentElement;
  const label = (slider.querySelector('.widget-label')?.textContent || '').trim();
  const box = (scope || slider).getBoundingClientRect();
  const handle = slider.querySelector('.noUi-handle[role="slider"]');
  return { label, height: box.height, width: box.width,
           name: handle?.getAttribute('aria-label') || null, text: handle?.getAttribute('aria-valuetext') || null,
           readout: (slider.querySelector('.widget-readout')?.textContent || '').trim() };
})
"""


def sliders_taller_than_the_screen(page: Page) -> list[str]:
    """Sliders that do not fit on one screen together with their figure."""
    height = page.evaluate("() => window.innerHeight")
    return [f"{scope['label']!r} and its figure: {scope['height']:.0f} px in a {height} px window"
            for scope in page.evaluate(SLIDER_SCOPES_JS) if scope["height"] > height]


def sliders_without_words(page: Page) -> list[str]:
    """Slider knobs with no accessible name, or whose value text is not "<name> = <readout>"."""
    return [f"{scope['label']!r}: aria-label {scope['name']!r}, aria-valuetext {scope['text']!r}"
            for scope in page.evaluate(SLIDER_SCOPES_JS)
            if not scope["name"] or scope["text"] != f"{scope['name']} = {scope['readout']}"]


def overflowing_text(page: Page) -> list[str]:
    """Printed blocks whose lines do not fit their box (each would wrap or be cut)."""
    return page.evaluate(
        "(selector) => [...document.querySelectorAll(selector)].flatMap((out) => [...out.querySelectorAll('pre')])"
        ".filter((pre) => pre.offsetParent && pre.scrollWidth > pre.clientWidth + 1)"
        ".map((pre) => `${pre.textContent.slice(0, 60)}… (${pre.scrollWidth} px in ${pre.clientWidth})`)",
        STDOUT_OUTPUT,
    )


MIN_TABLE_PX = 20  # a table read from the back of a room: the size of the verdict lines beside it


def small_or_wide_tables(page: Page, min_px: float = MIN_TABLE_PX) -> list[str]:
    """Tables (verdict tables, paired statistics) drawn under `min_px` or wider than the window."""
    return page.evaluate(
        """(minPx) => [...document.querySelectorAll('.jp-Cell table')].filter((t) => t.offsetParent).flatMap((t) => {
          const cell = t.querySelector('td, th') || t;
          const size = parseFloat(getComputedStyle(cell).fontSize);
          const right = t.getBoundingClientRect().right, width = document.documentElement.clientWidth;
          const name = (t.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 50);
          return [...(size < minPx ? [`${name}…: ${size} px text`] : []),
                  ...(right > width + 1 ? [`${name}…: ends at ${Math.round(right)} px in a ${width} px window`] : [])];
        })""",
        min_px,
    )


def cut_labels(page: Page) -> list[str]:
    """Slider labels whose text does not fit their box (shown cut, "positi…")."""
    return page.evaluate(
        "() => [...document.querySelectorAll('.widget-slider .widget-label, .widget-inline-hbox .widget-label')]"
        ".filter((label) => label.offsetParent && label.scrollWidth > label.clientWidth + 1)"
        ".map((label) => `'${label.textContent.trim()}': ${label.scrollWidth} px of text in ${label.clientWidth} px`)"
    )


# A code cell is clipped when a line of its code or printed output can be neither seen nor
# scrolled to: a box on the way out hides the overflow, or the line runs past the window.
CLIPPED_CODE_JS = r"""
() => {
  const width = document.documentElement.clientWidth;
  const why = (pre) => {
    if (!pre.offsetParent) return null;
    for (let box = pre; box && box !== document.body; box = box.parentElement) {
      const overflow = getComputedStyle(box).overflowX;
      const over = box.scrollWidth > box.clientWidth + 1;
      if (over && (overflow === 'auto' || overflow === 'scroll')) return null;
      const name = box.classList[0] || box.tagName;
      if (over && (overflow === 'hidden' || overflow === 'clip')) return `hidden by .${name}`;
    }
    const right = pre.getBoundingClientRect().left + pre.scrollWidth;
    return right > width + 1 ? `runs to ${Math.round(right)} px in a ${width} px window` : null;
  };
  return [...document.querySelectorAll('.jp-CodeCell')].flatMap((cell, index) => {
    const found = [...cell.querySelectorAll('pre')].map(why).find(Boolean);
    return found ? [`code cell ${index + 1}: ${found}`] : [];
  });
}
"""


def clipped_code(page: Page) -> list[str]:
    """Code cells with a line that can be neither seen nor scrolled to."""
    return page.evaluate(CLIPPED_CODE_JS)
