"""The static site: LiveFigure and interact outputs without a kernel, and formulas typeset offline.

Building the whole site is the browser test's job (tests/course/browser/test_site.py); these
tests build pages from small notebooks made here.
"""

import base64
from pathlib import Path

import nbformat
import pytest

from prenorm_course import site, stored_widgets

WIDGET_VIEW = stored_widgets.WIDGET_VIEW
PNG = base64.b64encode(b"\x89PNG first frame").decode()


def widget_state(*models):
    """Notebook metadata holding the widget models (id, model_name, state)."""
    return {"widgets": {stored_widgets.WIDGET_STATE: {"version_major": 2, "version_minor": 0, "state": {
        model_id: {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}
        for model_id, name, state in models}}}}


def executed(cells, metadata):
    notebook = nbformat.v4.new_notebook(cells=cells, metadata=metadata)
    for count, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type == "code":
            cell.execution_count = count
    return notebook


def live_figure_cell():
    cell = nbformat.v4.new_code_cell("LiveFigure(fig, update, {'shift': slider}, 'a shifted vector (slider: shift)')")
    cell.outputs = [nbformat.v4.new_output("execute_result", execution_count=1, data={
        WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0},
        "image/png": PNG, "text/plain": "a shifted vector (slider: shift)"})]
    return cell


LIVE_FIGURE_MODELS = (
    ("box", "VBoxModel", {"children": ["IPY_MODEL_controls", "IPY_MODEL_image", "IPY_MODEL_errors"]}),
    ("controls", "HBoxModel", {"children": ["IPY_MODEL_slider"]}),
    ("slider", "FloatSliderModel", {"description": "shift", "value": 0.5}),
    ("image", "ImageModel", {"format": "png"}),
    ("errors", "OutputModel", {"outputs": []}),
)


def test_a_live_figure_becomes_a_note_and_its_first_frame():
    notebook = site.make_static(executed([live_figure_cell()], widget_state(*LIVE_FIGURE_MODELS)))
    note, frame = notebook.cells[0].outputs
    assert "run this notebook in JupyterLab" in note.data["text/html"]
    assert "Below: its first frame, for shift = 0.5." in note.data["text/html"]
    assert frame.data == {"image/png": PNG, "text/plain": "a shifted vector (slider: shift)"}
    assert "widgets" not in notebook.metadata


def test_an_interact_becomes_a_note_and_its_captured_plot():
    cell = nbformat.v4.new_code_cell("interact(show, beta=beta)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0}, "text/plain": "interactive(...)"})]
    captured = {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Figure>"}, "metadata": {}}
    models = widget_state(("box", "VBoxModel", {"children": ["IPY_MODEL_beta", "IPY_MODEL_out"]}),
                          ("beta", "FloatSliderModel", {"description": "β", "value": 1.0}),
                          ("out", "OutputModel", {"outputs": [captured]}))
    note, plot = site.make_static(executed([cell], models)).cells[0].outputs
    assert "Below: the output, for β = 1.0." in note.data["text/html"]
    assert plot.data["image/png"] == PNG


def test_a_live_figure_without_saved_widget_state_still_shows_its_frame():
    note, frame = site.make_static(executed([live_figure_cell()], {})).cells[0].outputs
    assert "Below: its first frame." in note.data["text/html"]
    assert frame.data["image/png"] == PNG


@pytest.fixture
def small_site(tmp_path):
    folder = tmp_path / "notebooks"
    (folder / "exercises").mkdir(parents=True)
    maths = nbformat.v4.new_markdown_cell("# 1 · A lesson\n\nThe norm $\\sqrt{x}$ and\n\n$$\\frac{a}{b}$$")
    notebook = executed([maths, live_figure_cell()], widget_state(*LIVE_FIGURE_MODELS))
    nbformat.write(notebook, folder / "01_lesson_solutions.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[maths]), folder / "exercises" / "01_lesson.ipynb")
    out = tmp_path / "site"
    site.build(folder, tmp_path / "no-figures", out)
    return out


def test_pages_load_mathjax_from_the_site_itself(small_site):
    lesson = (small_site / "01_lesson.html").read_text()
    exercise = (small_site / "exercises" / "01_lesson.html").read_text()
    index = (small_site / "index.html").read_text()
    assert '<script src="mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe">' in lesson
    assert '<script src="../mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe">' in exercise
    assert 'src="mathjax/MathJax.js' in index
    assert "$\\sqrt{x}$" in lesson  # left for MathJax to typeset in the browser
    for part in ("MathJax.js", "config/TeX-AMS-MML_HTMLorMML-full.js", "extensions/Safe.js",
                 "jax/output/HTML-CSS/fonts/STIX-Web/fontdata.js", "fonts/HTML-CSS/STIX-Web/woff"):
        assert (small_site / "mathjax" / part).exists(), part
    assert not (small_site / "mathjax" / "extensions" / "a11y").exists()
    assert not site.external_resources(lesson + exercise + index)


def test_the_first_frame_is_on_the_page(small_site):
    lesson = (small_site / "01_lesson.html").read_text()
    assert "static-widget-note" in lesson and f"data:image/png;base64,{PNG}" in lesson
    assert WIDGET_VIEW not in lesson


def test_a_missing_mathjax_package_is_named(monkeypatch):
    monkeypatch.setattr(site.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="jupyter-server-mathjax package, which is not installed"):
        site.mathjax_source()


def test_descendants_walk_boxes_once_in_order_and_skip_missing_models():
    models = {"box": {"state": {"children": ["IPY_MODEL_a", "IPY_MODEL_b", "IPY_MODEL_gone"]}},
              "a": {"model_name": "FloatSliderModel", "state": {"children": ["IPY_MODEL_box"]}},
              "b": {"model_name": "ImageModel"}}
    assert [m.get("model_name") for m in stored_widgets.descendants(models, "box")] == [
        None, "FloatSliderModel", "ImageModel"]
    assert list(stored_widgets.descendants(models, "nothing")) == []


def test_a_selection_slider_note_names_the_option_not_none():
    cell = live_figure_cell()
    models = (("box", "VBoxModel", {"children": ["IPY_MODEL_controls", "IPY_MODEL_image"]}),
              ("controls", "HBoxModel", {"children": ["IPY_MODEL_slider"]}),
              ("slider", "SelectionSliderModel", {"description": "depth L", "index": 2,
                                                  "_options_labels": ["2", "4", "6"]}),
              ("image", "ImageModel", {"format": "png"}))
    note = site.make_static(executed([cell], widget_state(*models))).cells[0].outputs[0]
    assert "for depth L = 6." in note.data["text/html"] and "None" not in note.data["text/html"]
    assert site.slider_value({"description": "Θ"}) == "?"  # nothing stored: no 'None' either


def test_solution_markers_are_hidden_and_every_figure_has_a_description():
    solution = nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n")
    plain = nbformat.v4.new_code_cell("plot()")
    plain.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"})]
    described = nbformat.v4.new_code_cell("plot()")
    described.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG},
                                                 metadata={"image/png": {"alt": "Loss by layer"}})]
    notebook = site.make_static(executed(
        [nbformat.v4.new_markdown_cell("## The gate"), solution, plain, described, live_figure_cell()], {}))
    assert notebook.cells[1].source == "def f(x):\n    return x\n"
    alts = [cell.outputs[-1].metadata["image/png"]["alt"] for cell in notebook.cells[2:]]
    assert alts == ["A figure of the course notebook: The gate", "Loss by layer", "a shifted vector (slider: shift)"]
    body, _ = site.SiteBuilder(Path("."), Path("."), Path(".")).exporter.from_notebook_node(
        notebook, resources={"metadata": {"name": "t"}, "site": {"root": "", "previous": None, "next": None,
                                                                 "download": None, "exercise": False}})
    assert "No description has been provided" not in body and 'alt="Loss by layer"' in body


