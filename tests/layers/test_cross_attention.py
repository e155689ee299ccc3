"""Tests for kerasseq.layers.cross_attention."""

import keras
import numpy as np
import pytest

from kerasseq.layers.cross_attention import CrossAttention
from kerasseq.layers.positional_embedding import PositionalEmbedding
from kerasseq.models.transformer_seq2seq import _shared_source_cross_attention
from tests.helpers import check_layer
from tests.layers.references import layer_norm


def _inputs(rng):
    x = rng.normal(size=(2, 4, 8)).astype("float32")
    context = rng.normal(size=(2, 5, 8)).astype("float32")
    context_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    return x, context, context_mask


def test_matches_keras_attention_with_add_and_norm():
    x, context, context_mask = _inputs(np.random.default_rng(0))
    layer = CrossAttention(d_model=8, num_heads=2)
    outputs, scores = layer(
        x, context, encoder_padding_mask=context_mask, return_attention_scores=True
    )
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    reference(x, context)
    reference.set_weights(layer.attention.get_weights())
    attended, ref_scores = reference(
        x,
        context,
        attention_mask=context_mask[:, None, :],
        return_attention_scores=True,
    )
    expected = layer_norm(x + keras.ops.convert_to_numpy(attended), layer.layer_norm)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)


def test_scores_shape_padding_and_last_attention_scores():
    x, context, context_mask = _inputs(np.random.default_rng(1))
    layer = CrossAttention(d_model=8, num_heads=2)
    assert layer.last_attention_scores is None
    layer(x, context, encoder_padding_mask=context_mask)
    scores = keras.ops.convert_to_numpy(layer.last_attention_scores)
    assert scores.shape == (2, 2, 4, 5)  # (batch, heads, target, source)
    np.testing.assert_array_equal(scores[0, :, :, 3:], 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)


def test_extra_source_padding_changes_nothing():
    x, context, _ = _inputs(np.random.default_rng(2))
    layer = CrossAttention(d_model=8, num_heads=2)
    short = layer(x, context[:, :3])
    padded_context = np.concatenate([context[:, :3], 100 * np.ones((2, 4, 8))], 1)
    mask = np.arange(7)[None, :].repeat(2, 0) < 3
    padded = layer(x, padded_context.astype("float32"), encoder_padding_mask=mask)
    np.testing.assert_allclose(padded, short, atol=1e-5)


def test_keras_mask_of_the_context_is_used():
    x, _, _ = _inputs(np.random.default_rng(3))
    embedding = PositionalEmbedding(vocab_size=9, d_model=8, max_positions=10)
    source_ids = np.array([[3, 4, 0, 0, 0], [5, 6, 7, 8, 1]])
    context = embedding(source_ids)
    layer = CrossAttention(d_model=8, num_heads=2)
    np.testing.assert_allclose(
        layer(x, context), layer(x, context, encoder_padding_mask=source_ids != 0), atol=1e-6
    )


def test_call_step_with_precomputed_keys_and_values():
    x, context, context_mask = _inputs(np.random.default_rng(4))
    layer = CrossAttention(d_model=8, num_heads=2, norm_first=True)
    full, full_scores = layer(
        x, context, encoder_padding_mask=context_mask, return_attention_scores=True
    )
    cross_key, cross_value = layer.build_cache(context=context)
    assert tuple(cross_key.shape) == (2, 5, 2, 4)
    for t in range(4):
        step, _, scores = layer.call_step(
            x[:, t : t + 1], None, (cross_key, cross_value), encoder_padding_mask=context_mask
        )
        np.testing.assert_allclose(step[:, 0], full[:, t], atol=1e-5)
        np.testing.assert_allclose(scores[:, :, 0], full_scores[:, :, t], atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_call_step_with_shared_keys_equals_tiled_keys(norm_first):
    """Hypotheses of one source (adjacent rows) attend one untiled copy of its keys
    (`TransformerSeq2Seq.decode_step`'s `_shared_source_cross_attention`)."""
    rng = np.random.default_rng(7)
    x, context, context_mask = _inputs(rng)  # 2 sources
    layer = CrossAttention(d_model=8, num_heads=2, norm_first=norm_first)
    layer(x, context, encoder_padding_mask=context_mask)
    cross_key, cross_value = layer.build_cache(context=context)  # (2, 5, 2, 4)
    group = 3
    x_step = rng.normal(size=(2 * group, 1, 8)).astype("float32")  # 3 hypotheses per source
    tiled_mask = np.repeat(context_mask, group, axis=0)
    tiled, _, tiled_scores = layer.call_step(
        x_step, None, (np.repeat(cross_key, group, axis=0), np.repeat(cross_value, group, axis=0)),
        encoder_padding_mask=tiled_mask,
    )
    for mask in (tiled_mask, context_mask):  # the mask may be tiled or not
        shared, shared_scores = _shared_source_cross_attention(
            layer, x_step, (cross_key, cross_value), mask)
        np.testing.assert_allclose(shared, tiled, atol=1e-6)
        np.testing.assert_allclose(shared_scores, tiled_scores, atol=1e-6)
    assert tuple(shared_scores.shape) == (2 * group, 2, 1, 5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_check_layer(norm_first):
    x, context, context_mask = _inputs(np.random.default_rng(5))
    check_layer(
        CrossAttention,
        {"d_model": 8, "num_heads": 2, "norm_first": norm_first},
        [x, context, context_mask],
        call_kwargs={"return_attention_scores": True},
    )


def test_build_cache_takes_the_context_only():
    x, context, _ = _inputs(np.random.default_rng(6))
    layer = CrossAttention(d_model=8, num_heads=2)
    layer(x, context)
    with pytest.raises(ValueError, match="build_cache\\(context=encoder_outputs\\)"):
        layer.build_cache(batch_size=2, max_length=4)
    with pytest.raises(ValueError, match="step_index must be None"):
        layer.call_step(x[:, :1], 0, layer.build_cache(context=context))
