"""The classroom view keeps headings, plots and sliders, and hides everything else."""

import nbformat
import pytest

from prenorm_lib import classroom


def notebook(*cells):
    return nbformat.v4.new_notebook(cells=list(cells))


def code(source, *outputs):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


PNG = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}, "metadata": {}}
WIDGET = {"output_type": "display_data", "metadata": {},
          "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2,
                                                                "version_minor": 0}}}
TEXT = {"output_type": "stream", "name": "stdout", "text": "max |diff| < 1e-6: True\n"}


def test_text_cells_run_captured_and_pictures_stay():
    source = notebook(code("x = 1\nprint(x)", TEXT), code("plot()", PNG), code("interact(f)", WIDGET), code("y = 2"))
    cells = classroom.dashboard(source).cells
    assert [c.source.startswith("%%capture\n") for c in cells] == [True, False, False, True]
    assert cells[0].source == "%%capture\nx = 1\nprint(x)"  # still runs: later cells may need x


def test_markdown_shrinks_to_its_headings_and_plain_prose_goes():
    source = notebook(nbformat.v4.new_markdown_cell("# Title\n\nWhy this matters.\n\n## Part 1\ntext"),
                      nbformat.v4.new_markdown_cell("Only prose, no heading."))
    cells = classroom.dashboard(source).cells
    assert [c.source for c in cells] == ["# Title\n\n## Part 1"]


def test_the_course_notebook_is_not_modified():
    source = notebook(code("print(1)", TEXT))
    classroom.dashboard(source)
    assert source.cells[0].source == "print(1)"


@pytest.mark.parametrize("number", ["01", "02", "03", "04"])
def test_every_course_notebook_keeps_its_sliders_and_plots(number):
    original = nbformat.read(classroom.find_notebook(number), as_version=4)
    view = classroom.dashboard(original)
    shown = [c for c in view.cells if c.cell_type == "code" and not c.source.startswith("%%capture")]
    assert shown, f"notebook {number} would show nothing in class"
    assert sum(classroom.shows_picture_or_widget(c) for c in original.cells if c.cell_type == "code") == len(shown)


def test_unknown_number_names_the_choices():
    with pytest.raises(ValueError, match=r"NB='99' matches no notebook .* expected one of 01, 02, 03, 04"):
        classroom.find_notebook("99")
