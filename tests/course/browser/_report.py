"""Collect what the browser tests measured and write it next to their screenshots.

One JSON file for machines (report.json) and one Markdown table for people
(report.md), both under test-artifacts/browser/, which git ignores. The load of the
machine is written with the numbers: on a shared machine every time is inflated.

Timing informs, tests decide: in CI's run the times only go to the report. The benchmark
(`make bench-browser`: PRENORM_BENCHMARK=1, for a quiet machine) also holds the classroom to
its limits, and when it has run every course notebook writes its tables into
docs/measurements.md (sections run-all, sliders, classroom) through prenorm_course.measurements.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from prenorm_course import measurements

BENCHMARK = bool(os.environ.get("PRENORM_BENCHMARK"))
BENCHMARK_LIMIT = "benchmark limit"  # every failure that only the benchmark's timing limits decide says so
BENCHMARK_COMMAND = "make bench-browser"


@dataclass
class TimingReport:
    """Timings and screenshot names gathered over one pytest session."""

    folder: Path
    notebooks: list[dict] = field(default_factory=list)
    site: dict = field(default_factory=dict)
    demo: list[dict] = field(default_factory=list)
    load: measurements.LoadWatch | None = None  # the load over the whole session

    def write(self, course: list[str] | None = None) -> None:
        """Write report.json and report.md (only the sections that ran); in the benchmark, once every
        notebook of ``course`` (their stems) ran in JupyterLab and in the classroom, the measurements too."""
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
        if BENCHMARK and course and self.complete(course):
            self.write_measurements(course)

    def complete(self, course: list[str]) -> bool:
        """Whether every course notebook ran in JupyterLab and in the classroom in this session."""
        return set(course) <= {e["notebook"] for e in self.notebooks} and set(course) <= {
            e["notebook"] for e in self.demo if "first_paint_ms" in e}

    def write_measurements(self, course: list[str]) -> None:
        """The benchmark's tables, into docs/measurements.md."""
        lab = {e["notebook"]: e for e in self.notebooks}
        demo = {e["notebook"]: e for e in self.demo if "first_paint_ms" in e}
        load = self.load if self.load is not None and self.load.samples else None
        rows = ["| notebook | Run All (s) | code cells |", "|---|---:|---:|"]
        rows += [f"| {name} | {lab[name]['run_all_s']:.1f} | {lab[name]['code_cells']} |" for name in course]
        measurements.write("run-all", "\n".join([*rows, "", "Run All through JupyterLab's Run menu in Chromium, on a "
                                                "fresh kernel, until every cell shows its new prompt (the browser "
                                                "renders the outputs on the same cores)."]),
                           command=BENCHMARK_COMMAND, load=load)
        rows = ["| notebook | slider | JupyterLab: median (95th percentile) ms "
                "| classroom: median (95th percentile) ms |", "|---|---|---:|---:|"]
        for name in course:
            in_lab = lab[name].get("slider_summary", {})
            in_class = demo[name].get("slider_summary", {})
            for slider in dict.fromkeys([*in_lab, *in_class]):
                rows.append(f"| {name} | {slider} | {_median_p95(in_lab.get(slider))} | "
                            f"{_median_p95(in_class.get(slider))} |")
        measurements.write("sliders", "\n".join([*rows, "", "From a key press on a slider's knob to the new picture "
                                                "on screen; the course's goal is 100 ms at the 95th percentile."]),
                           command=BENCHMARK_COMMAND, load=load)
        rows = ["| notebook | cold: first stored picture | cold: first live figure | cold: all cells | cold: layout "
                "shift | preheated: first paint | preheated: first live figure | preheated: all cells | layout shift |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        rows += [f"| {name} | {_ms(demo[name].get('cold_first_stored_figure_ms'))} | "
                 f"{_ms(demo[name].get('cold_first_figure_ms'))} | {_ms(demo[name].get('cold_all_cells_ms'))} | "
                 f"{demo[name].get('cold_layout_shift')} | "
                 f"{_ms(demo[name]['first_paint_ms'])} | {_ms(demo[name]['first_figure_ms'])} | "
                 f"{_ms(demo[name]['all_cells_ms'])} | {demo[name].get('layout_shift')} |" for name in course]
        measurements.write("classroom", "\n".join([
            *rows, "", "`make demo NB=…` at 1366×768, times from the page request. *Cold*: the page asked for as soon "
            "as the server answers, before its kernel has run the notebook (the poster of stored pictures first); "
            "the page waits on the preheat's own kernel, so *cold: all cells* bounds how long before class to start "
            "`make demo` (from above: the refilled pool's kernel runs beside it). *Preheated*: asked for once "
            "Voilà's pool kernel has run the notebook. Limits in "
            "this benchmark: first live figure ≤ 2 s and every cell ≤ 15 s when preheated; the first stored "
            "picture ≤ 2 s when cold."]), command=BENCHMARK_COMMAND, load=load)

    def _markdown(self, data: dict) -> str:
        during = f"; load average during the run {self.load.describe()}" if self.load and self.load.samples else ""
        lines = ["# Browser test report", "",
                 f"Written {data['written']} on {data['machine']}; load average at the end "
                 f"{data['load_average']} (1, 5, 15 min){during}. "
                 + ("Benchmark: the classroom's limits decided, and a full run wrote docs/measurements.md."
                    if BENCHMARK else "Times are reported here and decide nothing (`make bench-browser` does)."), ""]
        if self.notebooks:
            lines += ["## JupyterLab: Run All and sliders", "",
                      "| notebook | Run All (s) | code cells | sliders |",
                      "|---|---:|---:|---:|"]
            for entry in self.notebooks:
                lines.append(f"| {entry['notebook']} | {entry['run_all_s']:.1f} | "
                             f"{entry['code_cells']} | {len(entry['slider_summary'])} |")
            lines += ["", *_slider_table(self.notebooks)]
        if self.site.get("clipped_code_cells"):
            counts = ", ".join(f"{n} at {w} px" for w, n in self.site["clipped_code_cells"].items())
            lines += ["## Static site: code cut off", "", f"Code cells with a line neither shown nor scrollable: "
                      f"{counts}.", ""]
        if "pages" in self.site:
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
                      "| all cells ran (ms) | layout shift | figures | refill wait (s) "
                      "| cold: first stored (ms) | cold: first live (ms) | cold: all cells (ms) | cold: layout shift |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            lines += [f"| {entry['notebook']} | {entry['first_paint_ms']} | {entry.get('first_stored_figure_ms')} | "
                      f"{entry['first_figure_ms']} | {entry['all_cells_ms']} | {entry.get('layout_shift')} | "
                      f"{entry['figures']} | {entry.get('refill_wait_s', '')} | "
                      f"{entry.get('cold_first_stored_figure_ms')} | {entry.get('cold_first_figure_ms')} | "
                      f"{entry.get('cold_all_cells_ms')} | {entry.get('cold_layout_shift')} |"
                      for entry in self.demo if "first_paint_ms" in entry]
            lines += ["", *_slider_table(self.demo)]
        return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value / 1000:.2f} s"


def _median_p95(times: dict | None) -> str:
    if not times:
        return "—"
    return f"{times['key_median_ms']:.0f} ({times.get('key_p95_ms', float('nan')):.0f})"


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
