"""Tests for kerasseq.layers.transformer_encoder_block, against keras-hub."""

import keras
import keras_hub
import numpy as np
import pytest

from kerasseq.layers.positional_embedding import PositionalEmbedding
from kerasseq.layers.transformer_encoder_block import TransformerEncoderBlock
from tests.helpers import check_layer


def _inputs(rng):
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    padding_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    return x, padding_mask


def copy_into_keras_hub(block, reference):
    """Copies a TransformerEncoderBlock's weights into a built keras_hub encoder."""
    pairs = [
        (block.self_attention.attention, reference._self_attention_layer),
        (block.self_attention.layer_norm, reference._self_attention_layer_norm),
        (
            block.feed_forward.intermediate_dense,
            reference._feedforward_intermediate_dense,
        ),
        (block.feed_forward.output_dense, reference._feedforward_output_dense),
        (block.feed_forward.layer_norm, reference._feedforward_layer_norm),
    ]
    for ours, theirs in pairs:
        theirs.set_weights(ours.get_weights())


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_keras_hub_transformer_encoder(norm_first):
    x, padding_mask = _inputs(np.random.default_rng(0))
    block = TransformerEncoderBlock(
        d_model=8, num_heads=2, dff=16, norm_first=norm_first, layer_norm_epsilon=1e-6
    )
    outputs = block(x, encoder_padding_mask=padding_mask)
    # Non-trivial LayerNorm parameters, so a swapped norm would be caught.
    rng = np.random.default_rng(1)
    for norm in (block.self_attention.layer_norm, block.feed_forward.layer_norm):
        norm.set_weights([rng.uniform(0.5, 1.5, 8), rng.normal(0, 0.1, 8)])
    outputs = block(x, encoder_padding_mask=padding_mask)

    reference = keras_hub.layers.TransformerEncoder(
        intermediate_dim=16,
        num_heads=2,
        normalize_first=norm_first,
        layer_norm_epsilon=1e-6,
    )
    reference(x, padding_mask=padding_mask)
    copy_into_keras_hub(block, reference)
    expected = reference(x, padding_mask=padding_mask)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_extra_padding_changes_nothing_and_mask_is_propagated():
    x, padding_mask = _inputs(np.random.default_rng(2))
    block = TransformerEncoderBlock(d_model=8, num_heads=2, dff=16)
    short = block(x[:1, :4])
    padded = block(x[:1], encoder_padding_mask=padding_mask[:1])
    np.testing.assert_allclose(padded[:, :4], short, atol=1e-5)

    embedding = PositionalEmbedding(vocab_size=9, d_model=8, max_length=10)
    token_ids = np.array([[3, 4, 5, 0, 0]])
    outputs = block(embedding(token_ids))
    np.testing.assert_array_equal(outputs._keras_mask, token_ids != 0)
    np.testing.assert_allclose(
        outputs, block(embedding(token_ids), encoder_padding_mask=token_ids != 0), atol=1e-6
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_check_layer(norm_first):
    x, padding_mask = _inputs(np.random.default_rng(3))
    check_layer(
        TransformerEncoderBlock,
        {
            "d_model": 8,
            "num_heads": 2,
            "dff": 16,
            "dropout": 0.1,
            "norm_first": norm_first,
        },
        [x, padding_mask],
    )


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="d_model=10, num_heads=3"):
        TransformerEncoderBlock(d_model=10, num_heads=3, dff=8)


def test_no_nan_under_mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        embedding = PositionalEmbedding(vocab_size=50, d_model=16, max_length=12)
        block = TransformerEncoderBlock(d_model=16, num_heads=4, dff=32)
        token_ids = np.array(
            [[5, 9, 3, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]]
        )
        outputs = keras.ops.convert_to_numpy(block(embedding(token_ids)))
        assert outputs.dtype == np.float16
        assert np.isfinite(outputs).all()
    finally:
        keras.mixed_precision.set_global_policy("float32")
