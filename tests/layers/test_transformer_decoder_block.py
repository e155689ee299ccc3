"""Tests for kerasseq.layers.transformer_decoder_block: keras-hub equivalence,
causality, source padding, incremental (KV-cache) decoding, mixed precision."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kerasseq.layers.positional_embedding import PositionalEmbedding
from kerasseq.layers.transformer_decoder_block import TransformerDecoderBlock
from tests.helpers import check_layer
from tests.layers.references import copy_into_keras_hub, randomize_layer_norms

D_MODEL, NUM_HEADS, DFF = 8, 2, 16


def _inputs(rng, target_length=6, source_length=5):
    x = rng.normal(size=(2, target_length, D_MODEL)).astype("float32")
    context = rng.normal(size=(2, source_length, D_MODEL)).astype("float32")
    target_padding_mask = np.ones((2, target_length), bool)
    target_padding_mask[0, -2:] = False
    source_padding_mask = np.ones((2, source_length), bool)
    source_padding_mask[0, 3:] = False
    return x, context, target_padding_mask, source_padding_mask


def _block(**kwargs):
    return TransformerDecoderBlock(
        d_model=D_MODEL, num_heads=NUM_HEADS, dff=DFF, **kwargs
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_keras_hub_transformer_decoder(norm_first):
    x, context, target_mask, source_mask = _inputs(np.random.default_rng(0))
    block = _block(norm_first=norm_first, layer_norm_epsilon=1e-6)
    block(x, context)
    randomize_layer_norms(block, np.random.default_rng(1))
    outputs = block(x, context, target_mask, source_mask)

    reference = keras_hub.layers.TransformerDecoder(
        intermediate_dim=DFF,
        num_heads=NUM_HEADS,
        normalize_first=norm_first,
        layer_norm_epsilon=1e-6,
    )
    reference(x, context)
    copy_into_keras_hub(block, reference)
    expected = reference(
        x, context, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask
    )
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_changing_future_target_tokens_changes_no_earlier_output():
    x, context, target_mask, source_mask = _inputs(np.random.default_rng(2))
    block = _block()
    changed = x.copy()
    changed[:, 2:] = np.random.default_rng(3).normal(size=changed[:, 2:].shape)
    first = block(x, context, encoder_padding_mask=source_mask)
    second = block(changed, context, encoder_padding_mask=source_mask)
    np.testing.assert_allclose(first[:, :2], second[:, :2], atol=1e-6)
    assert not np.allclose(first[:, 2:], second[:, 2:])


def test_extra_source_padding_changes_nothing():
    x, context, _, _ = _inputs(np.random.default_rng(4))
    block = _block()
    short = block(x, context[:, :3])
    padded_context = np.concatenate([context[:, :3], np.full((2, 4, 8), 7.0)], axis=1)
    source_mask = np.arange(7)[None].repeat(2, 0) < 3
    padded = block(x, padded_context.astype("float32"), encoder_padding_mask=source_mask)
    np.testing.assert_allclose(padded, short, atol=1e-5)


def test_keras_masks_on_inputs_are_honoured():
    target_ids = np.array([[1, 4, 5, 0], [2, 3, 4, 5]])
    source_ids = np.array([[6, 7, 0, 0, 0], [6, 7, 8, 9, 1]])
    target_embedding = PositionalEmbedding(vocab_size=10, d_model=8, max_positions=8)
    source_embedding = PositionalEmbedding(vocab_size=10, d_model=8, max_positions=8)
    block = _block()
    x, context = target_embedding(target_ids), source_embedding(source_ids)
    implicit, scores = block(x, context, return_attention_scores=True)
    explicit = block(x, context, target_ids != 0, source_ids != 0)
    np.testing.assert_allclose(implicit, explicit, atol=1e-6)
    np.testing.assert_array_equal(implicit._keras_mask, target_ids != 0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(scores)[0, :, :, 2:], 0.0)

    # The same in a functional model: masks flow from the embeddings.
    target_in = keras.Input((None,), dtype="int32")
    source_in = keras.Input((None,), dtype="int32")
    outputs = block(target_embedding(target_in), source_embedding(source_in))
    model = keras.Model([target_in, source_in], outputs)
    np.testing.assert_allclose(model([target_ids, source_ids]), explicit, atol=1e-5)


def _run_incrementally(blocks, x, context, source_mask, max_length, step_fn=None):
    """Decodes position by position through a stack of blocks with KV caches."""
    batch_size, target_length, _ = x.shape
    caches = [b.build_cache(batch_size, max_length, context) for b in blocks]
    outputs, all_scores = [], []
    for t in range(target_length):
        hidden = x[:, t : t + 1]
        for i, block in enumerate(blocks):
            call = step_fn or block.call_step
            hidden, caches[i], scores = call(
                hidden,
                t if step_fn is None else tf.constant(t),
                caches[i],
                encoder_padding_mask=source_mask,
            )
            assert tuple(scores.shape) == (batch_size, NUM_HEADS, 1, context.shape[1])
        outputs.append(keras.ops.convert_to_numpy(hidden)[:, 0])
        all_scores.append(keras.ops.convert_to_numpy(scores)[:, :, 0])
    return np.stack(outputs, axis=1), np.stack(all_scores, axis=2)


@pytest.mark.parametrize("num_blocks,norm_first", [(1, False), (2, False), (2, True)])
def test_incremental_decoding_matches_full_call(num_blocks, norm_first):
    x, context, _, source_mask = _inputs(np.random.default_rng(5))
    blocks = [_block(norm_first=norm_first) for _ in range(num_blocks)]
    hidden = x
    for block in blocks:
        hidden, full_scores = block(
            hidden,
            context,
            encoder_padding_mask=source_mask,
            return_attention_scores=True,
        )
    incremental, step_scores = _run_incrementally(blocks, x, context, source_mask, 8)
    np.testing.assert_allclose(incremental, hidden, atol=1e-5)
    np.testing.assert_allclose(step_scores, full_scores, atol=1e-5)


def test_call_step_compiles_with_xla_and_a_tensor_step_index():
    x, context, _, source_mask = _inputs(np.random.default_rng(6))
    block = _block()
    full = block(x, context, encoder_padding_mask=source_mask)
    step = tf.function(block.call_step, jit_compile=True)
    incremental, _ = _run_incrementally(
        [block], x, context, source_mask, max_length=6, step_fn=step
    )
    np.testing.assert_allclose(incremental, full, atol=1e-5)


def test_cache_layout():
    block = _block()
    block(*_inputs(np.random.default_rng(7))[:2])
    (key_cache, value_cache), (cross_key, cross_value) = block.build_cache(
        batch_size=3, max_length=10, context=np.zeros((3, 5, 8), "float32")
    )
    assert tuple(key_cache.shape) == tuple(value_cache.shape) == (3, 10, 2, 4)
    assert tuple(cross_key.shape) == tuple(cross_value.shape) == (3, 5, 2, 4)


def test_causal_with_dropout_in_training_mode():
    x, context, _, source_mask = _inputs(np.random.default_rng(8))
    x = tf.constant(x)
    block = _block(dropout=0.3)
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs, scores = block(x, context, training=True, return_attention_scores=True)
        loss = tf.reduce_sum(outputs[:, :3] ** 2)
    gradient = tape.gradient(loss, x).numpy()
    assert np.all(gradient[:, 3:] == 0.0) and np.any(gradient[:, :3] != 0.0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_check_layer(norm_first):
    check_layer(
        TransformerDecoderBlock,
        {
            "d_model": 8,
            "num_heads": 2,
            "dff": 16,
            "dropout": 0.1,
            "norm_first": norm_first,
        },
        list(_inputs(np.random.default_rng(9))),
    )


def test_check_layer_with_attention_scores():
    check_layer(
        TransformerDecoderBlock,
        {"d_model": 8, "num_heads": 2, "dff": 16},
        list(_inputs(np.random.default_rng(10))),
        call_kwargs={"return_attention_scores": True},
        fit=False,
    )


def test_no_nan_under_mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        target_embedding = PositionalEmbedding(vocab_size=50, d_model=16, max_positions=12)
        source_embedding = PositionalEmbedding(vocab_size=50, d_model=16, max_positions=12)
        block = TransformerDecoderBlock(d_model=16, num_heads=4, dff=32)
        target_ids = np.array([[1, 7, 9, 0, 0], [1, 2, 3, 4, 5], [1, 0, 0, 0, 0]])
        source_ids = np.array(
            [[5, 9, 3, 0, 0, 0], [1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]]
        )
        outputs, scores = block(
            target_embedding(target_ids),
            source_embedding(source_ids),
            return_attention_scores=True,
        )
        outputs = keras.ops.convert_to_numpy(outputs)
        assert outputs.dtype == np.float16
        assert np.isfinite(outputs).all()
        assert np.isfinite(keras.ops.convert_to_numpy(scores)).all()
        cache = block.build_cache(3, 5, source_embedding(source_ids))
        step, _, _ = block.call_step(
            target_embedding(target_ids[:, :1]),
            0,
            cache,
            encoder_padding_mask=source_ids != 0,
        )
        assert np.isfinite(keras.ops.convert_to_numpy(step)).all()
    finally:
        keras.mixed_precision.set_global_policy("float32")


# ------------------------------------------------------------- decoder-only
def test_decoder_only_matches_keras_hub_without_encoder():
    x, _, target_mask, _ = _inputs(np.random.default_rng(2))
    block = _block(layer_norm_epsilon=1e-6)
    outputs = block(x, decoder_padding_mask=target_mask)
    assert not block.cross_attention.built and not block.cross_attention.weights

    reference = keras_hub.layers.TransformerDecoder(
        intermediate_dim=DFF, num_heads=NUM_HEADS, layer_norm_epsilon=1e-6
    )
    reference(x)
    copy_into_keras_hub(block, reference)
    expected = reference(x, decoder_padding_mask=target_mask)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_decoder_only_language_model_generates_through_its_cache(tmp_path):
    vocab_size, length = 11, 6
    embedding = PositionalEmbedding(vocab_size, D_MODEL, max_positions=length)
    block = _block()
    head = keras.layers.Dense(vocab_size)
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, head(block(embedding(ids))))
    tokens = np.array([[1, 4, 9, 3, 7, 2]], "int32")
    full = np.asarray(model(tokens))

    cache = block.build_cache(1, length)
    steps = []
    for t in range(length):
        x = embedding(tokens[:, t : t + 1], start_index=t)
        out, cache, scores = block.call_step(x, t, cache)
        assert scores is None
        steps.append(np.asarray(head(out)))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)

    path = tmp_path / "lm.keras"
    model.save(path)
    np.testing.assert_allclose(keras.models.load_model(path)(tokens), full, atol=1e-6)


def test_decoder_only_and_encoder_decoder_uses_are_not_mixed():
    x, context, _, _ = _inputs(np.random.default_rng(3))
    decoder_only = _block()
    decoder_only(x)
    with pytest.raises(ValueError, match="built decoder-only"):
        decoder_only(x, context)
    with pytest.raises(ValueError, match="no cross-attention to cache"):
        decoder_only.build_cache(1, 4, context)
    with pytest.raises(ValueError, match="decoder-only block"):
        decoder_only(x, return_attention_scores=True)
    with_encoder = _block()
    with_encoder(x, context)
    with pytest.raises(ValueError, match="was built with cross-attention"):
        with_encoder(x)
