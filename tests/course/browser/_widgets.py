"""Move ipywidgets sliders like a person would, and time how long the new picture takes.

Shared by the JupyterLab and the Voilà tests. A slider's "scope" is the widget box that
holds it and what it draws: a LiveFigure's VBox (controls, `ipywidgets.Image`, `Output`
for tracebacks), an `interact`'s box, or else the output area of its cell. The page
itself records, on the browser's clock, when the knob moved and when a new image in the
scope finished loading (a LiveFigure sets a new `src` on the same `img`; an `interact`
puts a new `img` in its output), so a latency is key press → new picture on screen.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from playwright.sync_api import ElementHandle, Locator, Page

SLIDER = ".widget-slider"
KNOB = ".noUi-handle[role='slider']"

# Installed into every page before its scripts run (BrowserContext.add_init_script).
WATCH_SCRIPT = """
window.__prenorm = (() => {
  const hash = (s) => {
    let h = 0;
    for (let i = 0; i < s.length; i++) { h = (h * 31 + s.charCodeAt(i)) | 0; }
    return h + '/' + s.length;
  };
  const scopeOf = (slider) => {
    for (let box = slider.parentElement; box; box = box.parentElement) {
      if (box.classList.contains('jp-OutputArea-output') || box.classList.contains('jp-Cell')) break;
      if (box.querySelector('.widget-image, .widget-output')) return box;
    }
    return slider.closest('.jp-OutputArea') || slider.closest('.jp-Cell') || document.body;
  };
  const snapshot = (scope) => {
    const clone = scope.cloneNode(true);
    clone.querySelectorAll('.widget-slider, .widget-hslider').forEach((e) => e.remove());
    const images = [...scope.querySelectorAll('img')].map((img) => hash(img.getAttribute('src') || ''));
    return hash(clone.textContent) + '|' + images.join(',');
  };
  const state = { scope: null, observer: null, baseline: null, lastChange: null, lastImage: null };
  const onLoad = (event) => { if (event.target.tagName === 'IMG') state.lastImage = performance.now(); };
  return {
    scopeOf,
    watch(slider) {
      if (state.observer) state.observer.disconnect();
      if (state.scope) state.scope.removeEventListener('load', onLoad, true);
      state.scope = scopeOf(slider);
      state.lastChange = null;
      state.lastImage = null;
      state.baseline = snapshot(state.scope);
      state.observer = new MutationObserver((records) => {
        for (const record of records) {
          const node = record.target.nodeType === 1 ? record.target : record.target.parentElement;
          if (node && node.closest('.widget-slider, .widget-hslider')) continue;
          state.lastChange = performance.now();
          return;
        }
      });
      state.observer.observe(state.scope, { subtree: true, childList: true, attributes: true, characterData: true });
      state.scope.addEventListener('load', onLoad, true);  // load does not bubble: listen while capturing
      return performance.now();
    },
    settled(quietMs, idleSelector) {
      if (snapshot(state.scope) === state.baseline) return false;
      if (idleSelector && !document.querySelector(idleSelector)) return false;
      const images = state.scope.querySelectorAll('img').length;
      const last = Math.max(state.lastChange ?? -Infinity, state.lastImage ?? -Infinity);
      if (images && state.lastImage === null) return false;
      return last > -Infinity && performance.now() - last >= quietMs;
    },
    // The moment the output was last redrawn: the last image load, else the last change.
    redrawnAt() { return state.lastImage ?? state.lastChange; },
    now() { return performance.now(); },
  };
})();
"""

# An output counts as redrawn once nothing in it changed for this long.
QUIET_MS = 300
KEY_PRESSES = 3  # per slider: the first press after a click can be slower than the rest


@dataclass
class SliderMove:
    """One slider movement: which slider, how, the values and the latency."""

    slider: str
    how: str
    before: str
    after: str
    latency_ms: float

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def slider_label(slider: Locator, index: int) -> str:
    """The slider's description (`c`, `scale`…) or its position on the page."""
    label = slider.locator(".widget-label").first
    text = label.inner_text().strip() if label.count() else ""
    return f"#{index} {text}".strip()


def _value(knob: Locator) -> str:
    return knob.get_attribute("aria-valuenow") or ""


def _state(slider: Locator) -> tuple[str, str]:
    """What the slider shows: its readout and where its knob sits on the track. (A log
    slider's aria-valuenow is rounded for display and may not change on a small step.)"""
    return tuple(slider.evaluate(
        "(s) => [s.querySelector('.widget-readout')?.textContent.trim() ?? '',"
        " s.querySelector('.noUi-origin')?.style.transform ?? '']"))


def _wait_for_redraw(page: Page, idle_selector: str | None, timeout_ms: float) -> float:
    page.wait_for_function(
        "([q, i]) => window.__prenorm.settled(q, i)",
        arg=[QUIET_MS, idle_selector], polling=50, timeout=timeout_ms,
    )
    return page.evaluate("window.__prenorm.redrawnAt()")


