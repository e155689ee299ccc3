"""The bridge from the encoder's final state to the decoder's initial state."""

import keras

from kerasseq._validation import check_positive_int


@keras.saving.register_keras_serializable(package="kerasseq")
class Bridge(keras.layers.Layer):
    """Maps the encoder's final state(s) to the decoder's initial state.

        s_0 = tanh(W m + b),   m = [h_S; c_S]

    This is the learned non-linear map of Cho et al. (2014), which initialises
    the decoder from the summary m of the source sentence (the encoder's last
    hidden and cell states h_S, c_S; symbols as in docs/notation.md). It lets an LSTM
    encoder (state `[h; c]`, possibly in two directions) feed a GRU decoder of
    any size.

    Args:
        units: int, size of the decoder state s_0.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    Call arguments:
        final_state: float tensor `(batch_size, state_dim)`: the concatenated
            final states of the encoder (`LSTMEncoder` returns this).

    Returns:
        `(batch_size, units)`: the decoder's initial state s_0, in (-1, 1).

    Example:

    >>> bridge = Bridge(units=4)
    >>> bridge(np.zeros((2, 6))).shape
    TensorShape([2, 4])
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.dense = keras.layers.Dense(
            units, activation="tanh", dtype=self.dtype_policy, name="dense"
        )

    def build(self, final_state_shape):
        self.dense.build(final_state_shape)

    def call(self, final_state):
        return self.dense(final_state)  # s_0 = tanh(W m + b), m = final_state

    def compute_output_shape(self, final_state_shape):
        return tuple(final_state_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config
