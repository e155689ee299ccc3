"""The one attention API of issue 24: names and return shapes."""

import inspect

import keras
import numpy as np
import pytest

from kerasseq.layers import (
    BahdanauAttention,
    CausalSelfAttention,
    CrossAttention,
    FeedForward,
    GlobalSelfAttention,
    GRUDecoder,
    LuongAttention,
    MultiHeadAttention,
    RecurrentAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    multi_head_attention,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 4, 8)).astype("float32")
CONTEXT = RNG.normal(size=(2, 5, 8)).astype("float32")
SOURCE_MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)


class _ConstantScore(RecurrentAttention):
    """Every source position scores 1: the weights are the masked softmax alone."""

    def score(self, query, keys):
        return keras.ops.ones(keras.ops.shape(keys)[:2], keys.dtype)


def test_recurrent_attention_masked_softmax_in_float32():
    values = np.ones((2, 3, 4), "float16")
    mask = np.array([[1, 0, 1], [0, 0, 0]], bool)
    _, weights = _ConstantScore(dtype="float16")(np.ones((2, 4), "float16"), values,
                                                 encoder_padding_mask=mask)
    # a fully masked row gets zero weights, never NaN or uniform ones
    np.testing.assert_allclose(keras.ops.convert_to_numpy(weights), [[0.5, 0, 0.5], [0, 0, 0]])


def test_multi_head_attention_is_keras_with_keras_weight_layout():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    assert isinstance(layer, keras.layers.MultiHeadAttention)
    layer(X, CONTEXT)
    names = [v.path.split("/")[-2:] for v in layer.weights]
    assert names == [
        [name, kind]
        for name in ("query", "key", "value", "attention_output")
        for kind in ("kernel", "bias")
    ]
    assert layer.get_config()["output_dim"] is None


def test_call_step_has_one_signature_and_one_return_shape():
    block = TransformerDecoderBlock(d_model=8, num_heads=2, dff=16)
    block(X, CONTEXT)
    cache = block.build_cache(batch_size=2, max_length=6, context=CONTEXT)
    outputs = block.call_step(X[:, :1], 0, cache, encoder_padding_mask=SOURCE_MASK)
    assert len(outputs) == 3 and len(outputs[1]) == 2
    causal = block.causal_self_attention
    outputs = causal.call_step(X[:, :1], 0, cache[0])
    assert len(outputs) == 3 and tuple(outputs[2].shape) == (2, 2, 1, 6)
    cross = block.cross_attention
    outputs = cross.call_step(X[:, :1], None, cache[1], encoder_padding_mask=SOURCE_MASK)
    assert len(outputs) == 3 and tuple(outputs[2].shape) == (2, 2, 1, 5)
    output, mha_cache, scores = causal.attention.call_step(
        X[:, :1], 0, cache[0], attention_mask=np.ones((1, 1, 6), bool))
    assert tuple(output.shape) == (2, 1, 8) and len(mha_cache) == 2
    with pytest.raises(ValueError, match="encoder_padding_mask must be None"):
        causal.call_step(X[:, :1], 0, cache[0], encoder_padding_mask=SOURCE_MASK)
    with pytest.raises(ValueError, match="step_index must be None"):
        cross.call_step(X[:, :1], 0, cache[1])
    with pytest.raises(ValueError, match="step_index=None"):
        causal.call_step(X[:, :1], None, cache[0])


def test_multi_head_attention_softmax_equals_keras_masked_softmax_in_float32():
    layer = multi_head_attention.MultiHeadAttention(num_heads=2, key_dim=4)
    layer(X, CONTEXT)
    mask = np.array([[[1, 1, 0, 0, 0]] * 4, [[0, 0, 0, 0, 0]] + [[1, 1, 1, 1, 1]] * 3], bool)
    q, k = layer.query_dense(X), layer.key_dense(CONTEXT)
    _, weights = layer.attend(q, k, layer.value_dense(CONTEXT), mask)
    scores = np.einsum("bshd,bthd->bhts", k, q) / np.sqrt(4.0)
    expected = keras.layers.Softmax(dtype="float32")(scores, mask=mask[:, None])
    np.testing.assert_allclose(weights, expected, atol=1e-6)
    assert not np.asarray(weights)[1, :, 0].any()  # a fully masked row: zeros