def test_links_between_course_notebooks_lead_to_their_pages():
    text = ("Next: [notebook 2](02_swiglu_silu_relu.ipynb), its [controls](02_swiglu_silu_relu.ipynb#controls); "
            "[the data](data/02_table.ipynb.json) and [elsewhere](https://example.org/03_rope.ipynb) stay; "
            "[solved](03_rope_solutions.ipynb).")
    notebook = site.make_static(executed([nbformat.v4.new_markdown_cell(text)], {}))
    assert notebook.cells[0].source == (  # a solution notebook's page is named as its exercise: 03_rope.html
        "Next: [notebook 2](02_swiglu_silu_relu.html), its [controls](02_swiglu_silu_relu.html#controls); "
        "[the data](data/02_table.ipynb.json) and [elsewhere](https://example.org/03_rope.ipynb) stay; "
        "[solved](03_rope.html).")


def test_index_figures_use_the_description_their_png_carries(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from prenorm_lib.lab.plotting import save_figure

    fig, ax = plt.subplots()
    ax.set(title="Loss by layer", xlabel="layer", ylabel="loss")
    save_figure(fig, "01_loss_by_layer", tmp_path / "figures")
    plt.close(fig)
    description = site.png_description(tmp_path / "figures" / "01_loss_by_layer.png")
    assert description == "Figure: Loss by layer; loss against layer."
    folder = tmp_path / "notebooks"
    folder.mkdir()
    lesson = executed([nbformat.v4.new_markdown_cell("# 1 · A lesson — solutions\n\nWords.")], {})
    nbformat.write(lesson, folder / "01_lesson_solutions.ipynb")
    site.build(folder, tmp_path / "figures", tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert "1 · A lesson" in index and "— solutions" not in index  # the index lists lessons, not the mark
    assert 'alt="Figure: Loss by layer; loss against layer."' in index


def test_deep_dives_are_marked_and_folded_answers_stay_folded(tmp_path):
    folder = tmp_path / "notebooks"
    (folder / "exercises").mkdir(parents=True)
    deep = nbformat.v4.new_markdown_cell("## 7. Timing · *optional deep dive*", metadata={"tags": ["deep-dive"]})
    answer = nbformat.v4.new_code_cell("print(answer)")
    answer.outputs = [nbformat.v4.new_output("stream", name="stdout", text="the answer\n")]
    folded = nbformat.from_dict(answer)
    folded.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    nbformat.write(executed([deep, answer], {}), folder / "01_lesson_solutions.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[deep, folded]), folder / "exercises" / "01_lesson.ipynb")
    out = tmp_path / "site"
    site.build(folder, tmp_path / "no-figures", out)
    lesson = (out / "01_lesson.html").read_text()
    exercise = (out / "exercises" / "01_lesson.html").read_text()
    assert "celltag_deep-dive" in lesson and "optional deep dive" in lesson
    assert '<details class="folded-cell">' in exercise and '<details class="folded-cell">' not in lesson
    assert exercise.index('<details class="folded-cell">') < exercise.index("the answer")
