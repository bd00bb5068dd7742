"""Render the executed course notebooks into a static HTML site (`make site`).

    python -m prenorm_course.site build [--out _site] [--notebooks notebooks] [--figures figures]

The stored notebooks are rendered as they are, never executed again: the site
shows exactly the outputs that nbval checks. Pages must open without a network,
so nothing is loaded from a CDN:

* require.js, the widget manager and mermaid are left out of every page;
* a slider needs a kernel to redraw, so each widget output becomes a note that
  says so, followed by what the widget showed when the notebook was executed:
  a LiveFigure's first frame (the PNG its display carries), or an `interact`'s
  captured plot or text, with the slider values it was drawn for;
* formulas are typeset by MathJax 2, copied into the site from the
  `jupyter-server-mathjax` package (TeX input, HTML-CSS output, TeX web fonts).

The build checks its own output and fails if any page still refers to a
script, stylesheet or image outside the site.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import re
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import nbformat
from markupsafe import Markup
from nbconvert import HTMLExporter
from nbconvert.filters.markdown import markdown2html_mistune

from prenorm_course.exercises.paths import SOLUTION_GLOB, SOLUTION_TITLE_MARK, exercise_name
from prenorm_course.stored_widgets import WIDGET_VIEW, descendants, widget_models

ASSETS = Path(__file__).with_name("site_assets")
# The parts of MathJax 2 a page loads: the TeX input, the HTML-CSS output with the STIX
# web fonts (the only ones the package ships) and the extensions the combined
# configuration pulls in (menus, Safe mode); the accessibility explorer (3.7 MB) stays out.
MATHJAX_PARTS = ("MathJax.js", "LICENSE", "config", "extensions", "jax/element", "jax/input/TeX",
                 "jax/output/HTML-CSS", "fonts/HTML-CSS/STIX-Web", "localization/en")
MATHJAX_LEFT_OUT = ("a11y",)
NOTEBOOK_PATTERN = SOLUTION_GLOB
# A Markdown link to another course notebook, "](02_name.ipynb", "](02_name_solutions.ipynb" or "](02_name.ipynb#part":
# on the site it must lead to that notebook's page, which sits beside this one and is named as the exercise.
NOTEBOOK_LINK = re.compile(r"\]\((\d\d_[\w-]+\.ipynb)(?=[#)])")
MARKER = ".prenorm-site"  # marks a folder this module built, so a rebuild may empty it

COURSE_TITLE = "prenorm: the pre-norm Transformer block, piece by piece"
COURSE_LEDE = (
    "RMSNorm, SwiGLU against SiLU and ReLU, rotary position embeddings, causal attention, "
    "why the norm moved in front of the sublayer, and the whole model built and trained: six "
    "notebooks, each built on one small tested library."
)

# A src/href that leaves the site: a scheme (http:, https:, data: excluded) or "//host".
EXTERNAL_RESOURCE = re.compile(
    r"<(?:script|link|img|iframe)\b[^>]*?\b(?:src|href)\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)",
    re.IGNORECASE,
)


@dataclass
class Lesson:
    """One course notebook and where its pages go."""

    source: Path
    title: str
    description: str  # safe HTML: the notebook's first paragraph, Markdown rendered
    href: str
    download: str
    exercise_source: Path | None = None
    exercise_href: str | None = None
    figures: list[dict] = field(default_factory=list)


def inline_markdown(text: str) -> Markup:
    """A one-paragraph Markdown text (emphasis, code) as safe HTML for the index page."""
    rendered = markdown2html_mistune(text).strip()
    return Markup(rendered.removeprefix("<p>").removesuffix("</p>"))


def page_stem(notebook: str | Path) -> str:
    """A notebook's page name on the site: its exercise name's stem (``01_rmsnorm`` for the lesson page of
    ``01_rmsnorm_solutions.ipynb``, and in ``exercises/`` for ``01_rmsnorm.ipynb``)."""
    return Path(exercise_name(notebook)).stem


def first_heading_and_paragraph(notebook: nbformat.NotebookNode) -> tuple[str, str]:
    """Title (first markdown heading) and description (first paragraph after it)."""
    title, description = "", ""
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for block in re.split(r"\n\s*\n", cell.source.strip()):
            block = block.strip()
            if not title and block.startswith("#"):
                first_line, _, rest = block.partition("\n")
                title = first_line.lstrip("#").strip()
                block = rest.strip()
            if title and block and not block.startswith(("#", "```", "|", "<")):
                description = " ".join(block.split())
                return title, inline_markdown(description)
    return title, description


def slider_value(state: dict) -> str:
    """The value a stored slider shows, as its readout does.

    A selection slider (SelectionSlider) stores the position ``index`` into its
    ``_options_labels``, not a ``value``; a log slider stores the value itself.
    """
    labels = state.get("_options_labels")
    if labels is not None and state.get("index") is not None:
        return str(labels[state["index"]])
    if state.get("value") is None:
        return "?"
    return str(state["value"])


def _slider_values(models: Iterable[dict]) -> list[str]:
    values = []
    for model in models:
        if model.get("model_name", "").endswith("SliderModel"):
            state = model.get("state", {})
            name = state.get("description") or "value"
            values.append(f"{name} = {slider_value(state)}")
    return values


# nbgrader's markers around a solution region: instructions for the exercise builder, not for a reader.
SOLUTION_MARKER = re.compile(r"^[ \t]*### (?:BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)
DEFAULT_ALT = "A figure of the course notebook"


def without_solution_markers(source: str) -> str:
    """The code without nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines."""
    return SOLUTION_MARKER.sub("", source)


def figure_alt(output: nbformat.NotebookNode, heading: str) -> str:
    """The description of a stored picture: the alt the library stored with it (its figure's
    titles), else a LiveFigure's one-line description, else the section it belongs to."""
    alt = output.get("metadata", {}).get("image/png", {}).get("alt")
    if alt:
        return alt
    text = output.get("data", {}).get("text/plain", "")
    if isinstance(text, list):
        text = "".join(text)
    if text and not text.startswith("<Figure"):
        return text.strip()
    return f"{DEFAULT_ALT}: {heading}" if heading else DEFAULT_ALT


