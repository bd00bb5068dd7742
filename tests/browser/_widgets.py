"""Move ipywidgets sliders like a person would, and time how long the output takes.

Shared by the JupyterLab and the Voilà tests. A slider's "output" is the
`.widget-output` of the `interact` it belongs to, or else the output area of its
cell. The page itself records when that output last changed (a MutationObserver
that ignores the slider's own knob and readout), so a latency is measured on the
browser's clock, from the input event to the last redraw, not on Python's.
"""

from __future__ import annotations

from dataclasses import dataclass

from playwright.sync_api import Locator, Page

SLIDER = ".widget-slider"
KNOB = ".noUi-handle[role='slider']"

# Installed into every page before its scripts run (Page.add_init_script).
WATCH_SCRIPT = """
window.__prenorm = (() => {
  const hash = (s) => {
    let h = 0;
    for (let i = 0; i < s.length; i++) { h = (h * 31 + s.charCodeAt(i)) | 0; }
    return h + '/' + s.length;
  };
  const scopeOf = (slider) => {
    const interact = slider.closest('.widget-interact');
    const out = interact && interact.querySelector('.widget-output');
    return out || slider.closest('.jp-OutputArea') || slider.closest('.jp-Cell') || document.body;
  };
  const snapshot = (scope) => {
    const clone = scope.cloneNode(true);
    clone.querySelectorAll('.widget-slider').forEach((e) => e.remove());
    const images = [...scope.querySelectorAll('img')].map((img) => hash(img.getAttribute('src') || ''));
    return hash(clone.textContent) + '|' + images.join(',');
  };
  const state = { observer: null, baseline: null, lastChange: null };
  return {
    scopeOf,
    watch(slider) {
      const scope = scopeOf(slider);
      if (state.observer) state.observer.disconnect();
      state.lastChange = null;
      state.baseline = snapshot(scope);
      state.observer = new MutationObserver((records) => {
        for (const record of records) {
          const node = record.target.nodeType === 1 ? record.target : record.target.parentElement;
          if (node && node.closest('.widget-slider')) continue;
          state.lastChange = performance.now();
          return;
        }
      });
      state.observer.observe(scope, { subtree: true, childList: true, attributes: true, characterData: true });
      return performance.now();
    },
    settled(slider, quietMs, idleSelector) {
      if (snapshot(scopeOf(slider)) === state.baseline) return false;
      if (idleSelector && !document.querySelector(idleSelector)) return false;
      return state.lastChange !== null && performance.now() - state.lastChange >= quietMs;
    },
    lastChange() { return state.lastChange; },
    now() { return performance.now(); },
  };
})();
"""

# An output counts as redrawn once nothing in it changed for this long.
QUIET_MS = 300


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


def _wait_for_redraw(page: Page, slider: Locator, idle_selector: str | None,
                     timeout_ms: float) -> float:
    handle = slider.element_handle()
    page.wait_for_function(
        "([s, q, i]) => window.__prenorm.settled(s, q, i)",
        arg=[handle, QUIET_MS, idle_selector], polling=50, timeout=timeout_ms,
    )
    return page.evaluate("window.__prenorm.lastChange()")


def move_by_keyboard(page: Page, slider: Locator, label: str, *,
                     idle_selector: str | None, timeout_ms: float = 60_000) -> SliderMove:
    """Click the knob, press one arrow key, wait for the output to redraw."""
    knob = slider.locator(KNOB).first
    knob.scroll_into_view_if_needed()
    knob.click()
    before = _value(knob)
    at_max = float(before) >= float(knob.get_attribute("aria-valuemax") or "inf")
    key = "ArrowLeft" if at_max else "ArrowRight"
    start = page.evaluate("(s) => window.__prenorm.watch(s)", slider.element_handle())
    knob.press(key)
    after = _value(knob)
    assert after != before, f"slider {label}: {key} left aria-valuenow at {before}"
    last_change = _wait_for_redraw(page, slider, idle_selector, timeout_ms)
    return SliderMove(label, f"key {key}", before, after, last_change - start)


def move_by_drag(page: Page, slider: Locator, label: str, *,
                 idle_selector: str | None, timeout_ms: float = 60_000) -> SliderMove:
    """Drag the knob along the track to the far quarter, wait for the output to redraw.

    The latency counts from releasing the mouse: with `continuous_update` the
    output may already follow during the drag, and what a learner waits for is
    the picture after letting go.
    """
    knob = slider.locator(KNOB).first
    knob.scroll_into_view_if_needed()
    before = _value(knob)
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
    after = _value(knob)
    assert after != before, f"slider {label}: dragging left aria-valuenow at {before}"
    last_change = _wait_for_redraw(page, slider, idle_selector, timeout_ms)
    return SliderMove(label, "drag", before, after, max(0.0, last_change - released))


def output_of(slider: Locator) -> Locator:
    """The output area that holds the slider and what it draws (for screenshots)."""
    return slider.locator("xpath=ancestor::div[contains(concat(' ', @class, ' '), ' jp-OutputArea ')][1]")
