"""Every public layer of `kerasseq.layers` through the layer test harnesses that
Keras and keras-hub test their own layers with, and through a `.keras` round trip.

Three tests per layer configuration (`CASES`, 34 of them, covering every class
in `kerasseq.layers.__all__`, the abstract `RecurrentAttention` through a
subclass written here as a user would):

- `test_keras_run_layer_test`: Keras' `TestCase.run_layer_test`
  (keras.src.testing, private Keras, used in the tests only): config and
  `serialize_keras_object` round trips (same config, same attributes), the
  `supports_masking` flag, `build()` on shapes creates the weights, seed
  generators and non-trainable variables that an eager call creates, a
  symbolic call, an eager call, the output mask shape where the layer makes
  one, one compiled `fit` step (loss = sum of the output), and the
  `mixed_float16` check (each output's dtype equals what
  `compute_output_spec` announces, every weight float32).
- `test_keras_hub_harness`: keras-hub's `TestCase`, for what it adds to
  Keras': `run_precision_test` (under `mixed_float16`, `mixed_bfloat16` and
  `bfloat16`: float outputs and output specs in the compute dtype, weights in
  the variable dtype, every sublayer given the layer's policy), and for the
  layers with several tensor inputs, which Keras' harness cannot train, the
  whole `run_layer_test` (its `fit` step calls `layer(**inputs)` with an MSE
  loss).
- `test_keras_file_round_trip`: the layer inside a small functional model,
  saved to `.keras` and loaded back: same outputs, same config; and
  `from_config(get_config())` gives an equal config.

Where a check fails because of a kerasseq bug, the case is marked
`xfail(strict=True)` with the bug (`KNOWN_FAILURES`): once fixed, the test
passes and the strict mark fails it, so the mark must go.
"""

import dataclasses
import json
import os
import sys
import tempfile
import types
from typing import Any, Callable

import keras
import numpy as np
import pytest
from keras import ops
from keras.src.testing import test_case as keras_test_case

import kerasseq.layers
from kerasseq.layers import (
    BahdanauAttention,
    Bridge,
    CausalSelfAttention,
    CrossAttention,
    FeedForward,
    GlobalSelfAttention,
    GRUDecoder,
    LSTMEncoder,
    LuongAttention,
    MultiHeadAttention,
    OutputProjection,
    PositionalEmbedding,
    RecurrentAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)


def _import_keras_hub_test_case():
    """keras-hub's `tests.test_case` module. It imports `grain` at the top for
    its preprocessing-layer checks, which these tests do not run; when `grain`
    is not installed, an empty module stands in for it during that import
    only (and is removed at once, so `import grain` elsewhere still fails)."""
    try:
        import grain  # noqa: F401
    except ImportError:
        sys.modules["grain"] = types.ModuleType("grain")
        try:
            from keras_hub.src.tests import test_case
        finally:
            del sys.modules["grain"]
        return test_case
    from keras_hub.src.tests import test_case
    return test_case


keras_hub_test_case = _import_keras_hub_test_case()

# Keras' training check fits on a generator with Keras' default shuffle=True,
# which warns; the suite makes that warning an error for kerasseq's own fits
# (pyproject.toml), not for the harness's.
# The fit step of LuongAttention(score="dot"), which has no weights, warns
# that there are none to train.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*shuffle=True. was passed:UserWarning"),
    pytest.mark.filterwarnings("ignore:The model does not have any trainable weights:UserWarning"),
]


@keras.saving.register_keras_serializable(package="kerasseq_tests")
class ScaledDotAttention(RecurrentAttention):
    """A user's `RecurrentAttention` subclass: the scaled dot score
    e_i = q·h_i / sqrt(d), with a learned temperature on top (so it has a
    weight to train)."""

    def build(self, query_shape, values_shape, encoder_padding_mask_shape=None,
              keys_shape=None, values_mask_shape=None):
        self.temperature = self.add_weight(name="temperature", shape=(), initializer="ones")

    def score(self, query, keys):
        scale = ops.cast(ops.sqrt(float(ops.shape(keys)[-1])), keys.dtype)
        return ops.einsum("bd,bsd->bs", query, keys) / (scale * ops.cast(self.temperature, keys.dtype))


