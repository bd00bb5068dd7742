"""Collect what the browser tests measured and write it next to their screenshots.

One JSON file for machines (report.json) and one Markdown table for people
(report.md), both under test-artifacts/browser/, which git ignores.
"""

from __future__ import annotations

import json
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
    demo: dict = field(default_factory=dict)

    def write(self) -> None:
        """Write report.json and report.md (only the sections that ran)."""
        if not (self.notebooks or self.site or self.demo):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        data = {
            "written": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
            "lab": self.notebooks,
            "site": self.site,
            "demo": self.demo,
        }
        (self.folder / "report.json").write_text(json.dumps(data, indent=2) + "\n")
        (self.folder / "report.md").write_text(self._markdown(data))

    def _markdown(self, data: dict) -> str:
        lines = ["# Browser test report", "", f"Written {data['written']} on {data['machine']}.", ""]
        if self.notebooks:
            lines += ["## JupyterLab: Run All and sliders", "",
                      "| notebook | Run All (s) | code cells | sliders |",
                      "|---|---:|---:|---:|"]
            for entry in self.notebooks:
                lines.append(f"| {entry['notebook']} | {entry['run_all_s']:.1f} | "
                             f"{entry['code_cells']} | {len(entry['sliders']) // 2} |")
            lines += ["", "Slider input → last output change (ms):", "",
                      "| notebook | slider | how | value | latency (ms) |",
                      "|---|---|---|---|---:|"]
            for entry in self.notebooks:
                for move in entry["sliders"]:
                    lines.append(_move_row(entry["notebook"], move))
            lines.append("")
        if self.site:
            lines += ["## Static site", "",
                      f"{self.site['pages']} pages, {self.site['images']} images, "
                      f"{self.site['links']} links checked; slowest page load "
                      f"{self.site['slowest_load_ms']:.0f} ms.", ""]
        if self.demo:
            lines += ["## Classroom mode (Voilà)", "",
                      f"{self.demo['notebook']}: page ready in {self.demo['ready_s']:.1f} s.", "",
                      "| notebook | slider | how | value | latency (ms) |",
                      "|---|---|---|---|---:|"]
            lines += [_move_row(self.demo["notebook"], move) for move in self.demo["sliders"]]
            lines.append("")
        return "\n".join(lines) + "\n"


def _move_row(notebook: str, move: dict) -> str:
    return (f"| {notebook} | {move['slider']} | {move['how']} | "
            f"{move['before']} → {move['after']} | {move['latency_ms']:.0f} |")
