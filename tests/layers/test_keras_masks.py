"""Keras masks are honoured by every attention layer and by GRUDecoder: inputs
from `Embedding(mask_zero=True)` (or LSTMEncoder, whose outputs carry a mask)
give the same results padded as unpadded, with no explicit mask argument."""

import keras
import numpy as np
import pytest

from kerasseq.layers import (
    BahdanauAttention,
    CrossAttention,
    GlobalSelfAttention,
    GRUDecoder,
    LSTMEncoder,
    LuongAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

IDS = np.array([[3, 5, 7, 0, 0, 0], [2, 4, 6, 8, 9, 0]])  # padded with 0
REAL = 3  # real tokens of row 0


def _embedding(dim):
    keras.utils.set_random_seed(0)
    return keras.layers.Embedding(10, dim, mask_zero=True)


@pytest.mark.parametrize(
    "make_layer, query_dim",
    [
        (lambda: BahdanauAttention(units=5), 4),
        (lambda: LuongAttention(score="dot"), 6),
        (lambda: LuongAttention(score="general"), 6),
        (lambda: LuongAttention(score="concat", units=5), 6),
    ],
    ids=["bahdanau", "luong-dot", "luong-general", "luong-concat"],
)
def test_rnn_attention_uses_the_mask_on_values(make_layer, query_dim):
    embedding, layer = _embedding(6), make_layer()
    query = np.random.default_rng(0).normal(size=(1, query_dim)).astype("float32")
    padded, unpadded = embedding(IDS[:1]), embedding(IDS[:1, :REAL])
    context, weights = layer(query, padded)
    expected_context, expected_weights = layer(query, unpadded)
    np.testing.assert_array_equal(np.asarray(weights)[0, REAL:], 0.0)
    np.testing.assert_allclose(weights[:, :REAL], expected_weights, atol=1e-6)
    np.testing.assert_allclose(context, expected_context, atol=1e-6)
    # Same as Keras' own AdditiveAttention convention: an explicit mask wins.
    explicit = np.array([[True, False, True, False, False, False]])
    _, weights = layer(query, padded, encoder_padding_mask=explicit)
    assert np.asarray(weights)[0, 1] == 0.0 and np.asarray(weights)[0, 0] > 0.0


def test_bahdanau_pads_get_zero_weight_like_keras_additive_attention():
    embedding = _embedding(6)
    values = embedding(IDS)
    keras_weights = keras.layers.AdditiveAttention()(
        [values[:, :1], values], return_attention_scores=True
    )[1]
    ours = BahdanauAttention(units=5)(np.ones((2, 4), "float32"), values)[1]
    padding = ~np.asarray(IDS != 0)
    np.testing.assert_array_equal(np.asarray(keras_weights)[:, 0][padding], 0.0)
    np.testing.assert_array_equal(np.asarray(ours)[padding], 0.0)


def test_gru_decoder_uses_the_mask_on_lstm_encoder_outputs():
    keras.utils.set_random_seed(0)
    encoder = LSTMEncoder(vocab_size=10, embedding_dim=4, units=5)
    decoder = GRUDecoder(vocab_size=12, embedding_dim=4, units=5, attention="bahdanau")
    target = np.array([[1, 4, 2, 7]])
    outputs, state = encoder(IDS[:1])
    short_outputs, short_state = encoder(IDS[:1, :REAL])
    np.testing.assert_allclose(state, short_state, atol=1e-6)
    logits, weights = decoder(target, state[:, :5], outputs, return_attention_scores=True)
    expected = decoder(target, short_state[:, :5], short_outputs)
    np.testing.assert_array_equal(np.asarray(weights)[0, :, REAL:], 0.0)
    np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_gru_decoder_in_a_functional_model_uses_the_mask():
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    outputs, state = LSTMEncoder(vocab_size=10, embedding_dim=4, units=5)(source)
    state = keras.layers.Dense(5)(state)
    logits = GRUDecoder(vocab_size=12, embedding_dim=4, units=5, attention="luong")(
        target, state, outputs
    )
    model = keras.Model([source, target], logits)
    tgt = np.array([[1, 4, 2]])
    np.testing.assert_allclose(
        model([IDS[:1], tgt]), model([IDS[:1, :REAL], tgt]), atol=1e-5
    )


def _transformer_cases():
    return [
        ("cross", lambda: CrossAttention(d_model=6, num_heads=2), True),
        ("decoder-block", lambda: TransformerDecoderBlock(6, 2, 12), True),
        ("global-self", lambda: GlobalSelfAttention(d_model=6, num_heads=2), False),
        ("encoder-block", lambda: TransformerEncoderBlock(6, 2, 12), False),
    ]


@pytest.mark.parametrize(
    "make_layer, uses_context",
    [case[1:] for case in _transformer_cases()],
    ids=[case[0] for case in _transformer_cases()],
)
def test_transformer_layers_use_the_mask_on_their_inputs(make_layer, uses_context):
    embedding, layer = _embedding(6), make_layer()
    if uses_context:
        x = np.random.default_rng(0).normal(size=(1, 4, 6)).astype("float32")
        padded = layer(x, embedding(IDS[:1]))
        unpadded = layer(x, embedding(IDS[:1, :REAL]))
        np.testing.assert_allclose(padded, unpadded, atol=1e-5)
    else:
        padded = layer(embedding(IDS[:1]))
        unpadded = layer(embedding(IDS[:1, :REAL]))
        np.testing.assert_allclose(np.asarray(padded)[:, :REAL], unpadded, atol=1e-5)
