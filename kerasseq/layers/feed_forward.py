"""Position-wise feed-forward sublayer (with its Add & Norm) of a Transformer block."""

import keras

from kerasseq.layers._padding import RealPositions, skip_or_full, skips_padding


@keras.saving.register_keras_serializable(package="kerasseq")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network with dropout, residual and LayerNorm.

    `FFN(x) = max(0, x W_1 + b_1) W_2 + b_2` (Vaswani et al., 2017,
    "Attention Is All You Need", equation 2), applied to every position with
    the same weights. The residual connection and the LayerNorm live in this
    layer too, so that a Transformer block is three sublayer calls:
    post-norm `y = LayerNorm(x + Dropout(FFN(x)))` (default), pre-norm
    (`norm_first=True`) `y = x + Dropout(FFN(LayerNorm(x)))`.

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        dff: width of the hidden layer (2048 for `d_model=512` in the paper).
        dropout: dropout rate on the FFN output, before the residual addition.
        activation: activation of the hidden layer (name or callable).
        norm_first: pre-norm if True, post-norm if False (default).
        layer_norm_epsilon: epsilon of the LayerNormalization.
        skip_padding: if True (default), a training call that gets a
            `padding_mask` runs the network on the real positions only (see
            below). False always computes every position.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        x: `(batch_size, length, d_model)`.
        training: Python bool or `None` (dropout).
        padding_mask: optional boolean `(batch_size, length)`, True on real
            positions.

    Returns:
        `(batch_size, length, d_model)`.

    Skipping padding: the network is position-wise, so a padding position's
    output depends on nothing but that position, and in a Transformer nothing
    reads it back (attention masks padding keys, the loss masks padding
    labels). With `training=True`, a `padding_mask` and `skip_padding=True`,
    the layer gathers the real positions into one `(num_real, d_model)`
    matrix, runs the two Dense layers, dropout and LayerNorm on it, and
    scatters the results back; padding positions keep their input `x`. The
    real positions' outputs and every gradient equal the full computation's;
    on a batch that is 60 % padding, the FFN does 40 % of the work. The gather
    has a data-dependent shape, which XLA cannot compile, so under
    `jit_compile=True` (and in inference, `training` False or None) every
    position is computed and the padding outputs are the usual ones. Batches
    with less than a quarter of padding are computed in full too (the gather
    and scatter would cost more than they save; `_padding.SKIP_PADDING_BELOW`).

    Example:

    >>> layer = FeedForward(d_model=16, dff=64)
    >>> tuple(layer(keras.random.normal((2, 5, 16))).shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        d_model,
        dff,
        dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-5,
        skip_padding=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if dff < 1:
            raise ValueError(f"dff must be >= 1. Received: dff={dff}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
        self.d_model = d_model
        self.dff = dff
        self.dropout = dropout
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.skip_padding = bool(skip_padding)
        self.supports_masking = True
        self.intermediate_dense = keras.layers.Dense(
            dff,
            activation=activation,
            dtype=self.dtype_policy,
            name="intermediate_dense",
        )
        self.output_dense = keras.layers.Dense(
            d_model, dtype=self.dtype_policy, name="output_dense"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )

    def build(self, x_shape):
        if x_shape[-1] is not None and x_shape[-1] != self.d_model:
            raise ValueError(
                "The last dimension of the input must equal d_model. "
                f"Received: input shape={tuple(x_shape)}, d_model={self.d_model}"
            )
        self.intermediate_dense.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.dff,))
        self.layer_norm.build(x_shape)
        self.built = True

    def call(self, x, training=None, padding_mask=None):
        if skips_padding(self, padding_mask, training):

            def skip():
                positions = RealPositions(padding_mask)
                rows = self._sublayer(positions.gather(x), training)  # (num_real, d_model)
                return positions.scatter(rows, into=x)

            return skip_or_full(skip, lambda: self._sublayer(x, training), padding_mask)
        return self._sublayer(x, training)

    def _sublayer(self, x, training):
        hidden = self.layer_norm(x) if self.norm_first else x
        hidden = self.output_dense(self.intermediate_dense(hidden))
        x = x + self.dropout_layer(hidden, training=training)
        return x if self.norm_first else self.layer_norm(x)

    def compute_output_shape(self, x_shape):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "dff": self.dff,
                "dropout": self.dropout,
                "activation": self.activation,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "skip_padding": self.skip_padding,
            }
        )
        return config
