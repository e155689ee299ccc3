"""Tests for kerasseq.layers.global_self_attention."""

import keras
import numpy as np
import pytest

from kerasseq.layers.global_self_attention import GlobalSelfAttention
from kerasseq.layers.positional_embedding import PositionalEmbedding
from tests.layers.references import check_padded_layer, layer_norm, padded_inputs


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_keras_attention_with_add_and_norm(norm_first):
    x, padding_mask = padded_inputs(np.random.default_rng(0))
    layer = GlobalSelfAttention(d_model=8, num_heads=2, norm_first=norm_first)
    outputs = layer(x, encoder_padding_mask=padding_mask)
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    reference(x, x)
    reference.set_weights(layer.attention.get_weights())
    attention_mask = padding_mask[:, None, :]
    if norm_first:
        normed = layer_norm(x, layer.layer_norm).astype("float32")
        expected = x + keras.ops.convert_to_numpy(
            reference(normed, normed, attention_mask=attention_mask)
        )
    else:
        attended = keras.ops.convert_to_numpy(
            reference(x, x, attention_mask=attention_mask)
        )
        expected = layer_norm(x + attended, layer.layer_norm)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_extra_padding_changes_nothing_and_keras_mask_is_used():
    x, padding_mask = padded_inputs(np.random.default_rng(1))
    layer = GlobalSelfAttention(d_model=8, num_heads=2)
    short = layer(x[:1, :4])
    padded = layer(x[:1], encoder_padding_mask=padding_mask[:1])
    np.testing.assert_allclose(padded[:, :4], short, atol=1e-5)

    embedding = PositionalEmbedding(vocab_size=9, d_model=8, max_positions=10)
    token_ids = np.array([[3, 4, 5, 0, 0]])
    embedded = embedding(token_ids)  # carries the mask token_ids != 0
    np.testing.assert_allclose(
        layer(embedded), layer(embedded, encoder_padding_mask=token_ids != 0), atol=1e-6
    )
    np.testing.assert_array_equal(layer(embedded)._keras_mask, token_ids != 0)


def test_attention_scores_hide_padding():
    x, padding_mask = padded_inputs(np.random.default_rng(2))
    layer = GlobalSelfAttention(d_model=8, num_heads=2)
    _, scores = layer(x, encoder_padding_mask=padding_mask, return_attention_scores=True)
    scores = keras.ops.convert_to_numpy(scores)
    assert scores.shape == (2, 2, 6, 6)
    np.testing.assert_array_equal(scores[0, :, :, 4:], 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_check_layer(norm_first):
    check_padded_layer(GlobalSelfAttention, 3, dropout=0.1, norm_first=norm_first)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="d_model=10, num_heads=3"):
        GlobalSelfAttention(d_model=10, num_heads=3)
    with pytest.raises(ValueError, match="d_model=8"):
        GlobalSelfAttention(d_model=8, num_heads=2)(np.zeros((1, 3, 6), "float32"))
