"""Every figure function runs and writes a non-empty PNG."""

import matplotlib

matplotlib.use("Agg")

import pytest
from PIL import Image

from prenorm_lib.lab.figures import registry, write_all

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_every_topic_contributes_a_figure():
    names = list(registry())
    assert len(names) >= 4, names


@pytest.mark.slow
def test_write_all_writes_non_empty_pngs(tmp_path):
    paths = write_all(tmp_path)
    assert {p.stem for p in paths} == set(registry())
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE), path.name
        assert len(data) > 5_000, f"{path.name} is suspiciously small ({len(data)} bytes)"
        with Image.open(path) as image:
            description = image.text.get("Description", "")
        assert len(description) > 20 and not description.startswith("Figure."), (path.name, description)
