"""`keras.utils.plot_model` draws both kerasseq models (docs/plot_models.py)."""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _plot_models_module():
    spec = importlib.util.spec_from_file_location("plot_models", ROOT / "docs" / "plot_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["plot_models"] = module
    spec.loader.exec_module(module)
    return module


def test_plot_model_draws_both_models(tmp_path):
    pytest.importorskip("pydot", reason="pydot is not installed (pip install -e '.[plot]')")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (Debian graphviz, `make examples-data`)")
    models = _plot_models_module().plot_models(tmp_path)
    for name, model in models.items():
        image = (tmp_path / name).read_bytes()
        assert image.startswith(b"\x89PNG") and len(image) > 10_000
        # The drawn graph names every top-level layer: check one of each kind.
        layer_names = {layer.name for layer in model.layers}
        assert {"source_ids", "target_in_ids"} <= layer_names
    # The pages show the committed pictures of the same script.
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for name in models:
        assert f"images/{name}" in index and (ROOT / "docs" / "images" / name).exists()
