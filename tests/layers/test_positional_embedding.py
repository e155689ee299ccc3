"""Tests for kerasseq.layers.positional_embedding."""

import math

import keras
import numpy as np
import pytest

from kerasseq.layers.positional_embedding import (
    PositionalEmbedding,
    positional_encoding,
)
from tests.helpers import check_layer


def test_table_matches_the_seed_tutorial():
    # The seed's table (d_model=4; 0.010 = sin(1/10000^(2/4))) shows values cut,
    # not rounded, to 3 decimals, hence atol=1.5e-3. Its 4th column for
    # positions 2-4 (0.998, 0.995, 0.992) is not cos(pos/100) (about 0.9998,
    # 0.9996, 0.9992), so only the three first columns are compared there.
    seed = {
        0: [0.000, 1.000, 0.000, 1.000],
        1: [0.841, 0.540, 0.010, 0.999],
        2: [0.909, -0.416, 0.020],
        3: [0.141, -0.989, 0.030],
        4: [-0.757, -0.653, 0.039],
    }
    table = positional_encoding(5, 4)
    for position, values in seed.items():
        np.testing.assert_allclose(table[position, : len(values)], values, atol=1.5e-3)


def test_table_matches_the_formula_elementwise():
    d_model = 10
    table = positional_encoding(7, d_model)
    for pos in range(7):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    assert positional_encoding(3, 5).shape == (3, 5)  # odd d_model works


def test_output_is_scaled_embedding_plus_encoding_and_mask_is_propagated():
    layer = PositionalEmbedding(vocab_size=11, d_model=6, max_positions=8)
    token_ids = np.array([[4, 7, 2, 0, 0], [1, 2, 3, 4, 5]])
    outputs = layer(token_ids)
    embeddings = keras.ops.convert_to_numpy(layer.token_embedding.embeddings)
    expected = embeddings[token_ids] * math.sqrt(6) + positional_encoding(5, 6)[None]
    np.testing.assert_allclose(outputs, expected, atol=1e-5)
    np.testing.assert_array_equal(outputs._keras_mask, token_ids != 0)
    np.testing.assert_array_equal(layer.compute_mask(token_ids), token_ids != 0)


def test_start_index_gives_the_encoding_of_that_position():
    layer = PositionalEmbedding(vocab_size=11, d_model=6, max_positions=8)
    token_ids = np.array([[4, 7, 2, 9, 3]])
    full = keras.ops.convert_to_numpy(layer(token_ids))
    for t in range(5):
        step = layer(token_ids[:, t : t + 1], start_index=t)
        np.testing.assert_allclose(step[:, 0], full[:, t], atol=1e-6)
    # A tensor start_index (as inside a tf.function decoding loop) works too.
    step = layer(token_ids[:, 3:4], start_index=keras.ops.convert_to_tensor(3))
    np.testing.assert_allclose(step[:, 0], full[:, 3], atol=1e-6)


def test_too_long_sequence_raises():
    layer = PositionalEmbedding(vocab_size=11, d_model=6, max_positions=4)
    with pytest.raises(ValueError, match="max_positions=4"):
        layer(np.ones((1, 5), "int32"))
    with pytest.raises(ValueError, match="start_index=4"):
        layer(np.ones((1, 1), "int32"), start_index=4)
    with pytest.raises(ValueError, match="d_model must be >= 1"):
        PositionalEmbedding(vocab_size=11, d_model=0, max_positions=4)


def test_mask_reaches_the_next_layer_in_a_functional_model():
    inputs = keras.Input((None,), dtype="int32")
    embedded = PositionalEmbedding(vocab_size=11, d_model=6, max_positions=8)(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)  # mask-aware
    model = keras.Model(inputs, [embedded, pooled])
    token_ids = np.array([[4, 7, 0, 0]])
    embedded_values, pooled_values = model(token_ids)
    np.testing.assert_allclose(
        pooled_values[0], np.mean(embedded_values[0, :2], axis=0), atol=1e-5
    )


def test_check_layer():
    token_ids = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]], dtype="int32")
    check_layer(
        PositionalEmbedding,
        {"vocab_size": 10, "d_model": 8, "max_positions": 12},
        token_ids,
    )
