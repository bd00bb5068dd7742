"""The classroom view keeps figures, sliders and conclusions, and hides everything else."""

import json
import os
import sys

import ipywidgets as widgets
import nbformat
import pytest

from prenorm_course import classroom, stored_widgets


def notebook(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def code(source, *outputs, tags=()):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)} if tags else {})
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def markdown(source, tags=()):
    return nbformat.v4.new_markdown_cell(source, metadata={"tags": list(tags)} if tags else {})


PNG = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}, "metadata": {}}
WIDGET = {"output_type": "display_data", "metadata": {},
          "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2,
                                                                "version_minor": 0}}}
LIVE_FIGURE = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
               "data": {**WIDGET["data"], "image/png": "iVBORw0KGgoFRAME=", "text/plain": "a sine wave (slider: a)"}}
TEXT = {"output_type": "stream", "name": "stdout", "text": "max |diff| < 1e-6: True\n"}


def shown(view):
    """The cells of a classroom view as (kind, what it shows) pairs, after the loader cell."""
    loader, *cells = view.cells
    assert loader.source == "%load_ext prenorm_course.classroom"
    result = []
    for cell in cells:
        if classroom.PREVIEW_TAG in classroom.tags(cell):
            continue  # the stored picture shown until the live one arrives (see test_previews…)
        first, _, rest = cell.source.partition("\n")
        if cell.cell_type == "markdown":
            result.append(("md", cell.source))
        elif first in ("%%classroom_view pictures", "%%classroom_view silent"):
            result.append((first.split()[-1], rest))
        else:
            result.append(("all", cell.source))
    return result


def test_code_cells_all_run_and_show_only_pictures_and_widgets():
    progress = {"output_type": "display_data", "metadata": {},
                "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "bar"}}}
    source = notebook(code("x = 1\nprint(x)", TEXT), code("plot()", PNG, TEXT), code("interact(f)", WIDGET),
                      code("live", LIVE_FIGURE), code("y = 2"), code("train()", progress, TEXT))
    source.metadata["widgets"] = {stored_widgets.WIDGET_STATE: {"state": {
        "abc": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_out"]}},
        "slider": {"model_name": "FloatSliderModel", "state": {}}, "out": {"model_name": "OutputModel", "state": {}},
        "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_progress"]}},
        "progress": {"model_name": "FloatProgressModel", "state": {}}}}}
    assert shown(classroom.dashboard(source)) == [
        ("silent", "x = 1\nprint(x)"),  # still runs: later cells may need x
        ("pictures", "plot()"),  # its printed text is hidden
        ("pictures", "interact(f)"),
        ("pictures", "live"),
        ("silent", "y = 2"),
        ("silent", "train()"),  # a progress bar is not a figure
    ]


def test_a_stored_copy_of_a_slider_picture_runs_silently():
    interact_plot = {"output_type": "display_data", "data": {"image/png": "SLIDER=", "text/plain": "<Figure>"},
                     "metadata": {}}
    first_frame = {**LIVE_FIGURE, "data": {**LIVE_FIGURE["data"], "image/png": "FRAME="}}
    source = notebook(
        code("interact(show, beta=beta)", WIDGET), code("show(1.0)", interact_plot),
        code("live", first_frame), code("display(Image(live.frame()))", {**PNG, "data": {"image/png": "FRAME="}}),
        code("plot()", PNG),
    )
    source.metadata["widgets"] = {stored_widgets.WIDGET_STATE: {"state": {
        "abc": {"model_name": "OutputModel", "state": {"outputs": [interact_plot]}}}}}
    assert [kind for kind, _ in shown(classroom.dashboard(source))] == [
        "pictures", "silent", "pictures", "silent", "pictures"]


def test_tags_keep_a_cell_whole_or_keep_it_off_screen():
    source = notebook(
        markdown("# Title"),
        code("print(verdict)", TEXT, tags=["classroom"]),
        code("plot()", PNG, tags=["classroom-hide"]),
        markdown("**Takeaway.** Pre-norm trains without warmup.", tags=["classroom"]),
        markdown("## Hidden section\n\nwith a table\n\n| a | b |\n|---|---|\n| 1 | 2 |", tags=["classroom-hide"]),
    )
    assert shown(classroom.dashboard(source)) == [
        ("md", "# Title"), ("all", "print(verdict)"), ("silent", "plot()"),
        ("md", "**Takeaway.** Pre-norm trains without warmup."),
    ]


def test_markdown_keeps_headings_with_something_under_them_and_tables():
    source = notebook(
        markdown("# Title\n\nWhy this matters.\n\n## Empty part\n\nprose only"),
        markdown("## Part with a figure\n\nprose\n\n### Its subsection\n\ntext"),
        code("plot()", PNG),
        markdown("### A subsection with nothing shown"),
        markdown("## Verdicts\n\n| claim | verdict |\n|---|---|\n| $x$ | **holds** |\n\nprose after"),
        markdown("```python\n# not a heading\n| not a table\n```"),
        markdown("Only prose, no heading."),
    )
    assert shown(classroom.dashboard(source)) == [
        ("md", "# Title"),
        ("md", "## Part with a figure\n\n### Its subsection"),
        ("pictures", "plot()"),
        ("md", "## Verdicts\n\n| claim | verdict |\n|---|---|\n| $x$ | **holds** |"),
    ]


def test_the_page_is_titled_by_the_first_heading():
    source = notebook(markdown("Some words first.\n\n# 3 · RoPE: watching positions rotate  \n\ntext"))
    assert classroom.dashboard(source).metadata["title"] == "3 · RoPE: watching positions rotate"


