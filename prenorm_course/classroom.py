"""Classroom mode: one notebook as a Voilà dashboard for a projector.

    python -m prenorm_course.classroom 03        # = make demo NB=03

Projected in a classroom, a notebook's code and printed checks are noise; the pictures,
the sliders and the conclusions are the show. :func:`dashboard` derives that view from a
course notebook without touching it. Every code cell still runs (later cells need what
earlier ones define), and what a cell *shows* follows these rules:

* a code cell whose stored outputs hold a picture or a figure's widget (a LiveFigure, an
  ``interact``) shows its pictures and those widgets; its printed text, progress bars and
  other displays are hidden;
* a cell whose every picture is a stored copy of what a slider showed (the same PNG
  bytes: a static copy kept for the site and for nbval) runs silently, since the slider
  shows that picture live;
* any other code cell runs silently;
* a markdown cell shrinks to its headings and its tables (the verdict tables);
* a heading with nothing shown under it (before the next heading of its level) is left out.

Notebook authors mark the rest with cell tags, which learners never see:

* ``classroom`` keeps a cell whole: a markdown cell's prose (a takeaway, a summary), a
  code cell's printed text as well as its pictures (a printed verdict);
* ``classroom-hide`` keeps a cell off the screen (it still runs), e.g. a static copy of a
  slider's picture.

The rules run inside the kernel as the cell magic ``%%classroom_view pictures`` (or
``silent``), which the dashboard's first cell loads (``%load_ext prenorm_course.classroom``).
Unlike ``%%capture`` it filters displays instead of replacing IPython's display publisher,
so code that enters an ``ipywidgets.Output`` (a LiveFigure moved with ``.set()``) still runs.

The page is served by Voilà with the ``classroom`` template
(``classroom_assets/voila/templates/classroom``): large centred figures, readable text at
1366×768, the notebook's title as the page title, nothing loaded from outside the server,
and a preheated kernel: Voilà runs the notebook before the page is asked for, so a teacher
who starts ``make demo`` a minute before class opens a page whose figures are live at once.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import nbformat

from prenorm_course.exercises.paths import ROOT_ENV, SOLUTION_GLOB, repo_root, solution_dir
from prenorm_course.stored_widgets import WIDGET_VIEW, descendants, widget_models

# The folder holding the prenorm_course package: the dashboard's kernels import the extension from it.
TOOLS_PARENT = Path(__file__).resolve().parents[1]
# A Jupyter data folder holding voila/templates/classroom; Voilà finds it through JUPYTER_PATH.
ASSETS = Path(__file__).with_name("classroom_assets")
TEMPLATE = "classroom"

KEEP_TAG = "classroom"
HIDE_TAG = "classroom-hide"
# Tags the dashboard adds (the notebooks never carry them): the page styles cells by them.
SILENT_TAG = "classroom-silent"  # runs, shows nothing: no placeholder while it runs
PREVIEW_TAG = "classroom-preview"  # the stored picture, shown at once until the live one arrives
PICTURE_MIME_TYPES = ("image/png", "image/jpeg", "image/svg+xml")
# Widgets that carry a figure or move one: a LiveFigure (an Image), an interact (an Output), sliders.
FIGURE_WIDGET_MODELS = ("ImageModel", "OutputModel")
MAGIC = "classroom_view"
# The extension's module by its import name: under `python -m` this module's __name__ is
# "__main__", which the dashboard's kernel cannot load (every cell then failed on the magic).
EXTENSION = "prenorm_course.classroom"
LOAD_EXTENSION = f"%load_ext {EXTENSION}"
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
TABLE_LINE = re.compile(r"^\s*\|")

# Voilà options of the classroom view (used by `make demo` and by the browser tests).
VOILA_OPTIONS = (
    f"--template={TEMPLATE}",
    "--theme=light",
    # Live at once: Voilà runs the notebook in a kernel before anyone asks for the page
    # (a pool of one kernel, refilled after each page takes it), so a page opened after
    # that gets every cell already run. A page opened sooner gets the cells run so far,
    # then the rest as they finish. (Voilà's progressive rendering cannot be combined.)
    "--preheat_kernel=True",
    "--VoilaConfiguration.default_pool_size=1",
    # The teacher runs the server on their own machine: a cell that fails says why.
    "--VoilaConfiguration.show_tracebacks=True",
    # A page left before it finished loading cannot shut its kernel down (the template
    # does it for a loaded page): stop kernels that no page has been connected to for
    # 10 minutes, checked every minute. A page that stays open keeps its kernel.
    "--MappingKernelManager.cull_idle_timeout=600",
    "--MappingKernelManager.cull_interval=60",
)


def tags(cell: nbformat.NotebookNode) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _stored_widget_shows_a_figure(model_id: str, models: dict) -> bool:
    """Whether the stored widget `model_id` holds a figure or a slider (a progress bar does not).

    Without stored widget state nothing is known, and the widget counts as a figure."""
    if not models:
        return True
    names = (model.get("model_name", "") for model in descendants(models, model_id))
    return any(name in FIGURE_WIDGET_MODELS or name.endswith("SliderModel") for name in names)


def shows_picture_or_widget(cell: nbformat.NotebookNode, models: dict | None = None) -> bool:
    """True if the cell's stored outputs contain a picture, or a widget that holds a figure."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(mime in data for mime in PICTURE_MIME_TYPES):
            return True
        if WIDGET_VIEW in data and _stored_widget_shows_a_figure(data[WIDGET_VIEW].get("model_id", ""), models or {}):
            return True
    return False


