"""One check for every kerasseq layer: config round-trip, eager and symbolic
calls agree, one `fit` step runs, and `.keras` save/load gives identical outputs."""

import os
import tempfile

import keras
import numpy as np


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_numpy(outputs):
    return [keras.ops.convert_to_numpy(o) for o in _as_list(outputs)]


def check_layer(layer_cls, init_kwargs, inputs, call_kwargs=None, fit=True, atol=1e-6):
    """Exercise `layer_cls(**init_kwargs)` on `inputs` (a numpy array, or a list/tuple
    of arrays passed positionally). Returns the layer's eager outputs as numpy."""
    call_kwargs = call_kwargs or {}
    inputs = _as_list(inputs)

    layer = layer_cls(**init_kwargs)
    eager = _to_numpy(layer(*inputs, **call_kwargs))

    # Config round-trip: every __init__ argument is in the config, and the copy
    # rebuilt from it gives the same outputs once it has the same weights.
    config = layer.get_config()
    for key in init_kwargs:
        assert key in config, f"get_config() of {layer_cls.__name__} lacks {key!r}"
    clone = layer_cls.from_config(config)
    clone(*inputs, **call_kwargs)
    clone.set_weights(layer.get_weights())
    for a, b in zip(eager, _to_numpy(clone(*inputs, **call_kwargs)), strict=True):
        np.testing.assert_allclose(a, b, atol=atol)
    assert clone.get_config() == config

    # Symbolic call inside a functional model, then .keras save/load.
    symbolic_inputs = [
        keras.Input(shape=x.shape[1:], dtype=str(x.dtype), batch_size=None) for x in inputs
    ]
    outputs = layer(*symbolic_inputs, **call_kwargs)
    model_inputs = symbolic_inputs if len(symbolic_inputs) > 1 else symbolic_inputs[0]
    model = keras.Model(model_inputs, outputs)
    model_out = _to_numpy(model(inputs if len(inputs) > 1 else inputs[0]))
    for a, b in zip(eager, model_out, strict=True):
        np.testing.assert_allclose(a, b, atol=atol)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "layer.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
    loaded_out = _to_numpy(loaded(inputs if len(inputs) > 1 else inputs[0]))
    for a, b in zip(model_out, loaded_out, strict=True):
        np.testing.assert_allclose(a, b, atol=atol)

    if fit and layer.trainable_weights:
        first = _as_list(outputs)[0]
        head = keras.Model(model_inputs, first)
        head.compile(optimizer="sgd", loss="mse")
        target = np.zeros_like(_to_numpy(head(inputs if len(inputs) > 1 else inputs[0]))[0])
        before = [w.copy() for w in head.get_weights()]
        head.fit(inputs if len(inputs) > 1 else inputs[0], target, epochs=1, verbose=0)
        after = head.get_weights()
        assert any(not np.allclose(a, b) for a, b in zip(before, after, strict=True)), "fit changed no weight"
    return eager