def test_the_course_notebook_is_not_modified():
    source = notebook(code("print(1)", TEXT), markdown("# A\n\ntext"))
    before = json.dumps(source, sort_keys=True)
    classroom.dashboard(source)
    assert json.dumps(source, sort_keys=True) == before


@pytest.mark.parametrize("number", ["01", "02", "03", "05", "06"])
def test_every_course_notebook_keeps_its_title_sliders_and_plots(number):
    original = nbformat.read(classroom.find_notebook(number), as_version=4)
    view = classroom.dashboard(original)
    silent = "%%classroom_view silent"
    pictures = [c for c in view.cells[1:] if c.cell_type == "code" and not c.source.startswith(silent)]
    copies, models = classroom.slider_pictures(original), stored_widgets.widget_models(original)
    expected = [c for c in original.cells if c.cell_type == "code"
                and (classroom.shows_picture_or_widget(c, models) or classroom.KEEP_TAG in classroom.tags(c))
                and classroom.HIDE_TAG not in classroom.tags(c) and not classroom.repeats_a_slider(c, copies)]
    assert pictures and len(pictures) == len(expected), f"notebook {number} would show {len(pictures)} cells"
    assert view.metadata["title"] and view.metadata["title"] == classroom.title(original)
    assert view.cells[1].source.startswith("# "), "the title heading comes first (after the loader)"


def test_voila_finds_the_classroom_template():
    env = classroom.voila_environment({"JUPYTER_PATH": "elsewhere"})
    first, *rest = env["JUPYTER_PATH"].split(os.pathsep)
    template = classroom.ASSETS / "voila" / "templates" / classroom.TEMPLATE
    assert first == str(classroom.ASSETS) and rest == ["elsewhere"]
    assert json.loads((template / "conf.json").read_text()) == {"base_template": "lab"}
    assert (template / "index.html.j2").exists()
    command = classroom.voila_command("03_rope.ipynb", "--port=1")
    assert command[1] == "03_rope.ipynb" and command[-1] == "--port=1"
    assert f"--template={classroom.TEMPLATE}" in command
    assert "--preheat_kernel=True" in command and not any("progressive_rendering" in a for a in command)


def test_unknown_number_names_the_choices():
    with pytest.raises(ValueError, match=r"NB='99' matches no notebook .* expected one of 01, 02, 03, 04, 05, 06"):
        classroom.find_notebook("99")


class FakeShell:
    """What showing_only uses of IPython's shell: a display publisher and a formatter."""

    def __init__(self):
        self.published = []
        self.display_pub = type("Publisher", (), {"publish": lambda pub, data, **kw: self.published.append(data)})()
        self.display_formatter = type("Formatter", (), {"format": lambda f, value: ({"text/plain": repr(value)}, {})})()


def test_showing_only_hides_text_and_filters_displays_then_restores(capsys):
    shell, hook = FakeShell(), sys.displayhook
    with classroom.showing_only(shell, lambda data: "image/png" in data):
        print("a printed check")
        shell.display_pub.publish({"image/png": "AAA"})
        shell.display_pub.publish({"text/html": "<b>table</b>"})
        sys.displayhook(42)  # a last expression: text only
    assert shell.published == [{"image/png": "AAA"}]
    assert capsys.readouterr().out == ""
    assert sys.displayhook is hook and "publish" not in vars(shell.display_pub)


def test_a_figure_is_a_picture_or_a_widget_holding_one():
    image, slider = widgets.Image(format="png"), widgets.FloatSlider()
    live = widgets.VBox([widgets.HBox([slider]), image, widgets.Output()])
    progress = widgets.HBox([widgets.HTML("50%"), widgets.FloatProgress(0.5)])
    view = lambda w: {"application/vnd.jupyter.widget-view+json": {"model_id": w.model_id}}
    assert classroom.keeps_figure({"image/png": "AAA", "text/plain": "<Figure>"})
    assert classroom.keeps_figure(view(live)) and classroom.keeps_figure(view(slider))
    assert not classroom.keeps_figure(view(progress))
    assert not classroom.keeps_figure({"text/html": "<table/>"}) and not classroom.keeps_figure({"text/plain": "7"})


def test_the_magic_takes_a_known_mode():
    with pytest.raises(ValueError, match="takes 'pictures' or 'silent', got 'loud'"):
        classroom.classroom_view("loud", "1 + 1")


def test_previews_show_stored_pictures_at_once_and_silent_cells_are_tagged():
    """A shown figure is preceded by its stored picture (drawn with the page, before any
    kernel), a widget's with room for its controls; a silent cell is tagged for the page."""
    source = notebook(code("x = 1", TEXT), code("plot()", PNG), code("live", LIVE_FIGURE),
                      code("print(verdict)", TEXT, tags=["classroom"]),
                      code("plot(); print(verdict)", PNG, TEXT, tags=["classroom"]))
    view = classroom.dashboard(source)
    kinds = [(cell.cell_type, sorted(classroom.tags(cell))) for cell in view.cells[1:]]
    assert kinds == [("code", [classroom.SILENT_TAG]), ("markdown", [classroom.PREVIEW_TAG]), ("code", []),
                     ("markdown", [classroom.PREVIEW_TAG]), ("code", []), ("code", ["classroom"]),
                     ("markdown", [classroom.PREVIEW_TAG]), ("code", ["classroom"])]  # a kept figure too
    plot_preview, live_preview = view.cells[2].source, view.cells[4].source
    assert PNG["data"]["image/png"] in plot_preview and "classroom-preview-controls" not in plot_preview
    assert LIVE_FIGURE["data"]["image/png"] in live_preview and "classroom-preview-controls" in live_preview
    assert "tags" not in source.cells[0].metadata  # the course notebook is left as it was
