"""Token embedding plus sinusoidal positional encoding."""

import math

import keras
import numpy as np
from keras import ops

from kerasseq._validation import check_positive_int


def positional_encoding(length, d_model):
    """Sinusoidal position table of Vaswani et al., 2017 (section 3.5), interleaved.

    `PE(pos, 2i) = sin(pos / 10000^(2i / d_model))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))`: even columns hold
    sines, odd columns the cosines of the same angle.

    Args:
        length: number of positions (rows).
        d_model: encoding size (columns); may be odd.

    Returns:
        float32 numpy array `(length, d_model)`.

    Example:

    >>> positional_encoding(3, 4).round(3)
    array([[ 0.   ,  1.   ,  0.   ,  1.   ],
           [ 0.841,  0.54 ,  0.01 ,  1.   ],
           [ 0.909, -0.416,  0.02 ,  1.   ]], dtype=float32)
    """
    positions = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    pair_index = np.arange(d_model) // 2  # (d_model,): 0, 0, 1, 1, 2, 2, ... (the `i` in 2i and 2i+1)
    angle_rates = 1.0 / np.power(10000.0, 2.0 * pair_index / d_model)
    angles = positions * angle_rates[None, :]  # (length, d_model)
    table = np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)


@keras.saving.register_keras_serializable(package="kerasseq")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by `sqrt(d_model)` plus the sinusoidal positional encoding.

    `y_t = sqrt(d_model) * E[token_t] + PE(start_index + t)` (Vaswani et al.,
    2017, "Attention Is All You Need", sections 3.4 and 3.5); see
    `positional_encoding` for `PE`. Token id 0 is padding: the layer emits the
    Keras mask `token_ids != 0`, which downstream kerasseq layers use as their
    padding mask. The table is fixed (not trained) and covers `max_positions`
    positions.

    Args:
        vocab_size: number of token ids (id 0 is reserved for padding).
        d_model: embedding size.
        max_positions: number of positions in the table; asking for a position
            `>= max_positions` raises a `ValueError` when the sequence length and
            `start_index` are static Python ints (eager calls, functional
            models with a fixed length); with dynamic shapes the TensorFlow
            slice op raises an `InvalidArgumentError` at run time instead.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        token_ids: int `(batch_size, length)`.
        start_index: absolute position of `token_ids[:, 0]` (int or scalar int
            tensor); a decoding step at position `t` passes `start_index=t` so
            that its single token gets `PE(t)`.

    Returns:
        `(batch_size, length, d_model)` with mask `(batch_size, length)`.

    Example:

    >>> layer = PositionalEmbedding(vocab_size=10, d_model=8, max_positions=16)
    >>> y = layer(np.array([[5, 3, 0]]))
    >>> tuple(y.shape), ops.convert_to_numpy(layer.compute_mask(np.array([[5, 3, 0]])))
    ((1, 3, 8), array([[ True,  True, False]]))
    """

    def __init__(self, vocab_size, d_model, max_positions, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.d_model = check_positive_int("d_model", d_model)
        self.max_positions = check_positive_int("max_positions", max_positions)
        self.token_embedding = keras.layers.Embedding(
            vocab_size, d_model, mask_zero=True, dtype=self.dtype_policy, name="token_embedding")
        # (max_positions, d_model), numpy constant
        self.encoding_table = positional_encoding(max_positions, d_model)

    def build(self, token_ids_shape):
        self.token_embedding.build(token_ids_shape)
        self.built = True

    def call(self, token_ids, start_index=0):
        length = ops.shape(token_ids)[1]
        self._check_length(length, start_index)
        table = ops.convert_to_tensor(self.encoding_table, dtype=self.compute_dtype)
        positions = ops.slice(table, [start_index, 0], [length, self.d_model])  # (length, d_model)
        scale = ops.cast(math.sqrt(self.d_model), self.compute_dtype)
        embedded = self.token_embedding(token_ids) * scale  # (batch_size, length, d_model)
        return embedded + positions[None, :, :]

    def _check_length(self, length, start_index):
        if isinstance(length, int) and isinstance(start_index, int) and (
                start_index < 0 or start_index + length > self.max_positions):
            raise ValueError("Positions must lie in [0, max_positions). Received: "
                             f"start_index={start_index}, sequence length={length}, "
                             f"max_positions={self.max_positions}")

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, 0)

    def compute_output_shape(self, token_ids_shape):
        return tuple(token_ids_shape) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model,
                      max_positions=self.max_positions)
        return config
