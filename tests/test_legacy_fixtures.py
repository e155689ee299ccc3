"""Models and layers saved before the layer redesign (issue 50) keep working.

The fixtures in tests/fixtures/legacy/ were written once by
tests/fixtures/legacy/make_fixtures.py with the code at 5a4a95e, before the
layers were rewritten: three `.keras` models (a bidirectional 2-layer LSTM +
Bahdanau + GRU, a post-norm Transformer with shared and tied embeddings, a
pre-norm one), their translations and logits, and for every public layer its
saved config, weights, fixed inputs and outputs. Today's code must load the
files, translate the same words to the same strings, and compute the same
numbers from the same weights.
"""

import json
import os

import keras
import numpy as np
import pytest

import kerasseq  # noqa: F401 (registers the classes)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "legacy")

with open(os.path.join(HERE, "layers.json"), encoding="utf-8") as _f:
    LAYERS = json.load(_f)
with open(os.path.join(HERE, "models.json"), encoding="utf-8") as _f:
    MODELS = json.load(_f)


def _as_list(outputs):
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


@pytest.fixture(scope="module")
def layer_arrays():
    with np.load(os.path.join(HERE, "layers.npz")) as data:
        return dict(data)


@pytest.fixture(scope="module")
def model_arrays():
    with np.load(os.path.join(HERE, "models.npz")) as data:
        return dict(data)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_from_its_old_config_computes_the_old_numbers(name, layer_arrays):
    meta = LAYERS[name]
    layer = keras.saving.deserialize_keras_object(meta["config"])
    assert type(layer).__name__ == meta["class"]
    inputs = [layer_arrays[f"{name}/input_{i}"] for i in range(meta["num_inputs"])]
    call = {key: (np.array(value) if isinstance(value, list) else value)
            for key, value in meta["call"].items()}
    layer(*inputs, **call)  # builds
    weights = [layer_arrays[f"{name}/weight_{i}"] for i in range(len(meta["weight_paths"]))]
    layer.set_weights(weights)
    outputs = [keras.ops.convert_to_numpy(o) for o in _as_list(layer(*inputs, **call))]
    assert len(outputs) == meta["num_outputs"]
    for i, output in enumerate(outputs):
        np.testing.assert_allclose(output, layer_arrays[f"{name}/output_{i}"], atol=2e-5,
                                   rtol=1e-5, err_msg=f"{name} output {i}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_saved_before_the_redesign_loads_and_translates_the_same(name, model_arrays):
    model = keras.models.load_model(os.path.join(HERE, f"{name}.keras"))
    source_ids = model_arrays[f"{name}/source_ids"]
    target_in_ids = model_arrays[f"{name}/target_in_ids"]
    logits = keras.ops.convert_to_numpy(model([source_ids, target_in_ids], training=False))
    np.testing.assert_allclose(logits, model_arrays[f"{name}/logits"], atol=2e-5, rtol=1e-5)
    record = MODELS[name]
    assert model.translate(record["sources"], method="greedy") == record["greedy"]
    assert model.translate(record["sources"], num_beams=3) == record["beam3"]
