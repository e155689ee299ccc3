"""Attention sublayers skip padding positions in training: same real outputs,
same attention weights on real rows, same gradients (kerasseq.layers._padding)."""

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.layers import CausalSelfAttention, CrossAttention, GlobalSelfAttention

X_MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], bool)
CONTEXT_MASK = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0]], bool)


def _call(layer, x, context, training):
    if isinstance(layer, CrossAttention):
        return layer(x, context, context_mask=CONTEXT_MASK, padding_mask=X_MASK,
                     return_attention_scores=True, training=training)
    return layer(x, padding_mask=X_MASK, return_attention_scores=True, training=training)


@pytest.mark.parametrize("layer_class", [GlobalSelfAttention, CausalSelfAttention, CrossAttention])
@pytest.mark.parametrize("norm_first", [False, True])
def test_skipping_padding_keeps_real_outputs_scores_and_gradients(layer_class, norm_first):
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(3, 5, 8)).astype("float32"))
    context = tf.constant(rng.normal(size=(3, 4, 8)).astype("float32"))
    probe = rng.normal(size=(3, 5, 8)).astype("float32")
    layer = layer_class(d_model=8, num_heads=2, norm_first=norm_first)
    _call(layer, x, context, training=False)  # build

    def run(skip_padding):
        layer.skip_padding = skip_padding
        with tf.GradientTape() as tape:
            tape.watch([x, context])
            outputs, scores = _call(layer, x, context, training=True)
            loss = tf.reduce_sum(outputs * probe * X_MASK[..., None])
        gradients = tape.gradient(loss, [x, context] + layer.trainable_weights)
        return np.asarray(outputs), np.asarray(scores), gradients

    skipped, skipped_scores, skipped_gradients = run(True)
    full, full_scores, full_gradients = run(False)
    np.testing.assert_allclose(skipped[X_MASK], full[X_MASK], atol=1e-5)
    np.testing.assert_array_equal(skipped[~X_MASK], np.asarray(x)[~X_MASK])
    assert not np.allclose(full[~X_MASK], np.asarray(x)[~X_MASK])
    real_rows = np.broadcast_to(X_MASK[:, None, :, None], full_scores.shape)
    np.testing.assert_allclose(skipped_scores[real_rows], full_scores[real_rows], atol=1e-6)
    for skipped_gradient, full_gradient in zip(skipped_gradients, full_gradients, strict=True):
        if full_gradient is None:  # self-attention: the context is unused
            assert skipped_gradient is None
            continue
        np.testing.assert_allclose(skipped_gradient, full_gradient, atol=1e-5)


@pytest.mark.parametrize("layer_class", [GlobalSelfAttention, CausalSelfAttention, CrossAttention])
def test_every_position_is_computed_in_inference_and_under_xla(layer_class):
    rng = np.random.default_rng(4)
    x = tf.constant(rng.normal(size=(3, 5, 8)).astype("float32"))
    context = tf.constant(rng.normal(size=(3, 4, 8)).astype("float32"))
    layer = layer_class(d_model=8, num_heads=2)
    inference, _ = _call(layer, x, context, training=None)
    compiled = tf.function(lambda x, c: _call(layer, x, c, training=True)[0], jit_compile=True)
    np.testing.assert_allclose(compiled(x, context), inference, atol=1e-5)
    layer.skip_padding = False
    np.testing.assert_allclose(_call(layer, x, context, training=False)[0], inference, atol=1e-6)


def test_batches_with_little_padding_are_computed_in_full():
    # the gather / scatter only pays off with enough padding (_padding.SKIP_PADDING_BELOW)
    from kerasseq.layers import FeedForward

    rng = np.random.default_rng(5)
    x = tf.constant(rng.normal(size=(2, 5, 8)).astype("float32"))
    mostly_real = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], bool)  # 90 % real
    for layer in (FeedForward(d_model=8, dff=16), GlobalSelfAttention(d_model=8, num_heads=2)):
        full = np.asarray(layer(x, padding_mask=mostly_real, training=False))
        trained = np.asarray(layer(x, padding_mask=mostly_real, training=True))
        np.testing.assert_allclose(trained, full, atol=1e-6)  # padding computed, not kept
        assert not np.allclose(trained[1, 4], np.asarray(x)[1, 4])
