"""Tests for kerasseq.layers.causal_self_attention, including causality with
returned scores and with dropout in training mode (keras-team/keras#23038)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq.layers.causal_self_attention import (
    CausalSelfAttention,
    causal_attention_mask,
)
from tests.layers.references import check_padded_layer, layer_norm, padded_inputs


def test_causal_attention_mask():
    expected = np.tril(np.ones((4, 4), bool))
    np.testing.assert_array_equal(causal_attention_mask(4, 4)[0], expected)
    # One query at position 2 over a cache of length 5 sees keys 0..2.
    np.testing.assert_array_equal(
        causal_attention_mask(1, 5, query_offset=2)[0], [[1, 1, 1, 0, 0]]
    )


def test_matches_keras_causal_attention_with_add_and_norm():
    x, padding_mask = padded_inputs(np.random.default_rng(0))
    layer = CausalSelfAttention(d_model=8, num_heads=2)
    outputs = layer(x, decoder_padding_mask=padding_mask)
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    reference(x, x)
    reference.set_weights(layer.attention.get_weights())
    attended = reference(
        x, x, attention_mask=padding_mask[:, None, :], use_causal_mask=True
    )
    expected = layer_norm(x + keras.ops.convert_to_numpy(attended), layer.layer_norm)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


@pytest.mark.parametrize("return_attention_scores", [False, True])
def test_changing_future_tokens_changes_no_earlier_output(return_attention_scores):
    x, padding_mask = padded_inputs(np.random.default_rng(1))
    changed = x.copy()
    changed[:, 3:] += 5.0
    layer = CausalSelfAttention(d_model=8, num_heads=2)
    first = layer(x, return_attention_scores=return_attention_scores)
    second = layer(changed, return_attention_scores=return_attention_scores)
    if return_attention_scores:
        (first, scores), (second, _) = first, second
        scores = keras.ops.convert_to_numpy(scores)
        assert np.all(np.triu(np.ones((6, 6)), k=1) * scores == 0.0)
    np.testing.assert_allclose(first[:, :3], second[:, :3], atol=1e-6)
    assert not np.allclose(first[:, 3:], second[:, 3:])


@pytest.mark.parametrize("return_attention_scores", [False, True])
def test_causal_with_dropout_in_training_mode(return_attention_scores):
    # Dropout draws new noise on every call, so causality is checked within one
    # call: the gradient of the first outputs with respect to later inputs is 0.
    x = tf.constant(np.random.default_rng(2).normal(size=(2, 6, 8)), "float32")
    layer = CausalSelfAttention(d_model=8, num_heads=2, dropout=0.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = layer(
            x, training=True, return_attention_scores=return_attention_scores
        )
        if return_attention_scores:
            outputs, scores = outputs
            assert np.all(np.triu(np.ones((6, 6)), k=1) * scores.numpy() == 0.0)
        loss = tf.reduce_sum(outputs[:, :3] ** 2)
    gradient = tape.gradient(loss, x).numpy()
    assert np.all(gradient[:, 3:] == 0.0)
    assert np.any(gradient[:, :3] != 0.0)


def test_call_step_matches_full_call():
    x, _ = padded_inputs(np.random.default_rng(3))
    layer = CausalSelfAttention(d_model=8, num_heads=2)
    full = keras.ops.convert_to_numpy(layer(x))
    cache = layer.build_cache(batch_size=2, max_length=9)
    assert tuple(cache[0].shape) == (2, 9, 2, 4)
    for t in range(6):
        step, cache, _ = layer.call_step(x[:, t : t + 1], t, cache)
        np.testing.assert_allclose(step[:, 0], full[:, t], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_check_layer(norm_first):
    check_padded_layer(CausalSelfAttention, 4, dropout=0.1, norm_first=norm_first)