def test_a_one_token_sequence_attends_without_a_warning(recwarn):
    # Keras' Softmax warns "softmax over axis -1 ... of size 1" (an error in this
    # suite); one token attending to itself is a legitimate attention.
    x = X[:, :1]
    outputs, weights = CausalSelfAttention(d_model=8, num_heads=2)(x, return_attention_scores=True)
    np.testing.assert_allclose(weights, np.ones((2, 2, 1, 1)))
    assert not [w for w in recwarn if "softmax" in str(w.message)]


def test_one_build_cache_signature():
    signatures = {cls.__name__: str(inspect.signature(cls.build_cache)) for cls in (
        MultiHeadAttention, CausalSelfAttention, CrossAttention, TransformerDecoderBlock)}
    assert set(signatures.values()) == {"(self, batch_size=None, max_length=None, context=None)"}


@pytest.mark.parametrize("cls, uses_context", [(GlobalSelfAttention, False),
                                                (CausalSelfAttention, False),
                                                (CrossAttention, True)])
def test_attention_output_spec_under_mixed_float16(cls, uses_context):
    """A float32 spec under `mixed_float16`: `compute_output_shape` of a
    functional model on a new length, and the layer's own spec (issue 51)."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inputs = [keras.Input((None, 8)) for _ in range(1 + uses_context)]
        layer = cls(d_model=8, num_heads=2)
        outputs, scores = layer(*inputs, return_attention_scores=True)
        assert outputs.dtype == scores.dtype == "float16"
        model = keras.Model(inputs, [outputs, scores])
        shapes = [(2, 7, 8), (2, 3, 8)][: 1 + uses_context]
        assert list(model.compute_output_shape(shapes)) == [(2, 7, 8),
                                                            (2, 2, 7, 3 if uses_context else 7)]
        specs = [keras.KerasTensor(shape, "float32") for shape in shapes]
        assert tuple(layer.compute_output_spec(*specs).shape) == (2, 7, 8)
    finally:
        keras.mixed_precision.set_global_policy(previous)


def test_one_name_per_mask():
    # every padding mask is named by the sequence it covers; the layers take
    # no other name for it and no argument without an effect
    names = {
        TransformerEncoderBlock: "encoder_padding_mask",
        GlobalSelfAttention: "encoder_padding_mask",
        CausalSelfAttention: "decoder_padding_mask",
        TransformerDecoderBlock: "decoder_padding_mask",
        CrossAttention: "encoder_padding_mask",
        RecurrentAttention: "encoder_padding_mask",
        GRUDecoder: "encoder_padding_mask",
    }
    for layer_class, name in names.items():
        parameters = inspect.signature(layer_class.call).parameters
        assert name in parameters, layer_class.__name__
        assert not {"padding_mask", "source_mask", "source_padding_mask",
                    "target_padding_mask"} & set(parameters), layer_class.__name__
    assert set(inspect.signature(FeedForward.call).parameters) == {"self", "x", "training"}


def test_recurrent_attentions_give_padding_zero_weight():
    query = RNG.normal(size=(2, 8)).astype("float32")
    for attention in (BahdanauAttention(units=4), LuongAttention("general")):
        assert isinstance(attention, RecurrentAttention)
        _, weights = attention(query, CONTEXT, encoder_padding_mask=SOURCE_MASK)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weights)[0, 3:], 0.0)


def test_gru_decoder_seed_is_in_its_config():
    decoder = GRUDecoder(vocab_size=9, embedding_dim=4, units=8, seed=3)
    assert decoder.get_config()["seed"] == 3
    assert GRUDecoder(vocab_size=9, embedding_dim=4, units=8).get_config()["seed"] is None


def test_multi_head_attention_honours_the_keras_mask_of_value():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    token_ids = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 1]])
    value = keras.layers.Embedding(10, 8, mask_zero=True)(token_ids)
    implicit, scores = layer(X, value, return_attention_scores=True)
    explicit = layer(X, value, attention_mask=(token_ids != 0)[:, None, :])
    np.testing.assert_allclose(implicit, explicit, atol=1e-6)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(scores)[0, :, :, 3:], 0.0)
