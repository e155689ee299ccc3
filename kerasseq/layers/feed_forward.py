"""Position-wise feed-forward sublayer (with its Add & Norm) of a Transformer block."""

import keras

from kerasseq._validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="kerasseq")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network with dropout, residual and LayerNorm.

    `FFN(x) = max(0, x W_1 + b_1) W_2 + b_2` (Vaswani et al., 2017,
    "Attention Is All You Need", equation 2), applied to every position with
    the same weights, inside its Add & Norm: post-norm
    `y = LayerNorm(x + Dropout(FFN(x)))`, or with `norm_first=True` pre-norm
    `y = x + Dropout(FFN(LayerNorm(x)))`, so that a Transformer block is
    three sublayer calls.

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        dff: width of the hidden layer (2048 for `d_model=512` in the paper).
        dropout: dropout rate on the FFN output, before the residual addition.
        activation: activation of the hidden layer (name or callable).
        norm_first: pre-norm if True, post-norm (the paper) if False.
        layer_norm_epsilon: epsilon of the LayerNormalization.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        x: `(batch_size, length, d_model)`.
        training: Python bool or `None` (dropout).

    Returns:
        `(batch_size, length, d_model)`; the Keras mask of `x` passes on.

    Example:

    >>> layer = FeedForward(d_model=16, dff=64)
    >>> tuple(layer(keras.random.normal((2, 5, 16))).shape)
    (2, 5, 16)
    """

    def __init__(self, d_model, dff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.dff = d_model, check_positive_int("dff", dff)
        self.dropout = check_rate("dropout", dropout)
        self.norm_first, self.layer_norm_epsilon = norm_first, layer_norm_epsilon
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.supports_masking = True
        self.intermediate_dense = keras.layers.Dense(
            self.dff, activation=activation, dtype=self.dtype_policy, name="intermediate_dense")
        self.output_dense = keras.layers.Dense(d_model, dtype=self.dtype_policy, name="output_dense")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")

    def build(self, x_shape):
        if x_shape[-1] is not None and x_shape[-1] != self.d_model:
            raise ValueError("The last dimension of the input must equal d_model. "
                             f"Received: input shape={tuple(x_shape)}, d_model={self.d_model}")
        self.intermediate_dense.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.dff,))
        self.layer_norm.build(x_shape)

    def call(self, x, training=None):
        h = self.layer_norm(x) if self.norm_first else x  # pre-norm: LN(x) into the FFN
        ffn = self.output_dense(self.intermediate_dense(h))  # max(0, h W_1 + b_1) W_2 + b_2
        y = x + self.dropout_layer(ffn, training=training)  # residual
        return y if self.norm_first else self.layer_norm(y)  # post-norm: LN(x + Dropout(FFN(x)))

    def compute_output_shape(self, x_shape):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, dff=self.dff, dropout=self.dropout,
                      activation=self.activation, norm_first=self.norm_first,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config
