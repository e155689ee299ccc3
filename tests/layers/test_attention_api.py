"""The one attention API of issue 24: names, return shapes, deprecated aliases."""

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
    _attention_math,
    multi_head_attention,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 4, 8)).astype("float32")
CONTEXT = RNG.normal(size=(2, 5, 8)).astype("float32")
TARGET_MASK = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
SOURCE_MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)


def test_one_masked_softmax():
    assert multi_head_attention.masked_softmax is _attention_math.masked_softmax
    weights = keras.ops.convert_to_numpy(_attention_math.masked_softmax(
        np.ones((2, 3), "float16"), np.array([[1, 0, 1], [0, 0, 0]], bool)))
    assert weights.dtype == np.float32
    np.testing.assert_allclose(weights, [[0.5, 0, 0.5], [0, 0, 0]])


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
    cache = block.build_cache(2, 6, CONTEXT)
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


def _warns(function, *args, **kwargs):
    with pytest.warns(DeprecationWarning, match="deprecated"):
        return function(*args, **kwargs)


def test_old_mask_names_are_deprecated_aliases():
    encoder_block = TransformerEncoderBlock(d_model=8, num_heads=2, dff=16)
    new = encoder_block(CONTEXT, encoder_padding_mask=SOURCE_MASK)
    np.testing.assert_array_equal(_warns(encoder_block, CONTEXT, padding_mask=SOURCE_MASK), new)
    global_attention = GlobalSelfAttention(d_model=8, num_heads=2)
    new = global_attention(CONTEXT, encoder_padding_mask=SOURCE_MASK)
    np.testing.assert_array_equal(
        _warns(global_attention, CONTEXT, padding_mask=SOURCE_MASK), new)
    causal = CausalSelfAttention(d_model=8, num_heads=2)
    new = causal(X, decoder_padding_mask=TARGET_MASK)
    np.testing.assert_array_equal(_warns(causal, X, padding_mask=TARGET_MASK), new)
    block = TransformerDecoderBlock(d_model=8, num_heads=2, dff=16)
    new = block(X, CONTEXT, decoder_padding_mask=TARGET_MASK, encoder_padding_mask=SOURCE_MASK)
    old = _warns(block, X, CONTEXT, target_padding_mask=TARGET_MASK,
                 source_padding_mask=SOURCE_MASK)
    np.testing.assert_array_equal(old, new)
    with pytest.raises(ValueError, match="Pass only `encoder_padding_mask`"):
        block(X, CONTEXT, encoder_padding_mask=SOURCE_MASK, source_padding_mask=SOURCE_MASK)
    _warns(FeedForward(d_model=8, dff=16), X, padding_mask=TARGET_MASK)
    _warns(CrossAttention(d_model=8, num_heads=2), X, CONTEXT, padding_mask=TARGET_MASK)
    query = RNG.normal(size=(2, 8)).astype("float32")
    for attention in (BahdanauAttention(units=4), LuongAttention("general")):
        assert isinstance(attention, RecurrentAttention)
        new = attention(query, CONTEXT, encoder_padding_mask=SOURCE_MASK)
        old = _warns(attention, query, CONTEXT, mask=SOURCE_MASK)
        np.testing.assert_array_equal(old[1], new[1])
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(new[1])[0, 3:], 0.0)
    decoder = GRUDecoder(vocab_size=9, embedding_dim=4, units=8, attention="bahdanau")
    ids, state = np.array([[2, 3, 4], [2, 5, 0]]), np.zeros((2, 8), "float32")
    new = decoder(ids, state, CONTEXT, encoder_padding_mask=SOURCE_MASK)
    np.testing.assert_array_equal(_warns(decoder, ids, state, CONTEXT, source_mask=SOURCE_MASK),
                                  new)


def test_old_cache_methods_are_deprecated_aliases():
    block = TransformerDecoderBlock(d_model=8, num_heads=2, dff=16)
    block(X, CONTEXT)
    self_cache, cross_cache = block.build_cache(2, 6, CONTEXT)
    old_self = _warns(block.init_self_cache, 2, 6)
    old_cross = _warns(block.compute_cross_cache, CONTEXT)
    np.testing.assert_array_equal(old_self[0], self_cache[0])
    np.testing.assert_array_equal(old_cross[1], cross_cache[1])
    np.testing.assert_array_equal(
        _warns(block.causal_self_attention.init_cache, 2, 6)[0], self_cache[0])
    np.testing.assert_array_equal(
        _warns(block.cross_attention.compute_cache, CONTEXT)[0], cross_cache[0])
    np.testing.assert_array_equal(
        _warns(block.cross_attention.attention.compute_key_value, CONTEXT)[0], cross_cache[0])

    outputs, (new_self, _), scores = block.call_step(
        X[:, :1], 0, (self_cache, cross_cache), encoder_padding_mask=SOURCE_MASK)
    old_outputs, old_self, old_scores = _warns(
        block.call_step, X[:, :1], 0, self_cache, *cross_cache, SOURCE_MASK)
    np.testing.assert_array_equal(old_outputs, outputs)
    np.testing.assert_array_equal(old_self[0], new_self[0])
    old_outputs, old_scores = _warns(
        block.cross_attention.call_step, X[:, :1], *cross_cache, context_mask=SOURCE_MASK)
    assert tuple(old_scores.shape) == (2, 2, 1, 5)

    attention = block.causal_self_attention.attention
    x = X[:, :1]
    output, cache = _warns(attention, x, x, cache=self_cache, cache_index=0)
    expected, _, _ = attention.call_step(x, 0, self_cache)
    np.testing.assert_array_equal(output, expected)


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