def png_description(path: Path) -> str:
    """The ``Description`` text a PNG carries (``make figures`` writes the figure's), or ""."""
    from PIL import Image

    with Image.open(path) as image:
        return image.text.get("Description", "") if hasattr(image, "text") else ""


def describe_figures(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Give every stored PNG an alt text (output metadata, as nbconvert and JupyterLab read it)."""
    heading = ""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    heading = line.lstrip("#").strip()
            continue
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                metadata = output.setdefault("metadata", {})
                metadata.setdefault("image/png", {})["alt"] = figure_alt(output, heading)
    return notebook


def static_widget_outputs(output: nbformat.NotebookNode, models: dict) -> list[nbformat.NotebookNode]:
    """What replaces one widget view on a static page: a note, then what the widget showed.

    A LiveFigure's display carries its first frame as a PNG: that frame is shown. An
    `interact` keeps its plot in an Output widget: the outputs captured there are shown.
    """
    found = list(descendants(models, output.data[WIDGET_VIEW].get("model_id", "")))
    values = _slider_values(found)
    first_frame = "image/png" in output.data
    shown = "its first frame" if first_frame else "the output"
    shown = f" Below: {shown}, for {', '.join(values)}." if values else f" Below: {shown}."
    note = (
        '<div class="static-widget-note"><strong>Interactive:</strong> run this notebook in '
        "JupyterLab (<code>make lab</code>) to move this slider; a static page has no kernel "
        f"to redraw it.{html.escape(shown)}</div>"
    )
    replacement = [nbformat.v4.new_output("display_data", data={"text/html": note})]
    if first_frame:
        data = {mime: value for mime, value in output.data.items() if mime != WIDGET_VIEW}
        return [*replacement, nbformat.v4.new_output("display_data", data=data, metadata=output.get("metadata", {}))]
    for model in found:
        if model.get("model_name") == "OutputModel":
            replacement += [nbformat.from_dict(item) for item in model.get("state", {}).get("outputs", [])]
    return replacement


def make_static(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Replace widget views by notes and captured outputs, drop the widget state, and point
    links to other course notebooks at their pages (a notebook file would not open there)."""
    models = widget_models(notebook)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.outputs:
            if WIDGET_VIEW in output.get("data", {}):
                outputs += static_widget_outputs(output, models)
            else:
                outputs.append(output)
        cell.outputs = outputs
        cell.source = without_solution_markers(cell.source)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = NOTEBOOK_LINK.sub(lambda m: f"]({page_stem(m.group(1))}.html", cell.source)
    notebook.metadata.pop("widgets", None)
    return describe_figures(notebook)


def check_executed(notebook: nbformat.NotebookNode, path: Path) -> None:
    """The site shows stored outputs, so a course notebook must be stored executed."""
    unrun = [index for index, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and cell.source.strip() and cell.execution_count is None]
    if unrun:
        raise ValueError(
            f"notebook {str(path)!r} has unexecuted code cells {unrun}; expected a notebook "
            "stored fully executed (run `make notebooks` first)"
        )


def external_resources(page: str) -> list[str]:
    """Addresses of scripts, stylesheets, images or frames a page would fetch from elsewhere."""
    return EXTERNAL_RESOURCE.findall(page)


class SiteBuilder:
    """Renders notebooks with one nbconvert exporter and one index template."""

    def __init__(self, notebooks: Path, figures: Path, out: Path) -> None:
        self.notebooks, self.figures, self.out = notebooks, figures, out
        self.exporter = HTMLExporter(
            template_name="lab", template_file=str(ASSETS / "page.html.j2"), embed_images=True,
            extra_template_basedirs=[str(ASSETS)],
        )
        self.written: list[Path] = []

    def lessons(self) -> list[Lesson]:
        sources = sorted(self.notebooks.glob(NOTEBOOK_PATTERN))
        if not sources:
            raise ValueError(
                f"notebooks={str(self.notebooks)!r} holds no {NOTEBOOK_PATTERN} files; "
                "expected the course notebooks folder"
            )
        lessons = []
        for source in sources:
            title, description = first_heading_and_paragraph(nbformat.read(source, as_version=4))
            exercise = self.notebooks / "exercises" / exercise_name(source)
            stem = page_stem(source)
            lessons.append(Lesson(  # the lesson's title is the notebook's, without the solutions mark
                source=source, title=title.removesuffix(SOLUTION_TITLE_MARK) or stem, description=description,
                href=f"{stem}.html", download=f"notebooks/{source.name}",
                exercise_source=exercise if exercise.exists() else None,
                exercise_href=f"exercises/{stem}.html" if exercise.exists() else None,
            ))
        return lessons

    def render_notebook(self, source: Path, target: Path, site: dict, executed: bool) -> None:
        notebook = nbformat.read(source, as_version=4)
        if executed:
            check_executed(notebook, source)
        resources = {"metadata": {"name": site["title"], "path": str(source.parent)}, "site": site}
        body, _ = self.exporter.from_notebook_node(make_static(notebook), resources=resources)
        self.write(target, body)

    def write(self, target: Path, text: str) -> None:
        leaks = external_resources(text)
        if leaks:
            raise RuntimeError(f"{target.name} would load from outside the site: {sorted(set(leaks))}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        self.written.append(target)

    def copy_figures(self, lessons: list[Lesson]) -> list[dict]:
        """Copy figures/*.png; those named NN_* go with lesson NN, the rest are returned."""
        by_number = {lesson.source.name[:2]: lesson for lesson in lessons}
        others = []
        for png in sorted(self.figures.glob("*.png")) if self.figures.is_dir() else []:
            shutil.copy2(png, self.out / "figures" / png.name)
            figure = {"href": f"figures/{png.name}", "caption": png.stem.replace("_", " "),
                      "alt": png_description(png) or png.stem.replace("_", " ")}
            lesson = by_number.get(png.name[:2])
            (lesson.figures if lesson else others).append(figure)
        return others

    def build(self) -> list[Path]:
        lessons = self.lessons()
        prepare_output_folder(self.out)
        for folder in ("figures", "notebooks/exercises"):
            (self.out / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy2(ASSETS / "site.css", self.out / "site.css")
        copy_mathjax(self.out / "mathjax")
        for index, lesson in enumerate(lessons):
            previous = lessons[index - 1] if index > 0 else None
            following = lessons[index + 1] if index + 1 < len(lessons) else None
            site = {
                "root": "", "title": lesson.title + SOLUTION_TITLE_MARK, "exercise": False, "download": lesson.download,
                "previous": previous and {"href": previous.href, "title": previous.title},
                "next": following and {"href": following.href, "title": following.title},
            }
            self.render_notebook(lesson.source, self.out / lesson.href, site, executed=True)
            shutil.copy2(lesson.source, self.out / lesson.download)
            if lesson.exercise_source:
                exercise_site = {
                    "root": "../", "title": f"{lesson.title} (exercise)", "exercise": True,
                    "download": f"../notebooks/exercises/{lesson.exercise_source.name}",
                    "previous": {"href": f"../{lesson.href}", "title": "Solution"}, "next": None,
                }
                self.render_notebook(lesson.exercise_source, self.out / lesson.exercise_href,
                                     exercise_site, executed=False)
                shutil.copy2(lesson.exercise_source, self.out / "notebooks" / "exercises" / lesson.exercise_source.name)
        other_figures = self.copy_figures(lessons)
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(ASSETS), autoescape=True, undefined=jinja2.StrictUndefined,
        )
        index = environment.get_template("index.html.j2").render(
            title=COURSE_TITLE, lede=COURSE_LEDE, lessons=lessons, other_figures=other_figures,
        )
        self.write(self.out / "index.html", index)
        return self.written


def mathjax_source() -> Path:
    """The MathJax 2 files of the `jupyter-server-mathjax` package (found without importing the server)."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the site typesets formulas with MathJax from the jupyter-server-mathjax package, "
                         "which is not installed; expected it from requirements.txt (make setup)")
    return Path(spec.submodule_search_locations[0]) / "static"


def copy_mathjax(target: Path) -> None:
    """Copy the parts of MathJax the pages load into `target`."""
    source = mathjax_source()
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, ignore=shutil.ignore_patterns(*MATHJAX_LEFT_OUT))
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


def prepare_output_folder(out: Path) -> None:
    """Empty `out` for a rebuild, refusing to wipe a folder this module did not create."""
    if out.exists():
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise ValueError(
                f"out={str(out)!r} is a non-empty folder that was not built by prenorm_course.site; "
                "expected a new or previously built site folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("built by python -m prenorm_course.site; safe to delete\n")


def build(notebooks: Path = Path("notebooks"), figures: Path = Path("figures"),
          out: Path = Path("_site")) -> list[Path]:
    """Build the site; returns the HTML pages written (index last)."""
    return SiteBuilder(Path(notebooks), Path(figures), Path(out)).build()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.site", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="render the executed notebooks into a static site")
    build_command.add_argument("--out", type=Path, default=Path("_site"), help="output folder (default: _site)")
    build_command.add_argument("--notebooks", type=Path, default=Path("notebooks"),
                               help=f"folder of {SOLUTION_GLOB} notebooks (default: notebooks)")
    build_command.add_argument("--figures", type=Path, default=Path("figures"),
                               help="folder of *.png figures (default: figures)")
    args = parser.parse_args(argv)
    try:
        pages = build(args.notebooks, args.figures, args.out)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(pages)} pages to {args.out}/ (open {args.out}/index.html)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