# ----------------------------------------------------------------- the inputs
_RNG = np.random.default_rng(51)
QUERY = _RNG.normal(size=(2, 4)).astype("float32")  # a decoder state
VALUES = _RNG.normal(size=(2, 3, 4)).astype("float32")  # encoder outputs
SOURCE_MASK = np.array([[True, True, False], [True, True, True]])
TARGET_IDS = np.array([[2, 5, 6, 1, 0], [2, 3, 0, 0, 0]], "int32")
SOURCE_IDS = np.array([[5, 7, 2, 0], [3, 1, 0, 0]], "int32")
STATE = _RNG.normal(size=(2, 6)).astype("float32")  # a decoder state wider than VALUES
FINAL_STATE = _RNG.normal(size=(2, 10)).astype("float32")
X = _RNG.normal(size=(2, 5, 8)).astype("float32")  # (batch, target_length, d_model)
CONTEXT = _RNG.normal(size=(2, 3, 8)).astype("float32")  # (batch, source_length, d_model)
X_MASK = np.array([[True, True, True, False, False], [True] * 5])


@dataclasses.dataclass
class Case:
    """One layer configuration and its inputs.

    `inputs`: call argument name → array, in call order; the float and int
    ones are the layer's tensor inputs, a bool one is a padding mask.
    `init`: returns the constructor arguments (a function, so that a layer
    passed as an argument is made inside the test, after the seeding).
    `mask_shape`: the shape of the Keras mask the layer puts on its output
    (None: it emits none). `hub_precision`: whether keras-hub's precision test
    applies (see the case for why not).
    """

    id: str
    layer_cls: type
    init: Callable[[], dict]
    inputs: dict
    output_shape: Any
    supports_masking: bool
    call_kwargs: dict = dataclasses.field(default_factory=dict)
    mask_shape: tuple | None = None
    hub_precision: bool = True

    @property
    def slow(self):
        return self.id in SLOW_CASES

    @property
    def tensor_inputs(self):
        """The inputs the harnesses build the layer from (not the masks)."""
        return {k: v for k, v in self.inputs.items() if v.dtype != bool}

    @property
    def masks(self):
        return {k: v for k, v in self.inputs.items() if v.dtype == bool}


def _attention_case(id, layer_cls, init, query=QUERY):
    return Case(id, layer_cls, init,
                {"query": query, "values": VALUES, "encoder_padding_mask": SOURCE_MASK},
                output_shape=((2, 4), (2, 3)), supports_masking=True)


def _decoder_case(id, attention, **init):
    inputs = {"target_in_ids": TARGET_IDS, "initial_state": QUERY}
    if attention is not None:
        inputs.update(values=VALUES, encoder_padding_mask=SOURCE_MASK)
    return Case(
        id, GRUDecoder,
        lambda: dict(vocab_size=11, embedding_dim=3, units=4, attention=attention,
                     attention_units=5, **init),
        inputs, output_shape=(2, 5, 11), supports_masking=False,
        # keras-hub's precision test wants every float output and every
        # sublayer in the compute dtype; GRUDecoder's output projection
        # computes in the variable dtype by design (float32 logits under
        # mixed_float16, as Keras advises for a model's last layer; the
        # class docstring says so). Keras' own mixed precision check, which
        # compares the outputs with the announced specs, still runs.
        hub_precision=False,
    )


def _encoder_case(id, **init):
    units = 3
    directions = 2 if init.get("bidirectional") else 1
    return Case(id, LSTMEncoder, lambda: dict(vocab_size=12, embedding_dim=3, units=units, **init),
                {"source_ids": SOURCE_IDS},
                output_shape=((2, 4, units * directions), (2, 2 * units * directions)),
                supports_masking=True,
                # keras-hub's precision test includes the `bfloat16` policy,
                # under which Keras' own LSTM cannot be built on TensorFlow's
                # CPU kernels (its orthogonal initializer's QR has no bfloat16
                # kernel). Keras' mixed_float16 check runs.
                hub_precision=False)


def _transformer_case(id, layer_cls, norm_first, with_mask=True, **init):
    inputs = {"x": X}
    if with_mask:
        mask_name = ("decoder_padding_mask" if layer_cls is CausalSelfAttention
                     else "encoder_padding_mask")
        inputs[mask_name] = X_MASK
    return Case(id, layer_cls,
                lambda: dict(d_model=8, num_heads=2, dropout=0.1, norm_first=norm_first, **init),
                inputs, output_shape=(2, 5, 8), supports_masking=True)


