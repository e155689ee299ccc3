"""One check for every kerasseq layer: config round-trip, eager and symbolic
calls agree, one `fit` step runs, `.keras` save/load gives identical outputs,
and a `mixed_float16` forward pass gives finite outputs."""

import os
import tempfile

import keras
import numpy as np


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_numpy(outputs):
    return [keras.ops.convert_to_numpy(o) for o in _as_list(outputs)]


def _without_dtype_policies(config):
    """`config` with every saved dtype policy removed, nested sub-layer configs
    included, so that layers rebuilt from it take the global policy (as if they
    were constructed under it)."""
    if isinstance(config, dict):
        return {
            key: _without_dtype_policies(value) for key, value in config.items()
            if not (key == "dtype" and (isinstance(value, str) or (
                isinstance(value, dict) and "DTypePolicy" in str(value.get("class_name")))))
        }
    if isinstance(config, (list, tuple)):
        return type(config)(_without_dtype_policies(value) for value in config)
    return config


def check_mixed_precision(layer_cls, config, inputs, call_kwargs):
    """Rebuild the layer from `config` under the `mixed_float16` global policy
    (dtype policies stripped from the config, so the global one applies), call
    it on the same float32 inputs and check that it computes in float16 and
    every floating output is finite (no overflow in masks, softmax or norms)."""
    config = _without_dtype_policies(config)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = layer_cls.from_config(config)
        outputs = _to_numpy(layer(*inputs, **call_kwargs))
        assert layer.compute_dtype == "float16", layer.compute_dtype
    finally:
        keras.mixed_precision.set_global_policy(previous)
    for index, output in enumerate(outputs):
        if np.issubdtype(output.dtype, np.floating):
            assert np.all(np.isfinite(output)), f"mixed_float16 output {index} is not finite"
    return outputs


def check_layer(layer_cls, init_kwargs, inputs, call_kwargs=None, fit=True, atol=1e-6,
                mixed_precision=True):
    """Exercise `layer_cls(**init_kwargs)` on `inputs` (a numpy array, or a list/tuple
    of arrays passed positionally). Returns the layer's eager outputs as numpy.

    `mixed_precision=False` skips the `mixed_float16` forward pass; a caller
    that passes it must say in a comment why the check does not apply."""
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

    if mixed_precision:
        check_mixed_precision(layer_cls, config, inputs, call_kwargs)
    return eager
