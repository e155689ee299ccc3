"""Tests for kerasseq.layers.transformer_encoder_block, against keras-hub."""

import keras
import keras_hub
import numpy as np
import pytest

from kerasseq.layers.positional_embedding import PositionalEmbedding
from kerasseq.layers.transformer_encoder_block import TransformerEncoderBlock
from tests.layers.references import (
    check_padded_layer,
    copy_into_keras_hub,
    padded_inputs,
    randomize_layer_norms,
)


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_keras_hub_transformer_encoder(norm_first):
    x, padding_mask = padded_inputs(np.random.default_rng(0))
    block = TransformerEncoderBlock(
        d_model=8, num_heads=2, dff=16, norm_first=norm_first, layer_norm_epsilon=1e-6
    )
    block(x, encoder_padding_mask=padding_mask)
    randomize_layer_norms(block, np.random.default_rng(1))
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
    x, padding_mask = padded_inputs(np.random.default_rng(2))
    block = TransformerEncoderBlock(d_model=8, num_heads=2, dff=16)
    short = block(x[:1, :4])
    padded = block(x[:1], encoder_padding_mask=padding_mask[:1])
    np.testing.assert_allclose(padded[:, :4], short, atol=1e-5)

    embedding = PositionalEmbedding(vocab_size=9, d_model=8, max_positions=10)
    token_ids = np.array([[3, 4, 5, 0, 0]])
    outputs = block(embedding(token_ids))
    np.testing.assert_array_equal(outputs._keras_mask, token_ids != 0)
    np.testing.assert_allclose(
        outputs, block(embedding(token_ids), encoder_padding_mask=token_ids != 0), atol=1e-6
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_check_layer(norm_first):
    check_padded_layer(TransformerEncoderBlock, 3, dff=16, dropout=0.1, norm_first=norm_first)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="d_model=10, num_heads=3"):
        TransformerEncoderBlock(d_model=10, num_heads=3, dff=8)


def test_no_nan_under_mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        embedding = PositionalEmbedding(vocab_size=50, d_model=16, max_positions=12)
        block = TransformerEncoderBlock(d_model=16, num_heads=4, dff=32)
        token_ids = np.array(
            [[5, 9, 3, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]]
        )
        outputs = keras.ops.convert_to_numpy(block(embedding(token_ids)))
        assert outputs.dtype == np.float16
        assert np.isfinite(outputs).all()
    finally:
        keras.mixed_precision.set_global_policy("float32")