def _tied_projection():
    # The embedding is built here, as the model that owns it would
    # (OutputProjection reads its matrix, it does not build it).
    embedding = keras.layers.Embedding(11, 8, name="shared_embedding")
    embedding.build((None,))
    return dict(vocab_size=11, embedding=embedding)


CASES = [
    _attention_case("bahdanau", BahdanauAttention, lambda: dict(units=5)),
    _attention_case("luong-dot", LuongAttention, lambda: dict(score="dot")),
    _attention_case("luong-general", LuongAttention, lambda: dict(score="general"),
                    query=STATE),
    _attention_case("luong-concat", LuongAttention, lambda: dict(score="concat", units=5),
                    query=STATE),
    _attention_case("recurrent-attention-subclass", ScaledDotAttention, lambda: dict()),
    _decoder_case("gru-decoder-no-attention", None),
    _decoder_case("gru-decoder-no-context", None, feed_context=False),
    _decoder_case("gru-decoder-bahdanau", "bahdanau", dropout=0.1, sampling_probability=0.25,
                  seed=3),
    _decoder_case("gru-decoder-luong-dot", "luong_dot"),
    _decoder_case("gru-decoder-luong-general", "luong"),
    _decoder_case("gru-decoder-luong-concat", "luong_concat"),
    _encoder_case("lstm-encoder"),
    _encoder_case("lstm-encoder-bidirectional", bidirectional=True),
    _encoder_case("lstm-encoder-stacked", bidirectional=True, num_layers=2, dropout=0.1),
    Case("bridge", Bridge, lambda: dict(units=6), {"final_state": FINAL_STATE},
         output_shape=(2, 6), supports_masking=False),
    Case("positional-embedding", PositionalEmbedding,
         lambda: dict(vocab_size=11, d_model=8, max_positions=7), {"token_ids": TARGET_IDS},
         output_shape=(2, 5, 8), supports_masking=True, mask_shape=(2, 5)),
    Case("output-projection", OutputProjection, lambda: dict(vocab_size=11), {"x": X},
         output_shape=(2, 5, 11), supports_masking=True),
    Case("output-projection-no-bias", OutputProjection,
         lambda: dict(vocab_size=11, use_bias=False), {"x": X},
         output_shape=(2, 5, 11), supports_masking=True),
    Case("output-projection-tied", OutputProjection, _tied_projection, {"x": X},
         output_shape=(2, 5, 11), supports_masking=True,
         # keras-hub's precision test rebuilds a layer passed as an argument
         # from its config under each policy: a new, unbuilt embedding, which
         # OutputProjection does not build (see _tied_projection). Keras'
         # mixed precision check runs on the built one.
         hub_precision=False),
    Case("feed-forward", FeedForward, lambda: dict(d_model=8, dff=16, dropout=0.1), {"x": X},
         output_shape=(2, 5, 8), supports_masking=True),
    Case("feed-forward-pre-norm", FeedForward,
         lambda: dict(d_model=8, dff=16, activation="gelu", norm_first=True), {"x": X},
         output_shape=(2, 5, 8), supports_masking=True),
    Case("multi-head-attention", MultiHeadAttention, lambda: dict(num_heads=2, key_dim=4),
         {"query": X, "value": CONTEXT}, output_shape=(2, 5, 8), supports_masking=True),
    Case("multi-head-attention-output-dim", MultiHeadAttention,
         lambda: dict(num_heads=2, key_dim=3, dropout=0.1, output_dim=6),
         {"query": X, "value": CONTEXT}, output_shape=((2, 5, 6), (2, 2, 5, 3)),
         supports_masking=True, call_kwargs={"return_attention_scores": True}),
    _transformer_case("global-self-attention", GlobalSelfAttention, False),
    _transformer_case("global-self-attention-pre-norm", GlobalSelfAttention, True),
    _transformer_case("causal-self-attention", CausalSelfAttention, False),
    _transformer_case("causal-self-attention-pre-norm", CausalSelfAttention, True),
    Case("cross-attention", CrossAttention,
         lambda: dict(d_model=8, num_heads=2, dropout=0.1),
         {"x": X, "context": CONTEXT, "encoder_padding_mask": SOURCE_MASK},
         output_shape=(2, 5, 8), supports_masking=True),
    Case("cross-attention-pre-norm", CrossAttention,
         lambda: dict(d_model=8, num_heads=2, norm_first=True),
         {"x": X, "context": CONTEXT, "encoder_padding_mask": SOURCE_MASK},
         output_shape=(2, 5, 8), supports_masking=True),
    _transformer_case("encoder-block", TransformerEncoderBlock, False, dff=16),
    _transformer_case("encoder-block-pre-norm", TransformerEncoderBlock, True, dff=16),
    Case("decoder-block", TransformerDecoderBlock,
         lambda: dict(d_model=8, num_heads=2, dff=16, dropout=0.1),
         {"x": X, "context": CONTEXT, "decoder_padding_mask": X_MASK,
          "encoder_padding_mask": SOURCE_MASK},
         output_shape=(2, 5, 8), supports_masking=True),
    Case("decoder-block-pre-norm", TransformerDecoderBlock,
         lambda: dict(d_model=8, num_heads=2, dff=16, norm_first=True),
         {"x": X, "context": CONTEXT, "decoder_padding_mask": X_MASK,
          "encoder_padding_mask": SOURCE_MASK},
         output_shape=(2, 5, 8), supports_masking=True),
    _transformer_case("decoder-only-block", TransformerDecoderBlock, False, dff=16,
                      with_mask=False),
]

