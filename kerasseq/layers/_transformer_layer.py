"""The bases of kerasseq's Transformer layers: their shared arguments and Add & Norm."""

import keras


class TransformerLayer(keras.layers.Layer):
    """The arguments every Transformer layer of kerasseq takes, and their config.

    The base of the sublayers (`ResidualSublayer`: `FeedForward` and the
    attention sublayers) and of the blocks (`TransformerBlock`). Its output
    has the shape of its input `x`, and it passes the Keras mask of `x` on.

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        dropout: dropout rate.
        norm_first: pre-norm if True, post-norm (the paper) if False.
        layer_norm_epsilon: epsilon of the LayerNormalization(s).
        **kwargs: standard `keras.layers.Layer` arguments.
    """

    def __init__(self, d_model, dropout=0.0, norm_first=False, layer_norm_epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.dropout = dropout
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.supports_masking = True

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, dropout=self.dropout, norm_first=self.norm_first,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config


class ResidualSublayer(TransformerLayer):
    """A Transformer sublayer with its dropout, residual connection and LayerNorm.

    Post-norm (Vaswani et al., 2017, section 5.4):
    `y = LayerNorm(x + Dropout(Sublayer(x)))`; pre-norm (`norm_first=True`,
    Xiong et al., 2020): `y = x + Dropout(Sublayer(LayerNorm(x)))`. The
    subclasses (`FeedForward` and `BaseAttention`, hence the three attention
    sublayers) compute `Sublayer` between `_pre_norm(x)` and
    `_add_and_norm(x, sublayer_output, training)`; `dropout` is the rate on
    the sublayer output, before the residual addition.

    Args: as `TransformerLayer`.
    """

    def _create_add_and_norm(self):
        """Creates the dropout and LayerNorm layers; subclasses call it last in
        `__init__`, after their own sublayers, which keeps the order of the
        weights and of the random seeds drawn at construction."""
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )

    def _check_input_width(self, x_shape):
        if x_shape[-1] is not None and x_shape[-1] != self.d_model:
            raise ValueError("The last dimension of the input must equal d_model. "
                             f"Received: input shape={tuple(x_shape)}, d_model={self.d_model}")

    def _pre_norm(self, x):
        return self.layer_norm(x) if self.norm_first else x

    def _add_and_norm(self, residual, sublayer_output, training):
        x = residual + self.dropout_layer(sublayer_output, training=training)
        return x if self.norm_first else self.layer_norm(x)