def title(notebook: nbformat.NotebookNode) -> str:
    """The text of the notebook's first heading (the page title), or '' if it has none."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                match = HEADING.match(line)
                if match:
                    return match.group(2)
    return ""


def markdown_blocks(source: str) -> list[tuple[int, str]]:
    """A markdown text as (heading level, line) for headings and (0, table) for tables."""
    blocks: list[tuple[int, str]] = []
    table: list[str] = []
    fenced = False
    for line in [*source.splitlines(), ""]:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and TABLE_LINE.match(line):
            table.append(line)
            continue
        if table:
            blocks.append((0, "\n".join(table)))
            table = []
        match = None if fenced else HEADING.match(line)
        if match:
            blocks.append((len(match.group(1)), line.strip()))
    return blocks


def slider_pictures(notebook: nbformat.NotebookNode) -> set[str]:
    """The PNGs (base64) that the notebook's widgets showed when it was executed: a
    LiveFigure's first frame, and the plots captured in an ``interact``'s Output widget."""
    pictures = set()
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}) and "image/png" in output.data:
                pictures.add(output.data["image/png"])
    for model in widget_models(notebook).values():
        for output in model.get("state", {}).get("outputs", []) if model.get("model_name") == "OutputModel" else []:
            if "image/png" in output.get("data", {}):
                pictures.add(output["data"]["image/png"])
    return pictures


def repeats_a_slider(cell: nbformat.NotebookNode, pictures: set[str]) -> bool:
    """True if every picture the cell stored is one a slider showed, and it has no widget."""
    data = [output.get("data", {}) for output in cell.get("outputs", [])]
    shown = [item["image/png"] for item in data if "image/png" in item]
    return bool(shown) and all(png in pictures for png in shown) and not any(WIDGET_VIEW in item for item in data)


def _code_cell(cell: nbformat.NotebookNode, pictures: set[str], models: dict) -> tuple[nbformat.NotebookNode, bool]:
    """The cell as the classroom runs it, and whether it shows anything."""
    cell_tags = tags(cell)
    if KEEP_TAG in cell_tags and HIDE_TAG not in cell_tags:
        return cell, True
    shown = (HIDE_TAG not in cell_tags and shows_picture_or_widget(cell, models)
             and not repeats_a_slider(cell, pictures))
    cell.source = f"%%{MAGIC} {'pictures' if shown else 'silent'}\n" + cell.source
    if not shown:
        cell.setdefault("metadata", {}).setdefault("tags", []).append(SILENT_TAG)
    return cell, shown


def stored_pictures(cell: nbformat.NotebookNode, models: dict) -> list[tuple[str, bool]]:
    """The PNGs (base64) the cell showed when the notebook was executed, in order, each with
    whether a widget (a slider above it) draws it live: inline plots, a LiveFigure's first
    frame, the plot an ``interact`` captured."""
    found = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if WIDGET_VIEW in data:
            if "image/png" in data:
                found.append((data["image/png"], True))
                continue
            for model in descendants(models, data[WIDGET_VIEW].get("model_id", "")):
                if model.get("model_name") == "OutputModel":
                    found += [(item["data"]["image/png"], True) for item in model.get("state", {}).get("outputs", [])
                              if "image/png" in item.get("data", {})]
        elif "image/png" in data:
            found.append((data["image/png"], False))
    return found


def preview_cell(pictures: list[tuple[str, bool]]) -> nbformat.NotebookNode:
    """A markdown cell showing stored pictures at once, in the place (and the size) of the
    live ones; the page removes it when the cell below has drawn its own."""
    parts = []
    for png, live in pictures:
        controls = '<div class="classroom-preview-controls"></div>' if live else ""
        parts.append(f'<div class="classroom-preview">{controls}'
                     f'<img src="data:image/png;base64,{png}" alt="" decoding="async"></div>')
    return nbformat.v4.new_markdown_cell("\n".join(parts), metadata={"tags": [PREVIEW_TAG]})


def dashboard(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``notebook`` that shows only what a classroom needs when run (see module doc)."""
    result = nbformat.from_dict(notebook)  # deep copy: the course notebook stays as it is
    # The page as a list of items: (heading level, cell index, text), level 0 for content.
    items: list[tuple[int, int, str | None]] = []
    cells = []
    pictures, models = slider_pictures(result), widget_models(result)
    for cell in result.cells:
        index = len(cells)
        if cell.cell_type == "code":
            cell, shown = _code_cell(cell, pictures, models)
            if shown and (stored := stored_pictures(cell, models)):  # a kept cell's pictures too (06's curves)
                cells.append(preview_cell(stored))
                items.append((0, index, cells[-1].source))
                index += 1
            cells.append(cell)
            if shown:
                items.append((0, index, None))
        elif cell.cell_type == "markdown" and HIDE_TAG not in tags(cell):
            cells.append(cell)
            if KEEP_TAG in tags(cell):
                items.append((0, index, cell.source))
            else:
                items += [(level, index, text) for level, text in markdown_blocks(cell.source)]
    kept = [item for position, item in enumerate(items) if _has_content_below(items, position)]
    for position, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            cell.source = "\n\n".join(text for _, index, text in kept if index == position)
    loader = nbformat.v4.new_code_cell(LOAD_EXTENSION)
    result.cells = [loader, *(cell for cell in cells if cell.cell_type == "code" or cell.source)]
    result.metadata["title"] = title(notebook) or result.metadata.get("title", "")
    return result