# The variants of a class that another case covers in `make test`: in
# `make test-all` only. Measured alone: the whole file about 110 CPU-s (its
# test calls 100), without them about 48 (its test calls 39).
SLOW_CASES = {
    "luong-dot", "luong-concat",
    "gru-decoder-no-attention", "gru-decoder-no-context", "gru-decoder-luong-dot",
    "gru-decoder-luong-general", "gru-decoder-luong-concat",
    "lstm-encoder-bidirectional", "lstm-encoder-stacked",
    "feed-forward-pre-norm", "multi-head-attention-output-dim",
    "global-self-attention-pre-norm", "causal-self-attention-pre-norm",
    "cross-attention-pre-norm", "encoder-block-pre-norm", "decoder-block-pre-norm",
    "decoder-only-block",
}

# (test, case id) → (the error it raises, the kerasseq bug behind it).
# A tie whose embedding is not in the layer's functional graph (this case: the
# embedding is built on its own) cannot be written into a config: saving or
# serializing refuses it with a ValueError that says how to wire it (issue 51
# item 4). tests/layers/test_output_projection.py saves, loads and clones the
# tie wired through a graph.
_TIE_REFUSED = ("by design: OutputProjection refuses to serialize a tie to an "
                "embedding outside its graph rather than load it untied")
KNOWN_FAILURES = {
    ("keras", "output-projection-tied"): (ValueError, _TIE_REFUSED),
    ("file", "output-projection-tied"): (ValueError, _TIE_REFUSED),
}


def _params(test, cases=CASES):
    marks = {case_id: pytest.mark.xfail(strict=True, raises=error, reason=reason)
             for (where, case_id), (error, reason) in KNOWN_FAILURES.items() if where == test}
    return [pytest.param(case, id=case.id, marks=(
        [marks[case.id]] if case.id in marks else []) + ([pytest.mark.slow] if case.slow else []))
            for case in cases]


def test_every_public_layer_has_a_case_outside_the_slow_tier():
    layers = {getattr(kerasseq.layers, name) for name in kerasseq.layers.__all__}
    layers = {layer for layer in layers if isinstance(layer, type)}
    covered = set()
    for case in CASES:
        if not case.slow:
            # A class written here stands for the public class it extends.
            covered.add(case.layer_cls.__mro__[case.layer_cls.__module__ == __name__])
    assert layers <= covered, sorted(layer.__name__ for layer in layers - covered)
    assert len({case.id for case in CASES}) == len(CASES)


def _keras_harness():
    # An instance only to call the harness's methods on; setUp() (Keras'
    # clear_session, traceback filtering off) is not run: the suite's fixture
    # checks that every test leaves Keras' settings as it found them.
    return keras_test_case.TestCase("run_layer_test")


def _hub_harness():
    return keras_hub_test_case.TestCase("run_layer_test")