def move_by_keyboard(page: Page, slider: Locator, label: str, *,
                     idle_selector: str | None, timeout_ms: float = 180_000) -> SliderMove:
    """Focus the knob, press one arrow key, wait for the new picture."""
    knob = slider.locator(KNOB).first
    knob.scroll_into_view_if_needed()
    knob.focus()
    before = _state(slider)
    at_max = float(_value(knob)) >= float(knob.get_attribute("aria-valuemax") or "inf")
    key = "ArrowLeft" if at_max else "ArrowRight"
    start = page.evaluate("(s) => window.__prenorm.watch(s)", slider.element_handle())
    knob.press(key)
    moved = _state(slider)
    assert moved[1] != before[1], f"slider {label}: {key} left the knob where it was ({before[0]})"
    redrawn = _wait_for_redraw(page, idle_selector, timeout_ms)
    return SliderMove(label, f"key {key}", before[0], _state(slider)[0], redrawn - start)


def move_by_drag(page: Page, slider: Locator, label: str, *,
                 idle_selector: str | None, timeout_ms: float = 180_000) -> SliderMove:
    """Drag the knob along the track to the far quarter, wait for the new picture.

    The latency counts from releasing the mouse: with `continuous_update` the picture
    may already follow during the drag, and what a learner waits for is the picture
    after letting go.
    """
    knob = slider.locator(KNOB).first
    knob.scroll_into_view_if_needed()
    before = _state(slider)
    knob_box = knob.bounding_box()
    track = slider.locator(".noUi-base").first.bounding_box()
    assert knob_box and track, f"slider {label}: knob or track not visible"
    x = knob_box["x"] + knob_box["width"] / 2
    y = knob_box["y"] + knob_box["height"] / 2
    fraction = (x - track["x"]) / track["width"]
    target = track["x"] + track["width"] * (0.2 if fraction > 0.5 else 0.8)
    page.evaluate("(s) => window.__prenorm.watch(s)", slider.element_handle())
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(target, y, steps=8)
    page.mouse.up()
    released = page.evaluate("window.__prenorm.now()")
    assert _state(slider)[1] != before[1], f"slider {label}: dragging left the knob where it was ({before[0]})"
    redrawn = _wait_for_redraw(page, idle_selector, timeout_ms)
    return SliderMove(label, "drag", before[0], _state(slider)[0], max(0.0, redrawn - released))


def move_every_slider(page: Page, *, idle_selector: str | None, after_each=None,
                      only: list[int] | None = None) -> list[SliderMove]:
    """Move each slider on the page (or those at the indices `only`): KEY_PRESSES arrow
    presses, then one drag.

    `after_each(index, scope)`, if given, is called after each slider's moves with the
    slider's scope as an element handle (for a screenshot of the redrawn figure).
    """
    moves = []
    sliders = page.locator(SLIDER)
    for index in range(sliders.count()) if only is None else only:
        slider = sliders.nth(index)
        label = slider_label(slider, index)
        for _ in range(KEY_PRESSES):
            moves.append(move_by_keyboard(page, slider, label, idle_selector=idle_selector))
        moves.append(move_by_drag(page, slider, label, idle_selector=idle_selector))
        if after_each:
            after_each(index, scope_of(slider))
    return moves


def scope_of(slider: Locator) -> ElementHandle:
    """The box holding the slider and what it draws (for screenshots and error checks)."""
    return slider.evaluate_handle("(s) => window.__prenorm.scopeOf(s)").as_element()


def latency_summary(moves: list[SliderMove]) -> dict[str, dict[str, float]]:
    """Per slider: the median, 95th percentile and largest key-press latency, and the drag latency (ms)."""
    summary: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(move.slider for move in moves):
        keys = [m.latency_ms for m in moves if m.slider == name and m.how.startswith("key")]
        drags = [m.latency_ms for m in moves if m.slider == name and m.how == "drag"]
        summary[name] = {"key_median_ms": round(statistics.median(keys), 1) if keys else float("nan"),
                         "key_p95_ms": round(p95(keys), 1) if keys else float("nan"),
                         "key_max_ms": round(max(keys), 1) if keys else float("nan"),
                         "drag_ms": round(max(drags), 1) if drags else float("nan")}
    return summary


def p95(values: list[float]) -> float:
    """The 95th percentile (linear between the sorted values, as numpy's default); one value is its own."""
    return statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]


def over_budget(moves: list[SliderMove], budget_ms: float) -> list[str]:
    """Sliders whose key-press latency at the 95th percentile exceeds `budget_ms` (the course's goal: 100 ms)."""
    return [f"{name}: key press → new picture {values['key_p95_ms']:.0f} ms at p95 > {budget_ms:.0f} ms"
            for name, values in latency_summary(moves).items() if values["key_p95_ms"] > budget_ms]