def _has_content_below(items: list[tuple[int, int, str | None]], position: int) -> bool:
    """Content is always kept; a heading only if content follows before its section ends.

    The first heading (the notebook's title) is always kept.
    """
    level = items[position][0]
    if level == 0 or position == 0:
        return True
    for following, _, _ in items[position + 1:]:
        if following == 0:
            return True
        if following <= level:
            return False
    return False


def keeps_figure(data: dict) -> bool:
    """Whether a display (a mime bundle) is a figure the classroom shows: a picture, or a
    live widget that holds a figure or a slider (a LiveFigure, an interact; not a progress bar)."""
    if WIDGET_VIEW in data:
        import ipywidgets

        # ipywidgets' own deserializer turns a model id into the live widget.
        stack = [ipywidgets.widget_serialization["from_json"](f"IPY_MODEL_{data[WIDGET_VIEW].get('model_id')}", None)]
        while stack:
            widget = stack.pop()
            if isinstance(widget, ipywidgets.Image | ipywidgets.Output) or type(widget).__name__.endswith("Slider"):
                return True
            stack.extend(getattr(widget, "children", ()))
        return False
    return any(mime in data for mime in PICTURE_MIME_TYPES)


@contextmanager
def showing_only(shell, keep: Callable[[dict], bool]) -> Iterator[None]:
    """Hide printed text and every display for which `keep(data)` is false.

    The display publisher's `publish` is filtered in place rather than the publisher
    replaced (as `%%capture` does), so entering an ipywidgets Output still finds it.
    """
    publisher, hook = shell.display_pub, sys.displayhook
    publish, own = publisher.publish, "publish" in vars(publisher)

    def filtered_publish(data, *args, **kwargs):
        if keep(data):
            publish(data, *args, **kwargs)

    def filtered_hook(value):
        if value is not None and keep(shell.display_formatter.format(value)[0]):
            hook(value)

    publisher.publish, sys.displayhook = filtered_publish, filtered_hook
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            yield
    finally:
        if own:
            publisher.publish = publish
        else:
            del publisher.publish  # the class's method is back
        sys.displayhook = hook


