"""Reading the ipywidgets a notebook saved with its outputs (the site and the classroom both do).

A widget's output cell holds only a view (``WIDGET_VIEW``: a model id); the models
themselves — sliders, boxes, images, outputs — are stored once in the notebook's metadata
(``WIDGET_STATE``), boxes naming their children as ``"IPY_MODEL_<id>"``.
"""

from __future__ import annotations

from collections.abc import Iterator

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def widget_models(notebook: nbformat.NotebookNode) -> dict:
    """The widget models stored with the notebook, by id (empty if none were saved)."""
    return notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def descendants(models: dict, model_id: str) -> Iterator[dict]:
    """The stored model ``model_id`` and every model below it (children of boxes), each once."""
    stack, seen = [model_id], {model_id}
    while stack:
        model = models.get(stack.pop())
        if model is None:
            continue
        yield model
        for child in reversed(model.get("state", {}).get("children", [])):
            if isinstance(child, str) and child.startswith("IPY_MODEL_"):
                child_id = child.removeprefix("IPY_MODEL_")
                if child_id not in seen:
                    seen.add(child_id)
                    stack.append(child_id)