# ------------------------------------------------------------ Keras' harness
@pytest.mark.parametrize("case", _params("keras"))
def test_keras_run_layer_test(case):
    init_kwargs = case.init()
    tensors = case.tensor_inputs
    common = dict(
        init_kwargs=init_kwargs,
        expected_output_shape=case.output_shape,
        supports_masking=case.supports_masking,
        # The padding masks go in as call arguments: the harness makes its
        # inputs from shapes and dtypes and its symbolic inputs from shapes,
        # and a mask is no tensor it can draw or train.
        call_kwargs={**case.masks, **case.call_kwargs},
    )
    if case.mask_shape is not None:
        common.update(expected_mask_shape=case.mask_shape)
    if len(tensors) == 1:
        _keras_harness().run_layer_test(case.layer_cls, input_data=next(iter(tensors.values())),
                                        **common)
    else:
        # Several tensor inputs: the harness builds them from `<name>_shape`
        # (the names of the layer's build() arguments) and calls
        # layer(**inputs). Its training step calls layer(inputs) with the
        # dict as one positional argument, which no multi-input layer takes:
        # test_keras_hub_harness trains these layers instead (keras-hub's
        # step calls layer(**inputs)).
        _keras_harness().run_layer_test(
            case.layer_cls,
            input_shape={f"{name}_shape": value.shape for name, value in tensors.items()},
            input_dtype={f"{name}_shape": str(value.dtype) for name, value in tensors.items()},
            run_training_check=False,
            **common,
        )


# --------------------------------------------------------- keras-hub's harness
def _weight_counts(case, init_kwargs):
    """keras-hub's harness wants the weight counts: those of an eagerly
    called layer, as Keras' harness estimates them; both then check that
    build() on the input shapes and a symbolic call create as many."""
    layer = case.layer_cls(**init_kwargs)
    layer(**case.tensor_inputs)
    return dict(expected_num_trainable_weights=len(layer.trainable_weights),
                expected_num_non_trainable_weights=len(layer.non_trainable_weights),
                expected_num_non_trainable_variables=len(layer.non_trainable_variables))


@pytest.mark.parametrize("case", _params("hub", [
    # With one tensor input keras-hub adds only its precision test.
    case for case in CASES if case.hub_precision or len(case.tensor_inputs) > 1]))
def test_keras_hub_harness(case):
    init_kwargs = case.init()
    # As tensors: keras-hub's precision test calls compute_output_spec() on
    # its inputs, and Keras' spec reads the shapes of tensor arguments only.
    tensors = {name: ops.convert_to_tensor(value) for name, value in case.tensor_inputs.items()}
    harness = _hub_harness()
    if len(tensors) > 1:
        # keras-hub's run_layer_test calls layer(**inputs) everywhere: its
        # build check (`<name>_shape` arguments), symbolic and eager calls,
        # and a compiled fit step on the multi-input layers that Keras'
        # harness cannot train. It takes no call arguments, so a layer gets
        # its tensor inputs only (masks are covered by the other two tests).
        output_shape = (case.output_shape[0] if case.call_kwargs.get("return_attention_scores")
                        else case.output_shape)
        harness.run_layer_test(
            case.layer_cls, init_kwargs, dict(tensors), expected_output_shape=output_shape,
            run_precision_checks=case.hub_precision, **_weight_counts(case, init_kwargs))
    else:
        # One tensor input: Keras' harness has run everything but the
        # precision test, which covers two more policies and the sublayers.
        harness.run_precision_test(case.layer_cls, init_kwargs, next(iter(tensors.values())))


# ------------------------------------------------------------ .keras round trip
def _symbolic_input(name, value):
    return keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name)


def _as_json(config):
    return json.loads(json.dumps(config))


@pytest.mark.parametrize("case", _params("file"))
def test_keras_file_round_trip(case):
    layer = case.layer_cls(**case.init())
    inputs = {name: _symbolic_input(name, value) for name, value in case.inputs.items()}
    outputs = layer(**inputs, **case.call_kwargs)
    model = keras.Model(inputs, outputs)
    expected = [ops.convert_to_numpy(x) for x in keras.tree.flatten(model(case.inputs))]
    # The config of the built layer (a sublayer given as an argument, such as
    # GRUDecoder's attention, is serialized with its build config once built).
    config = layer.get_config()
    assert case.layer_cls.from_config(config).get_config() == config
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
    loaded_layer = loaded.get_layer(layer.name)
    assert type(loaded_layer) is case.layer_cls
    # Through JSON: a .keras file stores tuples (build shapes) as lists.
    assert _as_json(loaded_layer.get_config()) == _as_json(config)
    assert len(loaded_layer.weights) == len(layer.weights)
    actual = [ops.convert_to_numpy(x) for x in keras.tree.flatten(loaded(case.inputs))]
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