# Figures drawn in the classroom: 2 PNG pixels per CSS pixel of a notebook's figure (the
# house style's 100 dpi), so a figure stretched across a projector stays sharp.
CLASSROOM_DPI = 200


def sharpen_figures() -> None:
    """Draw the next figures at :data:`CLASSROOM_DPI` (the notebook's set-up may have reset it)."""
    import matplotlib as mpl

    mpl.rcParams["figure.dpi"] = CLASSROOM_DPI


def classroom_view(line: str, cell: str) -> None:
    """%%classroom_view pictures|silent: run the cell, showing only its figures, or nothing."""
    from IPython import get_ipython

    mode = line.strip()
    if mode not in ("pictures", "silent"):
        raise ValueError(f"%%{MAGIC} takes 'pictures' or 'silent', got {mode!r}")
    shell = get_ipython()
    sharpen_figures()
    with showing_only(shell, keeps_figure if mode == "pictures" else lambda data: False):
        shell.run_cell(cell)


def load_ipython_extension(shell) -> None:
    """`%load_ext prenorm_course.classroom`: registers the cell magic %%classroom_view."""
    shell.register_magic_function(classroom_view, magic_kind="cell", magic_name=MAGIC)
    sharpen_figures()


def find_notebook(number: str, folder: Path | None = None) -> Path:
    """The solution notebook whose file name starts with ``number`` (e.g. "03"), in ``folder``
    (default: notebooks/ of the course root: ``--root``, ``$PRENORM_ROOT`` or the current folder)."""
    folder = solution_dir(repo_root()) if folder is None else Path(folder)
    course = sorted(folder.glob(SOLUTION_GLOB))
    matches = [path for path in course if path.name.startswith(f"{number}_")]
    if not matches:
        available = ", ".join(p.name[:2] for p in course)
        raise ValueError(f"NB={number!r} matches no notebook in {folder.name}/; expected one of {available}")
    return matches[0]


def write_dashboard(source: Path, folder: Path) -> Path:
    """Write the dashboard of ``source`` into ``folder`` under the same file name."""
    target = Path(folder) / Path(source).name
    nbformat.write(dashboard(nbformat.read(source, as_version=4)), target)
    return target


def voila_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the classroom template on JUPYTER_PATH
    and the course root on PYTHONPATH.

    ``prenorm_course`` is not installed (only ``prenorm_lib`` is): the kernels Voilà starts,
    in a temporary folder, import the extension from the checkout through PYTHONPATH.
    """
    env = dict(os.environ if base is None else base)
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(ASSETS), env.get("JUPYTER_PATH", "")]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TOOLS_PARENT), env.get("PYTHONPATH", "")]))
    return env


def voila_command(target: str, *extra: str) -> list[str]:
    """The Voilà command line that serves ``target`` (a notebook or a folder) as the classroom view."""
    voila = Path(sys.executable).with_name("voila")
    return [str(voila), target, *VOILA_OPTIONS, *extra]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.classroom", description=__doc__.split("\n")[0])
    parser.add_argument("number", help="the notebook's number, e.g. 03")
    parser.add_argument("--root", type=Path, help=f"course root (default: ${ROOT_ENV} or the current folder)")
    parser.add_argument("voila_args", nargs=argparse.REMAINDER, help="passed on to voila (e.g. --port=8867)")
    args = parser.parse_args(argv)
    try:
        source = find_notebook(args.number, solution_dir(repo_root(args.root)))
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    folder = Path(tempfile.mkdtemp(prefix="prenorm-demo-"))
    notebook = write_dashboard(source, folder)
    command = voila_command(notebook.name, *args.voila_args)
    print(f"classroom view of {source.name}: figures, sliders and conclusions (Ctrl+C to stop)")
    os.chdir(folder)
    os.execve(command[0], command, voila_environment())


if __name__ == "__main__":
    main()
