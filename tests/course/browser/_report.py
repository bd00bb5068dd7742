"""Collect what the browser tests measured and write it next to their screenshots.

One JSON file for machines (report.json) and one Markdown table for people
(report.md), both under test-artifacts/browser/, which git ignores. The load of the
machine is written with the numbers: on a shared machine every time is inflated.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TimingReport:
    """Timings and screenshot names gathered over one pytest session."""

    folder: Path
    notebooks: list[dict] = field(default_factory=list)
    site: dict = field(default_factory=dict)
    demo: list[dict] = field(default_factory=list)

    def write(self) -> None:
        """Write report.json and report.md (only the sections that ran)."""
        if not (self.notebooks or self.site or self.demo):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        data = {
            "written": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
                       f"Python {platform.python_version()}",
            "load_average": _load_average(),
            "lab": self.notebooks,
            "site": self.site,
            "demo": self.demo,
        }
        (self.folder / "report.json").write_text(json.dumps(data, indent=2) + "\n")
        (self.folder / "report.md").write_text(self._markdown(data))

    def _markdown(self, data: dict) -> str:
        lines = ["# Browser test report", "",
                 f"Written {data['written']} on {data['machine']}; load average at the end "
                 f"{data['load_average']} (1, 5, 15 min).", ""]
        if self.notebooks:
            lines += ["## JupyterLab: Run All and sliders", "",
                      "| notebook | Run All (s) | code cells | sliders |",
                      "|---|---:|---:|---:|"]
            for entry in self.notebooks:
                lines.append(f"| {entry['notebook']} | {entry['run_all_s']:.1f} | "
                             f"{entry['code_cells']} | {len(entry['slider_summary'])} |")
            lines += ["", *_slider_table(self.notebooks)]
        if self.site:
            lines += ["## Static site", "",
                      f"{self.site['pages']} pages, {self.site['images']} images, "
                      f"{self.site['links']} links checked; slowest page load (MathJax typeset included) "
                      f"{self.site['slowest_load_ms']:.0f} ms.", "",
                      "| page | formulas typeset | left as TeX |", "|---|---:|---:|"]
            lines += [f"| {page} | {counts['typeset']} | {counts['raw_tex']} |"
                      for page, counts in self.site["formulas"].items()]
            lines.append("")
        if self.demo:
            lines += ["## Classroom mode (Voilà, 1366×768)", "",
                      "| notebook | first paint (ms) | first stored figure (ms) | first live figure (ms) "
                      "| all cells ran (ms) | layout shift | figures | preheat before (s) |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|"]
            lines += [f"| {entry['notebook']} | {entry['first_paint_ms']} | {entry.get('first_stored_figure_ms')} | "
                      f"{entry['first_figure_ms']} | {entry['all_cells_ms']} | {entry.get('layout_shift')} | "
                      f"{entry['figures']} | {entry.get('preheat_s', '')} |"
                      for entry in self.demo if "first_paint_ms" in entry]
            lines += ["", *_slider_table(self.demo)]
        return "\n".join(lines) + "\n"


def _slider_table(entries: list[dict]) -> list[str]:
    lines = ["Key press or mouse release → new picture on screen (ms; median, 95th percentile and largest of the "
             "key presses):", "",
             "| notebook | slider | key median | key p95 | key max | drag |", "|---|---|---:|---:|---:|---:|"]
    for entry in entries:
        for slider, times in entry.get("slider_summary", {}).items():
            lines.append(f"| {entry['notebook']} | {slider} | {times['key_median_ms']:.0f} | "
                         f"{times.get('key_p95_ms', float('nan')):.0f} | {times['key_max_ms']:.0f} | "
                         f"{times['drag_ms']:.0f} |")
    return [*lines, ""]


def _load_average() -> list[float]:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return []
