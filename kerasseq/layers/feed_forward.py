"""Position-wise feed-forward sublayer (with its Add & Norm) of a Transformer block."""

import keras

from kerasseq._validation import check_positive_int, check_rate
from kerasseq.layers._transformer_layer import ResidualSublayer


@keras.saving.register_keras_serializable(package="kerasseq")
class FeedForward(ResidualSublayer):
    """Position-wise feed-forward network with dropout, residual and LayerNorm.

    `FFN(x) = max(0, x W_1 + b_1) W_2 + b_2` (Vaswani et al., 2017,
    "Attention Is All You Need", equation 2), applied to every position with
    the same weights. The residual connection and the LayerNorm live in this
    layer too (see `ResidualSublayer`), so that a Transformer block is three
    sublayer calls.

    Args:
        dff: width of the hidden layer (2048 for `d_model=512` in the paper).
        activation: activation of the hidden layer (name or callable).
        d_model, dropout, norm_first, layer_norm_epsilon, **kwargs: as
            `ResidualSublayer` (`dropout` is the rate on the FFN output).

    Call arguments:
        x: `(batch_size, length, d_model)`.
        training: Python bool or `None` (dropout).

    Returns:
        `(batch_size, length, d_model)`.

    Example:

    >>> layer = FeedForward(d_model=16, dff=64)
    >>> tuple(layer(keras.random.normal((2, 5, 16))).shape)
    (2, 5, 16)
    """

    def __init__(self, d_model, dff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_epsilon=1e-5, **kwargs):
        super().__init__(d_model, dropout, norm_first, layer_norm_epsilon, **kwargs)
        self.dff = check_positive_int("dff", dff)
        check_rate("dropout", dropout)
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.intermediate_dense = keras.layers.Dense(
            self.dff, activation=activation, dtype=self.dtype_policy, name="intermediate_dense")
        self.output_dense = keras.layers.Dense(d_model, dtype=self.dtype_policy, name="output_dense")
        self._create_add_and_norm()

    def build(self, x_shape):
        self._check_input_width(x_shape)
        self.intermediate_dense.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.dff,))
        self.layer_norm.build(x_shape)
        self.built = True

    def call(self, x, training=None):
        hidden = self.output_dense(self.intermediate_dense(self._pre_norm(x)))
        return self._add_and_norm(x, hidden, training)

    def get_config(self):
        config = super().get_config()
        config.update({"dff": self.dff, "activation": self.activation})
        return config
